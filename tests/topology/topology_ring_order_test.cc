// ringOrder: a host's ranks in the model's ring order, on hwloc and NCCL topology files (a
// DGX-2's 16 GPUs through NVSwitches, 8 A100s, MI250s over xGMI), with GPUs shared by ranks or
// missing.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "detect_fixtures.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

using fixtures::hwlocDir;
using fixtures::sharedDir;

// ---- ringOrder: a host's ranks in the model's ring order ----

// The GPUs of order, consecutive pairs (wrapping) all NVLink peers.
void expectNvlinkRing(const System& sys, const std::vector<int>& gpuOfRank,
                      const std::vector<int>& order, const std::string& what) {
  for (size_t i = 0; i < order.size(); ++i) {
    int a = gpuOfRank[order[i]], b = gpuOfRank[order[(i + 1) % order.size()]];
    if (a != b) {
      EXPECT_GT(nvlinkCount(sys, a, b), 0) << what << ": GPU " << a << " -> " << b;
    }
  }
}

// order's GPUs are the model ring (restricted to them) read from some start.
void expectFollowsModelRing(const System& sys, const std::vector<int>& gpuOfRank,
                            const std::vector<int>& order, const std::string& what) {
  auto rings = buildRings(sys, computePaths(sys));
  ASSERT_EQ(rings.size(), 1u) << what;
  std::set<int> used(gpuOfRank.begin(), gpuOfRank.end());
  std::vector<int> ring;
  for (int g : rings[0])
    if (used.count(g)) ring.push_back(g);
  std::vector<int> gpus;
  for (int r : order)
    if (gpus.empty() || gpus.back() != gpuOfRank[r]) gpus.push_back(gpuOfRank[r]);
  ASSERT_EQ(gpus.size(), ring.size()) << what;
  auto at = std::find(ring.begin(), ring.end(), gpus[0]);
  ASSERT_NE(at, ring.end()) << what;
  std::rotate(ring.begin(), at, ring.end());
  EXPECT_EQ(gpus, ring) << what;
}

// Consecutive GPU pairs of order (wrapping) that are not NVLink peers.
int nonNvlinkHops(const System& sys, const std::vector<int>& gpuOfRank,
                  const std::vector<int>& order) {
  int n = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    int a = gpuOfRank[order[i]], b = gpuOfRank[order[(i + 1) % order.size()]];
    if (a != b && nvlinkCount(sys, a, b) == 0) n++;
  }
  return n;
}

bool isPermutation(std::vector<int> v) {
  std::sort(v.begin(), v.end());
  for (int i = 0; i < static_cast<int>(v.size()); ++i)
    if (v[i] != i) return false;
  return true;
}

TEST(RingOrder, Dgx2SixteenGpusThroughNvSwitches) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/hwloc-tests_nvidiaDGX2.xml", &sys), braidSuccess)
      << lastError();
  ASSERT_EQ(sys.gpus.size(), 16u);
  // hwloc's matrix joins each baseboard's 8 GPUs to its 6 NVSwitches but not the switches of
  // the two boards to each other, so the model ring leaves board 0-7 once and comes back once.
  std::vector<int> backwards(16), shuffled(16);
  for (int r = 0; r < 16; ++r) backwards[r] = 15 - r;
  for (int r = 0; r < 16; ++r) shuffled[r] = (r * 5 + 3) % 16;
  for (const auto& gpuOfRank : {backwards, shuffled}) {
    std::vector<int> order = ringOrder(sys, gpuOfRank);
    ASSERT_EQ(order.size(), 16u);
    EXPECT_TRUE(isPermutation(order));
    EXPECT_EQ(order[0], 0);
    EXPECT_EQ(nonNvlinkHops(sys, gpuOfRank, order), 2);
    expectFollowsModelRing(sys, gpuOfRank, order, "DGX-2");
  }
  // Half the GPUs: the ring restricted to them.
  std::vector<int> half = {14, 2, 9, 5, 0, 11, 7, 12};
  std::vector<int> order = ringOrder(sys, half);
  EXPECT_TRUE(isPermutation(order));
  EXPECT_EQ(order[0], 0);
  expectFollowsModelRing(sys, half, order, "DGX-2 half");
  EXPECT_EQ(nonNvlinkHops(sys, half, order), 2);
}

TEST(RingOrder, Simai8A100AndSharedOrMissingGpus) {
  std::string nccl = sharedDir() + "/topologies/nccl";
  REQUIRE_DIR(nccl);
  System sys;
  ASSERT_EQ(loadNcclTopoXml(nccl + "/simai_topo_8A100_4CX6.xml", &sys), braidSuccess)
      << lastError();
  ASSERT_EQ(sys.gpus.size(), 8u);
  std::vector<int> gpuOfRank = {3, 6, 0, 5, 1, 7, 2, 4};
  std::vector<int> order = ringOrder(sys, gpuOfRank);
  EXPECT_TRUE(isPermutation(order));
  EXPECT_EQ(order[0], 0);
  expectNvlinkRing(sys, gpuOfRank, order, "simai");
  expectFollowsModelRing(sys, gpuOfRank, order, "simai");
  // Two ranks per GPU sit together, in rank order; a rank without a GPU comes last.
  std::vector<int> two = {1, 0, 1, 0, -1, 99};
  order = ringOrder(sys, two);
  ASSERT_EQ(order.size(), 6u);
  EXPECT_TRUE(isPermutation(order));
  EXPECT_EQ(order[0], 0);
  EXPECT_EQ(order[1], 2);  // rank 0's GPU 1 shared with rank 2
  EXPECT_EQ(std::vector<int>(order.begin() + 2, order.begin() + 4), (std::vector<int>{1, 3}));
  EXPECT_EQ(std::vector<int>(order.begin() + 4, order.end()), (std::vector<int>{4, 5}));
  EXPECT_TRUE(ringOrder(sys, {}).empty());
  EXPECT_EQ(ringOrder(sys, {-1, -1}), (std::vector<int>{0, 1}));
}

TEST(RingOrder, Mi250FollowsXgmi) {
  std::string nccl = sharedDir() + "/topologies/nccl";
  REQUIRE_DIR(nccl);
  System sys;
  ASSERT_EQ(loadNcclTopoXml(nccl + "/rccl_topo_8p1h_MI250.xml", &sys), braidSuccess) << lastError();
  std::vector<int> gpuOfRank = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<int> order = ringOrder(sys, gpuOfRank);
  EXPECT_TRUE(isPermutation(order));
  expectNvlinkRing(sys, gpuOfRank, order, "MI250");  // not rank order: 1-2 has no xGMI
  expectFollowsModelRing(sys, gpuOfRank, order, "MI250");
}

}  // namespace
}  // namespace braid::topo
