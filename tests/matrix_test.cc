// The generated matrix: every (collective x algorithm) row of the algorithm table x dtype x
// op x nranks {1,2,3,4,5,7,8,13,16} x count x placement x root, ranks as threads; a sampled
// subset with ranks as processes. The algorithm is forced per call with
// braidCommSetAlgorithm, so every row runs whatever the default rule would pick.
#include <gtest/gtest.h>

#include <cstdio>

#include "collective_cases.h"
#include "test_util.h"

namespace braid::test {
namespace {

std::string runAll(braidComm_t comm, int rank, int nranks, bool sampled) {
  for (const Case& c : matrixCases(nranks, sampled)) {
    std::string e = runCase(c, comm, rank, nranks);
    if (!e.empty()) return e;  // ranks are out of step after a failure
  }
  return "";
}

class MatrixThreads : public ::testing::TestWithParam<int> {};

TEST_P(MatrixThreads, EveryRowOfTheTable) {
  const int n = GetParam();
  auto errors = runThreads(n, [n](braidComm_t c, int r) { return runAll(c, r, n, false); });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

INSTANTIATE_TEST_SUITE_P(NRanks, MatrixThreads, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 13, 16));

class MatrixProcesses : public ::testing::TestWithParam<int> {};

TEST_P(MatrixProcesses, SampledRows) {
  const int n = GetParam();
  // A tiny pipelining grain forces the many-piece paths.
  auto results = runProcesses(n, "matrix", {"BRAID_CHUNKSIZE=256"});
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

INSTANTIATE_TEST_SUITE_P(NRanks, MatrixProcesses, ::testing::Values(2, 3, 5, 8));

TEST(Matrix, EveryCollectiveHasARow) {
  for (int c = 0; c < kNumCollectives; ++c) {
    int rows = 0;
    for (const AlgorithmInfo& a : algorithms()) rows += static_cast<int>(a.coll) == c;
    EXPECT_GT(rows, 0) << collectiveName(static_cast<Collective>(c)) << " has no algorithm";
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("matrix", [](braidComm_t c, int r, int n) {
    std::string e = braid::test::runAll(c, r, n, true);
    if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
    return e.empty() ? 0 : 1;
  });
  int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
