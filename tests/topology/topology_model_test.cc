// The topology model's pieces on inputs built in the test: bus ids, link bandwidths, and the
// host tree and network paths of a system of several hosts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "topology/topology.h"

namespace braid::topo {
namespace {

// ---- Pieces ----

TEST(Topology, BusIds) {
  std::string out;
  ASSERT_TRUE(normalizeBusId("0000:4F:00.0", &out));
  EXPECT_EQ(out, "0000:4f:00.0");
  ASSERT_TRUE(normalizeBusId("10000:00:00.0", &out));
  EXPECT_EQ(out, "10000:00:00.0");
  ASSERT_TRUE(normalizeBusId("17:00.1", &out));
  EXPECT_EQ(out, "0000:17:00.1");
  ASSERT_TRUE(normalizeBusId("1:0:1f.7", &out));
  EXPECT_EQ(out, "0001:00:1f.7");
  EXPECT_FALSE(normalizeBusId("", &out));
  EXPECT_FALSE(normalizeBusId("0000:00:20.0", &out));
  EXPECT_FALSE(normalizeBusId("0000:00:00.8", &out));
  EXPECT_FALSE(normalizeBusId("123456789:00:00.0", &out));
  EXPECT_FALSE(normalizeBusId("gg:00.0", &out));
}

TEST(Topology, Bandwidths) {
  EXPECT_DOUBLE_EQ(pcieBw(8, 16), 12.0);
  EXPECT_DOUBLE_EQ(pcieBw(16, 16), 24.0);
  EXPECT_DOUBLE_EQ(pcieBw(32, 16), 48.0);
  EXPECT_DOUBLE_EQ(pcieBw(16, 8), 12.0);
  EXPECT_DOUBLE_EQ(pcieBw(0, 0), 12.0);
  EXPECT_DOUBLE_EQ(pcieBw(2.5, 16), 3.0);  // NCCL: 15 x 16 / 80
  EXPECT_DOUBLE_EQ(pcieBw(5, 8), 3.0);
  // Any input is defined arithmetic (no int overflow): 169999999 lanes x 240 / 80.
  EXPECT_DOUBLE_EQ(pcieBw(32, 169999999), 169999999.0 * 3);
  EXPECT_DOUBLE_EQ(pcieBw(1e9, 1), std::floor(1e9 * 7.5 + 0.5) / 80);
  EXPECT_EQ(pcieGeneration(16), 4);
  EXPECT_EQ(pcieGeneration(2.5), 1);
  EXPECT_DOUBLE_EQ(nvlinkBwPerLink(80), 20.0);
  EXPECT_DOUBLE_EQ(nvlinkBwPerLink(90), 20.6);
  EXPECT_EQ(nvlinkVersion(90), 4);
  EXPECT_DOUBLE_EQ(netBw(200), 25.0);
}

TEST(Topology, HostTreeAndNetPaths) {
  // Two hosts, each 2 GPUs and a NIC under one switch.
  System sys;
  for (int h = 0; h < 3; ++h) {
    sys.hosts.push_back({"h" + std::to_string(h), ""});
    Cpu cpu;
    cpu.host = h;
    cpu.numaid = 0;
    NodeRef c = addCpu(&sys, cpu);
    Pci sw;
    sw.pci.busid = "0000:10:00.0";
    sw.pci.class_code = 0x060400;
    sw.parent = c;
    NodeRef s = addPci(&sys, sw);
    for (int g = 0; g < 2; ++g) {
      Gpu gpu;
      gpu.host = h;
      gpu.pci.busid = "0000:1" + std::to_string(g + 1) + ":00.0";
      gpu.parent = g == 0 ? c : s;  // GPU 1 of each host shares the NIC's switch
      addGpu(&sys, gpu);
    }
    Nic nic;
    nic.host = h;
    nic.pci.busid = "0000:20:00.0";
    nic.parent = s;
    int n = addNic(&sys, nic).index;
    Net net;
    net.nic = n;
    net.name = "mlx5_0";
    net.speed_gbps = 400;
    addNet(&sys, net);
  }
  connectSystem(&sys);
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_gpu[0][2].cls, PathClass::kNet);
  EXPECT_EQ(p.gpu_gpu[0][1].cls, PathClass::kPhb);
  HostTree t = buildHostTree(sys, p);
  EXPECT_EQ(t.parent, (std::vector<int>{-1, 0, 0}));
  EXPECT_EQ(t.leader_gpu, (std::vector<int>{1, 3, 5}));
  auto rings = buildRings(sys, p);
  EXPECT_EQ(rings.size(), 3u);
  std::string xml;
  EXPECT_EQ(dumpNcclTopoXml(sys, &xml), braidInvalidUsage);
}

}  // namespace
}  // namespace braid::topo
