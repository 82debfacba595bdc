// Diagnosis of wrong and stuck jobs: BRAID_CHECK's comparison of the ranks' calls, and
// BRAID_STALL_WARN's line naming the peer a rank waits on. Ranks as threads. Its main sets
// BRAID_CHECK=1 and BRAID_STALL_WARN=1 before Braid reads its configuration.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace braid::test {
namespace {

// Each rank's all-reduce of `count(rank)` floats: the result code and message.
struct Outcome {
  braidResult_t res = braidSuccess;
  std::string message;
};

TEST(Check, DifferentCountsFailEveryRankWithTheirList) {
  std::vector<Outcome> out(3);
  auto errors = runThreads(3, [&](braidComm_t comm, int rank) -> std::string {
    std::vector<float> buf(16, 1.0f);
    const size_t count = rank == 2 ? 11 : 10;
    out[rank].res =
        braidAllReduce(buf.data(), buf.data(), count, braidFloat32, braidSum, comm, nullptr);
    out[rank].message = braidGetLastError(comm);
    // The check left the communicator usable: a matching call goes through.
    if (braidAllReduce(buf.data(), buf.data(), 4, braidFloat32, braidSum, comm, nullptr) !=
        braidSuccess)
      return std::string("the next call failed: ") + braidGetLastError(comm);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].res, braidInvalidUsage) << "rank " << r;
    EXPECT_NE(out[r].message.find("BRAID_CHECK"), std::string::npos) << out[r].message;
    EXPECT_NE(out[r].message.find("rank 0: all-reduce count 10 float op sum"), std::string::npos)
        << out[r].message;
    EXPECT_NE(out[r].message.find("rank 2: all-reduce count 11 float op sum"), std::string::npos)
        << out[r].message;
  }
}

// The same as processes: rank 1 of 3 calls with another count; each child prints its message
// and exits 0 only on braidInvalidUsage with the list.
int mismatchChild(braidComm_t comm, int rank, int) {
  std::vector<float> buf(16, 1.0f);
  const braidResult_t res = braidAllReduce(buf.data(), buf.data(), rank == 1 ? 7 : 10, braidFloat32,
                                           braidSum, comm, nullptr);
  const std::string msg = braidGetLastError(comm);
  std::fprintf(stderr, "%s\n", msg.c_str());
  return res == braidInvalidUsage && msg.find("rank 1: all-reduce count 7") != std::string::npos
             ? 0
             : 1;
}

TEST(Check, DifferentCountsAsProcesses) {
  auto results = runProcesses(3, "check-mismatch", {});
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

TEST(Check, DifferentCollectivesAndRootsAreListed) {
  std::vector<Outcome> out(2);
  auto errors = runThreads(2, [&](braidComm_t comm, int rank) -> std::string {
    std::vector<float> buf(8, 1.0f);
    out[rank].res =
        rank == 0
            ? braidBroadcast(buf.data(), buf.data(), 8, braidFloat32, 0, comm, nullptr)
            : braidReduce(buf.data(), buf.data(), 8, braidFloat32, braidMax, 1, comm, nullptr);
    out[rank].message = braidGetLastError(comm);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].res, braidInvalidUsage) << "rank " << r;
    EXPECT_NE(out[r].message.find("rank 0: broadcast count 8 float root 0"), std::string::npos)
        << out[r].message;
    EXPECT_NE(out[r].message.find("rank 1: reduce count 8 float op max root 1"), std::string::npos)
        << out[r].message;
  }
}

TEST(Check, MatchingCallsRunAsUsual) {
  auto errors = runThreads(4, [](braidComm_t comm, int rank) -> std::string {
    std::vector<int32_t> buf(1000, rank + 1);
    if (braidAllReduce(buf.data(), buf.data(), buf.size(), braidInt32, braidSum, comm, nullptr) !=
        braidSuccess)
      return braidGetLastError(comm);
    for (int32_t v : buf)
      if (v != 10) return "all-reduce gave " + std::to_string(v) + ", not 10";
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// Rank 1 comes 2.5 s late to an all-reduce: rank 0, after BRAID_STALL_WARN (1 s) without
// progress, logs what it waits for, naming rank 1; the call then completes.
TEST(Stall, WarnsNamingThePeerItWaitsOn) {
  testing::internal::CaptureStderr();
  auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    float x = 1.0f;
    if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
      return braidGetLastError(comm);
    return x == 2.0f ? "" : "wrong sum";
  });
  const std::string log = testing::internal::GetCapturedStderr();
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_NE(log.find("has made no progress for"), std::string::npos) << log;
  EXPECT_NE(log.find("waiting to receive from rank 1"), std::string::npos) << log;
  EXPECT_EQ(log.find("waiting to receive from rank 0"), std::string::npos) << log;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  setenv("BRAID_CHECK", "1", 1);
  setenv("BRAID_STALL_WARN", "1", 1);
  braid::test::registerChildRole("check-mismatch", braid::test::mismatchChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
