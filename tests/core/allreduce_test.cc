// All-reduce over nranks {1,2,3,4,5,7,8} x counts {0, 1, 7, 4097, 1M+3} x every dtype x
// every op x in-place / out-of-place / mixed (odd ranks in place), with ranks as threads and
// as processes, checked element by element against the closed form in test_util. With
// reducedSizes() (under a sanitizer) the largest count is 64K+3: still many pieces per rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "braid/braid.h"
#include "test_scale.h"
#include "test_util.h"

namespace braid::test {
namespace {

// Instances named by their rank count ("2ranks"), so that the variants in meson.build select
// them by name.
std::string rankCountName(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

const std::vector<size_t> kCounts = {0, 1, 7, 4097,
                                     reducedSizes() ? (1u << 16) + 3 : (1u << 20) + 3};

// Every case for one rank of comm; returns a description of the first failures, or "".
std::string allReduceCases(braidComm_t comm, int rank, int nranks) {
  std::string errors;
  int failures = 0;
  std::vector<char> send, recv, expect, pristine;
  for (braidDataType_t t : kHostTypes) {
    const size_t es = braidTypeSize(t);
    for (braidRedOp_t op : kOps) {
      for (size_t count : kCounts) {
        send.resize(count * es + 1);
        recv.resize(count * es + 1);
        expect.resize(count * es + 1);
        expectedAllReduceRange(t, op, nranks, 0, count, expect.data());
        // Form 0: out of place, 1: in place, 2: mixed, odd ranks in place and even ranks not
        // (each rank chooses its form, as with NCCL; the algorithm must not depend on it).
        // The mixed form skips the largest count, which every form runs on one algorithm.
        for (int form = 0; form < 3; ++form) {
          if (form == 2 && count > 4097) continue;
          const bool inPlace = form == 2 ? rank % 2 == 1 : form == 1;
          fillInput(t, op, rank, count, send.data());
          pristine = send;
          void* out = inPlace ? send.data() : recv.data();
          braidResult_t res = braidAllReduce(send.data(), out, count, t, op, comm, nullptr);
          std::string what = std::string(braidTypeName(t)) + " " + braidOpName(op) + " count " +
                             std::to_string(count) + (inPlace ? " in-place" : " out-of-place") +
                             (form == 2 ? " (ranks mixed)" : "");
          if (res != braidSuccess) {
            errors +=
                what + ": " + braidGetErrorString(res) + ": " + braidGetLastError(comm) + "\n";
            return errors;  // the ranks are out of step now
          }
          long long bad = firstMismatch(out, expect.data(), count * es, es);
          if (bad >= 0 && failures++ < 5)
            errors += what + ": wrong at element " + std::to_string(bad) + "\n";
          if (!inPlace && firstMismatch(send.data(), pristine.data(), count * es, es) >= 0 &&
              failures++ < 5)
            errors += what + ": the send buffer was modified\n";
        }
      }
    }
  }
  return errors;
}

class AllReduceRanks : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceRanks, Threads) {
  const int n = GetParam();
  auto errors = runThreads(n, [n](braidComm_t c, int r) { return allReduceCases(c, r, n); });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

TEST_P(AllReduceRanks, Processes) {
  const int n = GetParam();
  // Odd rank counts also use a tiny pipelining grain, to force the many-piece paths.
  std::vector<std::string> env;
  if (n % 2 == 1) env = {"BRAID_CHUNKSIZE=4096"};
  auto results = runProcesses(n, "allreduce", env);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << " output:\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty()) << "a braid- segment was left in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(NRanks, AllReduceRanks, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         rankCountName);

TEST(AllReduce, StreamQueuesInOrder) {
  auto errors = runThreads(3, [](braidComm_t comm, int rank) -> std::string {
    braidStream_t s;
    if (braidStreamCreate(&s) != braidSuccess) return "stream create failed";
    std::vector<int32_t> a(1000, rank + 1), b(1000, 0);
    // Two dependent calls: b = sum(a); then in place b = sum(b).
    braidAllReduce(a.data(), b.data(), a.size(), braidInt32, braidSum, comm, s);
    braidAllReduce(b.data(), b.data(), b.size(), braidInt32, braidSum, comm, s);
    if (braidStreamDestroy(s) != braidSuccess) return braidGetLastError(nullptr);
    for (int32_t v : b)
      if (v != 18) return "expected 3 * (1+2+3) = 18, got " + std::to_string(v);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// One thread drives every rank (nccl-tests' pattern) and queues the whole group on one
// stream: the ranks' shares must run side by side, not one after another (the first would
// wait for the others forever).
TEST(AllReduce, OneThreadGroupsEveryRankOnOneStream) {
  constexpr int kRanks = 3;
  braidComm_t comms[kRanks];
  const int devs[kRanks] = {0, 1, 2};
  ASSERT_EQ(braidCommInitAll(comms, kRanks, devs), braidSuccess);
  braidStream_t s = nullptr;
  ASSERT_EQ(braidStreamCreate(&s), braidSuccess);
  std::vector<std::vector<int32_t>> data(kRanks), from(kRanks);
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  for (int r = 0; r < kRanks; ++r) {
    data[r].assign(1000, r + 1);
    from[r].assign(1000, -1);
    braidAllReduce(data[r].data(), data[r].data(), 1000, braidInt32, braidSum, comms[r], s);
  }
  ASSERT_EQ(braidGroupEnd(), braidSuccess) << braidGetLastError(nullptr);
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  for (int r = 0; r < kRanks; ++r) {
    braidSend(data[r].data(), 1000, braidInt32, (r + 1) % kRanks, comms[r], s);
    braidRecv(from[r].data(), 1000, braidInt32, (r + kRanks - 1) % kRanks, comms[r], s);
  }
  ASSERT_EQ(braidGroupEnd(), braidSuccess) << braidGetLastError(nullptr);
  EXPECT_EQ(braidStreamSynchronize(s), braidSuccess) << braidGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(data[r], std::vector<int32_t>(1000, 6)) << "rank " << r;
    EXPECT_EQ(from[r], std::vector<int32_t>(1000, 6)) << "rank " << r;
  }
  EXPECT_EQ(braidStreamDestroy(s), braidSuccess);
  for (braidComm_t c : comms) EXPECT_EQ(braidCommDestroy(c), braidSuccess);
}

// The reference the cases check against, computed for one period and copied, is byte for byte
// the element-by-element closed form, at every offset and length around the period.
TEST(AllReduce, PeriodicReferenceIsTheElementwiseOne) {
  for (braidDataType_t t : kHostTypes)
    for (braidRedOp_t op : kOps)
      for (int nranks : {1, 3, 16}) {
        const size_t es = braidTypeSize(t);
        for (size_t first : {size_t{0}, size_t{7}, kInputPeriod - 1, size_t{3} * 4097})
          for (size_t count : {size_t{0}, size_t{1}, kInputPeriod - 1, kInputPeriod + 1,
                               size_t{4} * kInputPeriod, size_t{1000} + 3}) {
            std::vector<char> got(count * es + 1, 1), want(count * es + 1, 1);
            expectedAllReduceRange(t, op, nranks, first, count, got.data());
            for (size_t i = 0; i < count; ++i)
              expectedAllReduce(t, op, nranks, first + i, &want[i * es]);
            ASSERT_EQ(got, want) << braidTypeName(t) << " " << braidOpName(op) << " nranks "
                                 << nranks << " first " << first << " count " << count;
            // On one rank the all-reduce is rank 0's input: fillInput's tiling, pinned the same
            // way.
            if (nranks != 1) continue;
            std::vector<char> in(count * es + 1, 1);
            fillInput(t, op, 0, count, in.data());
            std::vector<char> one(count * es + 1, 1);
            for (size_t i = 0; i < count; ++i) expectedAllReduce(t, op, 1, i, &one[i * es]);
            ASSERT_EQ(in, one) << "fillInput " << braidTypeName(t) << " " << braidOpName(op);
          }
      }
}

TEST(AllReduce, SegmentsUnlinkedAfterInit) {
  auto errors = runThreads(4, [](braidComm_t, int) -> std::string {
    return shmLeftovers(getpid()).empty() ? "" : "segment still linked after init";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("allreduce", [](braidComm_t c, int r, int n) {
    std::string e = braid::test::allReduceCases(c, r, n);
    if (!e.empty()) std::fprintf(stderr, "%s", e.c_str());
    return e.empty() ? 0 : 1;
  });
  int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
