// braidCommSplit (NCCL's ncclCommSplit): ranks of one color form a communicator ordered by
// key, then parent rank; BRAID_SPLIT_NOCOLOR gets none. Checked with ranks as threads and
// as processes, by the members' parent ranks (all-gathered on the new communicator) and an
// all-reduce over them; bad arguments are refused on every rank without breaking the parent,
// also when only one rank has them; a config's unset fields inherit the parent's.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "test_util.h"

namespace braid::test {
namespace {

// The members' parent ranks in new-rank order, as the new communicator all-gathers them,
// must be `expected`; an all-reduce over them must give their sum.
std::string checkMembers(braidComm_t sub, int parentRank, const std::vector<int>& expected,
                         const char* what) {
  int count = 0, rank = -1;
  if (braidCommCount(sub, &count) != braidSuccess || braidCommUserRank(sub, &rank) != braidSuccess)
    return std::string(what) + ": count/rank: " + braidGetLastError(sub);
  if (count != static_cast<int>(expected.size()))
    return std::string(what) + ": count " + std::to_string(count) + ", expected " +
           std::to_string(expected.size());
  std::vector<int32_t> members(count, -1);
  const int32_t me = parentRank;
  if (braidAllGather(&me, members.data(), 1, braidInt32, sub, nullptr) != braidSuccess)
    return std::string(what) + ": all-gather: " + braidGetLastError(sub);
  for (int i = 0; i < count; ++i)
    if (members[i] != expected[i])
      return std::string(what) + ": new rank " + std::to_string(i) + " is parent rank " +
             std::to_string(members[i]) + ", expected " + std::to_string(expected[i]);
  if (members[rank] != parentRank) return std::string(what) + ": own rank misplaced";
  int64_t sum = 0, want = 0;
  const int64_t mine = parentRank + 1;
  for (int r : expected) want += r + 1;
  if (braidAllReduce(&mine, &sum, 1, braidInt64, braidSum, sub, nullptr) != braidSuccess)
    return std::string(what) + ": all-reduce: " + braidGetLastError(sub);
  if (sum != want)
    return std::string(what) + ": sum " + std::to_string(sum) + ", expected " +
           std::to_string(want);
  return "";
}

std::string splitCases(braidComm_t comm, int rank) {
  int n = 0;
  braidCommCount(comm, &n);
  // Bad arguments on every rank: each rank refuses its own.
  braidComm_t sub = nullptr;
  if (braidCommSplit(comm, -2, 0, &sub, nullptr) != braidInvalidArgument)
    return "color -2 was not refused";
  if (std::string(braidGetLastError(nullptr)).find("color is -2") == std::string::npos)
    return std::string("color message: ") + braidGetLastError(nullptr);
  if (braidCommSplit(comm, 0, 0, nullptr, nullptr) != braidInvalidArgument)
    return "NULL newcomm was not refused";
  braidGroupStart();
  const braidResult_t inGroup = braidCommSplit(comm, 0, 0, &sub, nullptr);
  braidGroupEnd();
  if (inGroup != braidInvalidUsage) return "a split inside a group was not refused";
  braidConfig_t bad = BRAID_CONFIG_INITIALIZER;
  bad.magic = 0;
  if (braidCommSplit(comm, 0, 0, &sub, &bad) != braidInvalidArgument || sub)
    return "a bad config was not refused";
  if (std::string(braidGetLastError(nullptr)).find("braidCommSplit: config") == std::string::npos)
    return std::string("bad config message: ") + braidGetLastError(nullptr);

  // A bad argument on one rank only: that rank refuses it, and its peers, instead of waiting
  // for it, fail naming it and its reason; the parent stays usable.
  if (n > 1) {
    const braidResult_t res = braidCommSplit(comm, rank == 1 ? -3 : 0, 0, &sub, nullptr);
    const std::string msg = braidGetLastError(nullptr);
    if (res != (rank == 1 ? braidInvalidArgument : braidInvalidUsage) || sub)
      return "one rank's color -3: result " + std::to_string(res) + ": " + msg;
    if (msg.find("color is -3") == std::string::npos ||
        (rank != 1 && msg.find("failed on rank 1 of the parent") == std::string::npos))
      return "one rank's color -3: message: " + msg;
    braidConfig_t badOnLast = BRAID_CONFIG_INITIALIZER;
    badOnLast.timeoutSec = -1;
    const braidResult_t res2 =
        braidCommSplit(comm, 0, 0, &sub, rank == n - 1 ? &badOnLast : nullptr);
    const std::string msg2 = braidGetLastError(nullptr);
    if (res2 == braidSuccess || sub || msg2.find("timeoutSec is -1") == std::string::npos ||
        (rank != n - 1 &&
         msg2.find("rank " + std::to_string(n - 1) + " of the parent") == std::string::npos))
      return "last rank's bad config: result " + std::to_string(res2) + ": " + msg2;
  }

  // Even and odd ranks, ordered by descending parent rank (key = -rank).
  if (braidCommSplit(comm, rank % 2, -rank, &sub, nullptr) != braidSuccess)
    return std::string("split by parity: ") + braidGetLastError(comm);
  std::vector<int> parity;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == rank % 2) parity.push_back(r);
  std::string err = checkMembers(sub, rank, parity, "parity split");
  // A split of the split: everyone in one color, equal keys keep the sub-communicator's order.
  if (err.empty() && n > 2) {
    int subRank = -1;
    braidCommUserRank(sub, &subRank);
    braidComm_t nested = nullptr;
    if (braidCommSplit(sub, 7, 0, &nested, nullptr) != braidSuccess)
      err = std::string("nested split: ") + braidGetLastError(sub);
    else
      err = checkMembers(nested, rank, parity, "nested split");
    if (nested) braidCommDestroy(nested);
  }
  braidCommDestroy(sub);
  if (!err.empty()) return err;

  // The last rank opts out; the others keep their order.
  sub = reinterpret_cast<braidComm_t>(1);
  const int color = rank == n - 1 ? BRAID_SPLIT_NOCOLOR : 0;
  if (braidCommSplit(comm, color, 0, &sub, nullptr) != braidSuccess)
    return std::string("split with NOCOLOR: ") + braidGetLastError(comm);
  if (rank == n - 1) {
    if (sub) return "BRAID_SPLIT_NOCOLOR gave a communicator";
  } else {
    std::vector<int> rest;
    for (int r = 0; r < n - 1; ++r) rest.push_back(r);
    err = checkMembers(sub, rank, rest, "NOCOLOR split");
    braidCommDestroy(sub);
    if (!err.empty()) return err;
  }
  // The parent still works after all of it.
  int64_t one = 1, total = 0;
  if (braidAllReduce(&one, &total, 1, braidInt64, braidSum, comm, nullptr) != braidSuccess ||
      total != n)
    return std::string("parent after splits: ") + braidGetLastError(comm);
  return "";
}

TEST(Split, Threads) {
  for (int n : {1, 2, 3, 4}) {
    auto failures = runThreads(n, splitCases);
    EXPECT_TRUE(failures.empty()) << n << " ranks: " << failures.front();
  }
}

// A config that leaves timeoutSec and stallWarnSec unset (BRAID_CONFIG_INITIALIZER) inherits
// the parent's, as a NULL config does: the parent's 0.2 s stall warning shows when rank 1 comes
// 0.6 s late, and its 1 s timeout ends a call that rank 1 comes 2.5 s late to.
TEST(Split, UnsetConfigFieldsInheritTheParentsTimeouts) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  testing::internal::CaptureStderr();
  std::vector<std::string> errors(2);
  std::vector<braidResult_t> late(2, braidSuccess);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      braidConfig_t config = BRAID_CONFIG_INITIALIZER;
      config.timeoutSec = 1.0;
      config.stallWarnSec = 0.2;
      braidComm_t comm = nullptr, sub = nullptr;
      if (braidCommInitRankConfig(&comm, 2, id, rank, &config) != braidSuccess) {
        errors[rank] = std::string("init: ") + braidGetLastError(nullptr);
        return;
      }
      braidConfig_t unset = BRAID_CONFIG_INITIALIZER;
      if (braidCommSplit(comm, 0, 0, &sub, &unset) != braidSuccess) {
        errors[rank] = std::string("split: ") + braidGetLastError(nullptr);
      } else {
        float x = 1.0f;
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
        if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, sub, nullptr) != braidSuccess)
          errors[rank] = std::string("first all-reduce: ") + braidGetLastError(sub);
        if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        late[rank] = braidAllReduce(&x, &x, 1, braidFloat32, braidSum, sub, nullptr);
        braidCommDestroy(sub);
      }
      braidCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  const std::string log = testing::internal::GetCapturedStderr();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_NE(log.find("all-reduce #1 (count 1 of float, op sum) has made no progress"),
            std::string::npos)
      << log;
  EXPECT_EQ(late[0], braidTimeout) << log;
}

TEST(Split, Processes) {
  auto results = runProcesses(4, "split");
  for (size_t r = 0; r < results.size(); ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("split", [](braidComm_t comm, int rank, int) {
    const std::string err = braid::test::splitCases(comm, rank);
    if (!err.empty()) std::printf("rank %d: %s\n", rank, err.c_str());
    return err.empty() ? 0 : 1;
  });
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
