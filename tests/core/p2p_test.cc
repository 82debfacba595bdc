// Point-to-point and groups: fused sends and receives cannot deadlock whatever their order,
// messages between two ranks keep posting order, self-sends work inside a group
// (EDGE_CASES.md #1), and count 0 is a no-op (#2). Ranks as threads and as processes.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "test_util.h"

namespace braid::test {
namespace {

int32_t pattern(int from, int to, int msg, size_t i) {
  return static_cast<int32_t>(from * 1000003 + to * 10007 + msg * 101 + static_cast<int>(i));
}

// Each rank posts, in one group, to every peer including itself: receives first (in
// reversed order relative to how the sender posts its sends), then two sends of different
// sizes. Message k from a to b must land in b's k-th receive from a.
std::string twoEachWay(braidComm_t comm, int rank, int nranks, bool recvFirst) {
  const size_t sizes[2] = {1000 + static_cast<size_t>(rank), 17};
  std::vector<std::vector<int32_t>> out(2 * nranks), in(2 * nranks);
  auto post = [&](bool sends) {
    for (int p = nranks - 1; p >= 0; --p) {  // peers in reverse order too
      for (int k = 0; k < 2; ++k) {
        if (sends) {
          auto& buf = out[2 * p + k];
          buf.resize(sizes[k] == 17 ? 17 : 1000 + rank);
          for (size_t i = 0; i < buf.size(); ++i) buf[i] = pattern(rank, p, k, i);
          if (braidSend(buf.data(), buf.size(), braidInt32, p, comm, nullptr) != braidSuccess)
            return false;
        } else {
          auto& buf = in[2 * p + k];
          buf.assign(k == 0 ? 1000 + p : 17, -1);
          if (braidRecv(buf.data(), buf.size(), braidInt32, p, comm, nullptr) != braidSuccess)
            return false;
        }
      }
    }
    return true;
  };
  braidGroupStart();
  bool ok = recvFirst ? post(false) && post(true) : post(true) && post(false);
  braidResult_t res = braidGroupEnd();
  if (!ok || res != braidSuccess) return std::string("group failed: ") + braidGetLastError(comm);
  for (int p = 0; p < nranks; ++p)
    for (int k = 0; k < 2; ++k) {
      const auto& buf = in[2 * p + k];
      for (size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != pattern(p, rank, k, i))
          return "message " + std::to_string(k) + " from rank " + std::to_string(p) +
                 " wrong at element " + std::to_string(i);
    }
  // Count 0 (and null buffers) is a successful no-op, in and out of a group.
  braidGroupStart();
  braidSend(nullptr, 0, braidFloat32, (rank + 1) % nranks, comm, nullptr);
  braidRecv(nullptr, 0, braidFloat32, (rank + nranks - 1) % nranks, comm, nullptr);
  if (braidGroupEnd() != braidSuccess) return "empty group failed";
  return "";
}

class P2P : public ::testing::TestWithParam<int> {};

TEST_P(P2P, ReversedOrderGroupsThreads) {
  const int n = GetParam();
  for (bool recvFirst : {true, false}) {
    auto errors =
        runThreads(n, [&](braidComm_t c, int r) { return twoEachWay(c, r, n, recvFirst); });
    for (const auto& e : errors) ADD_FAILURE() << e;
  }
}

TEST_P(P2P, ReversedOrderGroupsProcesses) {
  const int n = GetParam();
  auto results = runProcesses(n, "p2p", {"BRAID_CHUNKSIZE=512"});
  for (int r = 0; r < n; ++r) EXPECT_EQ(results[r].status, 0) << results[r].output;
}

INSTANTIATE_TEST_SUITE_P(NRanks, P2P, ::testing::Values(1, 2, 3, 4, 5));

TEST(P2P, OneThreadDrivesEveryRankInOneGroup) {
  // nccl-tests style: a single thread, several communicators, one group.
  const int n = 4;
  std::vector<braidComm_t> comms(n);
  ASSERT_EQ(braidCommInitAll(comms.data(), n, nullptr), braidSuccess);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(3000));
  for (int r = 0; r < n; ++r)
    for (auto& v : bufs[r]) v = static_cast<float>(r + 1);
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(braidAllReduce(bufs[r].data(), bufs[r].data(), 3000, braidFloat32, braidSum, comms[r],
                             nullptr),
              braidSuccess);
  ASSERT_EQ(braidGroupEnd(), braidSuccess) << braidGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r][2999], 10.0f);
  for (auto c : comms) braidCommDestroy(c);
}

TEST(P2P, BadPeerAndSelfOutsideGroupAreRefused) {
  braidComm_t comm;
  ASSERT_EQ(braidCommInitAll(&comm, 1, nullptr), braidSuccess);
  int x = 1;
  EXPECT_EQ(braidSend(&x, 1, braidInt32, 1, comm, nullptr), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("peer 1"), std::string::npos);
  EXPECT_EQ(braidSend(&x, 1, braidInt32, 0, comm, nullptr), braidInvalidUsage);
  EXPECT_EQ(braidRecv(nullptr, 1, braidInt32, 0, comm, nullptr), braidInvalidArgument);
  EXPECT_EQ(braidGroupEnd(), braidInvalidUsage);
  braidCommDestroy(comm);
}

// A call of a group that is refused makes the outermost braidGroupEnd return its error and
// run nothing of the group, as ncclGroupEnd does (the group's valid receive stays unrun); the
// next group runs as usual. On 2 thread ranks, so the dropped receive's peer is real.
TEST(P2P, RefusedCallInAGroupRunsNothingOfIt) {
  auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    int out = 10 + rank, in = -1;
    if (rank == 1) {
      braidGroupStart();
      braidGroupStart();  // nested: the outermost End decides
      if (braidSend(&out, 1, braidInt32, 7, comm, nullptr) != braidInvalidArgument)
        return "a send to peer 7 of 2 was not refused";
      if (braidRecv(&in, 1, braidInt32, 0, comm, nullptr) != braidSuccess)
        return std::string("the group's receive: ") + braidGetLastError(comm);
      if (braidGroupEnd() != braidSuccess) return "the inner braidGroupEnd failed";
      if (braidGroupEnd() != braidInvalidArgument) return "the outer braidGroupEnd succeeded";
      const std::string msg = braidGetLastError(comm);
      // Said as the refusing rank's (its log line carries [1]), the refusal once inside.
      if (msg.rfind("rank 1: braidGroupEnd: a call of the group was refused (braidSend: peer 7 "
                    "is out of range",
                    0) != 0 ||
          msg.find("nothing of the group ran") == std::string::npos)
        return "braidGroupEnd's message: " + msg;
      if (in != -1) return "the refused group's receive ran";
    }
    // Then a valid exchange in a group, on both ranks.
    braidGroupStart();
    braidSend(&out, 1, braidInt32, 1 - rank, comm, nullptr);
    braidRecv(&in, 1, braidInt32, 1 - rank, comm, nullptr);
    if (braidGroupEnd() != braidSuccess)
      return std::string("next group: ") + braidGetLastError(comm);
    return in == 11 - rank ? "" : "next group received " + std::to_string(in);
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

TEST(PreMulSum, ScalesEachContributionBeforeSumming) {
  const int n = 3;
  auto errors = runThreads(n, [](braidComm_t comm, int rank) -> std::string {
    braidRedOp_t op;
    double scalar = 0.5 * (rank + 1);
    if (braidRedOpCreatePreMulSum(&op, &scalar, braidFloat64, braidScalarHostImmediate, comm) !=
        braidSuccess)
      return braidGetLastError(comm);
    std::vector<double> x(100, 4.0), y(100, 0);
    // sum over ranks of 0.5 (r+1) * 4 = 2 * (1+2+3) = 12
    if (braidAllReduce(x.data(), y.data(), 100, braidFloat64, op, comm, nullptr) != braidSuccess)
      return braidGetLastError(comm);
    for (double v : y)
      if (v != 12.0) return "expected 12, got " + std::to_string(v);
    float f = 1;
    if (braidAllReduce(&f, &f, 1, braidFloat32, op, comm, nullptr) != braidInvalidArgument)
      return "an op made for float64 was accepted with float32";
    if (braidRedOpDestroy(op, comm) != braidSuccess) return "destroy failed";
    if (braidAllReduce(x.data(), y.data(), 100, braidFloat64, op, comm, nullptr) !=
        braidInvalidArgument)
      return "a destroyed op was accepted";
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

TEST(Streams, DestroyWaitsForQueuedWork) {
  const int n = 2;
  std::vector<braidComm_t> comms(n);
  ASSERT_EQ(braidCommInitAll(comms.data(), n, nullptr), braidSuccess);
  std::vector<braidStream_t> streams(n);
  std::vector<std::vector<int32_t>> bufs(n, std::vector<int32_t>(4096, 1));
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(braidStreamCreate(&streams[r]), braidSuccess);
    for (int k = 0; k < 20; ++k)
      ASSERT_EQ(braidAllReduce(bufs[r].data(), bufs[r].data(), 4096, braidInt32, braidSum, comms[r],
                               streams[r]),
                braidSuccess);
  }
  // Destroying the communicators first must wait for the queued calls, not free under them.
  std::vector<std::thread> ts;
  for (int r = 0; r < n; ++r) ts.emplace_back([&, r] { braidCommDestroy(comms[r]); });
  for (auto& t : ts) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(braidStreamDestroy(streams[r]), braidSuccess);
    EXPECT_EQ(bufs[r][4095], 1 << 20);  // doubled 20 times
  }
}

TEST(PreMulSum, QueuedCallKeepsTheScalarOfItsCall) {
  auto errors = runThreads(2, [](braidComm_t comm, int) -> std::string {
    braidStream_t s;
    braidStreamCreate(&s);
    braidRedOp_t op, op2;
    float two = 2, five = 5, x = 1, y = 0;
    braidRedOpCreatePreMulSum(&op, &two, braidFloat32, braidScalarHostImmediate, comm);
    braidAllReduce(&x, &y, 1, braidFloat32, op, comm, s);
    braidRedOpDestroy(op, comm);
    braidRedOpCreatePreMulSum(&op2, &five, braidFloat32, braidScalarHostImmediate, comm);
    if (braidStreamDestroy(s) != braidSuccess) return braidGetLastError(nullptr);
    braidRedOpDestroy(op2, comm);
    return y == 4.0f ? "" : "expected 2*1 + 2*1 = 4, got " + std::to_string(y);
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("p2p", [](braidComm_t c, int r, int n) {
    std::string e = braid::test::twoEachWay(c, r, n, true);
    if (e.empty()) e = braid::test::twoEachWay(c, r, n, false);
    if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
    return e.empty() ? 0 : 1;
  });
  int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
