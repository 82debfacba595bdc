// Tool outputs as topology files (../shared/topologies/tool-output, sysfs): nvidia-smi topo -m
// and -p2p, nvidia-smi nvlink --status, ibstat, ibstatus, lspci -nn / -vvv, lstopo console
// output and a /sys/class/infiniband snapshot. Facts read by hand from each file; every file of
// the fixture tree through loadTopologyFile; truncated and mutated replays without a crash.
// (The hwloc fsroot tarballs: topology_fsroot_archive_test.cc.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

namespace fs = std::filesystem;

using fixtures::readText;
using fixtures::sharedDir;
using fixtures::topoDir;

#define REQUIRE_FIXTURES() REQUIRE_FIXTURE_DIR(topoDir() + "/tool-output")

struct NicFact {
  std::string name;
  double gbps;
  LinkLayer layer;
};

// "mlx5_0:E:200 mlx5_1:I:200" -> facts (I InfiniBand, E Ethernet, ? unknown).
std::vector<NicFact> nicsOf(const std::string& spec) {
  std::vector<NicFact> out;
  std::istringstream in(spec);
  std::string w;
  while (in >> w) {
    size_t a = w.find(':'), b = w.find(':', a + 1);
    char l = w[a + 1];
    out.push_back({w.substr(0, a), std::atof(w.c_str() + b + 1),
                   l == 'I'   ? LinkLayer::kInfiniBand
                   : l == 'E' ? LinkLayer::kEthernet
                              : LinkLayer::kUnknown});
  }
  return out;
}

std::string repeatNics(const char* prefix, int from, int to, const char* rest) {
  std::string s;
  for (int i = from; i <= to; ++i) s += std::string(prefix) + std::to_string(i) + rest + " ";
  return s;
}

// What each file says, read from the file itself.
struct TextFacts {
  std::string file;  // under topologies/
  std::string kind;  // sniffTextTopology's answer ("" for a directory)
  int gpus;
  std::vector<int> numa;  // numaids of the model's NUMA nodes, sorted
  int nvswitches;
  int all_pairs_nvlink;  // every GPU pair has this many NVLinks, or 0 for none
  int nics;
  std::vector<NicFact> nic_facts;  // in model order; empty: not checked
};

const std::vector<TextFacts>& facts() {
  static const std::vector<TextFacts> f = {
      // 2 GPUs bonded by NV2, NUMA affinity N/A (one node of unknown id).
      {"tool-output/nvidia-smi-topo-m_2gpu_NV2_stas00.txt",
       "nvidia-smi-topo",
       2,
       {-1},
       0,
       2,
       0,
       {}},
      {"tool-output/nvidia-smi-topo-m_2gpu_PHB_stas00.txt",
       "nvidia-smi-topo",
       2,
       {-1},
       0,
       0,
       0,
       {}},
      // 8 GPUs, every pair NV12 (NVSwitch), NUMA 0 (GPU0-3) and 1 (GPU4-7).
      {"tool-output/nvidia-smi-topo-m_8xA100_NV12_stas00.txt",
       "nvidia-smi-topo",
       8,
       {0, 1},
       1,
       12,
       0,
       {}},
      {"tool-output/nvidia-smi-topo-m_8xH100_NV18_HT_stas00.txt",
       "nvidia-smi-topo",
       8,
       {0, 1},
       1,
       18,
       0,
       {}},
      {"tool-output/nvidia-smi-topo-m_8xH100_NV18_stas00.txt",
       "nvidia-smi-topo",
       8,
       {0, 1},
       1,
       18,
       0,
       {}},
      // Capability matrix only: 8 GPUs, nothing else.
      {"tool-output/nvidia-smi-topo-p2p-r_8xH100_stas00.txt", "nvidia-smi-p2p", 8, {}, 0, 0, 0, {}},
      // 9 CAs at 200: mlx5_0 Ethernet, mlx5_1..8 InfiniBand.
      {"tool-output/ibstat_a100-node_8xIB-HDR200_gpud.txt",
       "ibstat",
       0,
       {},
       0,
       0,
       9,
       nicsOf("mlx5_0:E:200 " + repeatNics("mlx5_", 1, 8, ":I:200"))},
      // 8 CAs IB 200 (the ibpanic line about mlx5_8 is noted, not a NIC).
      {"tool-output/ibstat_azure-ndv4-a100_8xCX6-VF-HDR_gpud.txt",
       "ibstat",
       0,
       {},
       0,
       0,
       8,
       nicsOf(repeatNics("mlx5_", 0, 7, ":I:200"))},
      // 8 CX-7 IB 400 (mlx5_0,1,4..9) + BlueField-3 mlx5_bond_0 Ethernet 200.
      {"tool-output/ibstat_h100-node_8xCX7-IB-NDR_1xBF3_gpud.txt",
       "ibstat",
       0,
       {},
       0,
       0,
       9,
       nicsOf("mlx5_0:I:400 mlx5_1:I:400 " + repeatNics("mlx5_", 4, 9, ":I:400") +
              "mlx5_bond_0:E:200")},
      // 12 CAs, all Ethernet: CX-7 at 400, CX-6 Dx (mlx5_1, 2, 7, 8) at 100; file order.
      {"tool-output/ibstat_h100-node_8xCX7-RoCE400_4xCX6Dx_gpud.txt",
       "ibstat",
       0,
       {},
       0,
       0,
       12,
       nicsOf("mlx5_0:E:400 mlx5_1:E:100 mlx5_10:E:400 mlx5_11:E:400 mlx5_2:E:100 mlx5_3:E:400 "
              "mlx5_4:E:400 mlx5_5:E:400 mlx5_6:E:400 mlx5_7:E:100 mlx5_8:E:100 mlx5_9:E:400")},
      // 9 ports: mlx5_0..7 IB 200 (4X HDR), mlx5_8 Ethernet 40 (4X QDR).
      {"tool-output/ibstatus_azure-ndv4-a100_9ports_gpud.txt",
       "ibstatus",
       0,
       {},
       0,
       0,
       9,
       nicsOf(repeatNics("mlx5_", 0, 7, ":I:200") + "mlx5_8:E:40")},
      // 8 A100 [10de:20b2], 6 NVSwitch bridges [10de:1af1], 8 IB VFs [0207] + 1 Ethernet VF;
      // no NUMA lines.
      {"sysfs/lspci-nn_a100-8gpu-vm_gpud.txt", "lspci", 8, {-1}, 6, 0, 9, {}},
      // 8 H100 (Device 2330), 4 NVSwitch bridges (22a3), 14 Ethernet functions (2 BCM5720,
      // 8 CX-7, 4 CX-6 Dx), NUMA 0 and 1.
      {"sysfs/lspci-vvv_hgx-h100_8xCX7_4xCX6Dx_gpud.txt", "lspci", 8, {0, 1}, 4, 0, 14, {}},
      // 8 GPUs x 12 links at 25 GB/s, peers not named (one NVSwitch assumed).
      {"sysfs/nvidia-smi-nvlink-status_8xA100_gpud.txt", "nvlink-status", 8, {}, 1, 12, 0, {}},
      // lstopo output: POWER9, NUMA P#0 and P#8, 6 VGA devices with no GPU OS device.
      {"sysfs/hwloc_fsroot/nvidiagpunumanodes.output", "lstopo", 0, {0, 8}, 0, 0, 0, {}},
      // KVM VM: one NUMA node, the virtio NIC ens3.
      {"sysfs/hwloc_fsroot/2pa-pcidomain32bits.output",
       "lstopo",
       0,
       {0},
       0,
       0,
       1,
       nicsOf("ens3:?:0")},
      // /sys/class/infiniband: mlx5_0,1,4..9 IB 400 + mlx5_bond_0 Ethernet 200.
      {"sysfs/sys-class-infiniband-h100_gpud",
       "",
       0,
       {},
       0,
       0,
       9,
       nicsOf("mlx5_0:I:400 mlx5_1:I:400 " + repeatNics("mlx5_", 4, 9, ":I:400") +
              "mlx5_bond_0:E:200")},
  };
  return f;
}

class TextFiles : public ::testing::TestWithParam<size_t> {};

TEST_P(TextFiles, Facts) {
  REQUIRE_FIXTURES();
  const TextFacts& f = facts()[GetParam()];
  std::string path = topoDir() + "/" + f.file;
  if (!fs::exists(path)) GTEST_SKIP() << path << " absent";
  if (!f.kind.empty()) {
    EXPECT_EQ(sniffTextTopology(readText(path)), f.kind) << f.file;
  }
  System sys;
  ASSERT_EQ(loadTopologyFile(path, &sys), braidSuccess) << lastError();
  EXPECT_EQ(static_cast<int>(sys.gpus.size()), f.gpus) << f.file;
  std::vector<int> numa;
  for (const Cpu& c : sys.cpus) numa.push_back(c.numaid);
  std::sort(numa.begin(), numa.end());
  EXPECT_EQ(numa, f.numa) << f.file;
  EXPECT_EQ(static_cast<int>(sys.nvswitches.size()), f.nvswitches) << f.file;
  int n = static_cast<int>(sys.gpus.size());
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b)
      EXPECT_EQ(nvlinkCount(sys, a, b), f.all_pairs_nvlink) << f.file << " GPU" << a << "-" << b;
  ASSERT_EQ(static_cast<int>(sys.nics.size()), f.nics) << f.file;
  for (size_t i = 0; i < f.nic_facts.size() && i < sys.nics.size(); ++i) {
    const Nic& nic = sys.nics[i];
    ASSERT_FALSE(nic.nets.empty()) << f.file << " NIC" << i;
    const Net& net = sys.nets[nic.nets[0]];
    EXPECT_EQ(net.name, f.nic_facts[i].name) << f.file;
    EXPECT_EQ(net.speed_gbps, f.nic_facts[i].gbps) << f.file << " " << net.name;
    EXPECT_EQ(net.link_layer, f.nic_facts[i].layer) << f.file << " " << net.name;
  }
  // The views braid-topo prints work on it.
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_gpu.size(), sys.gpus.size());
  EXPECT_FALSE(toJson(sys).empty());
  EXPECT_FALSE(toText(sys).empty());
}

INSTANTIATE_TEST_SUITE_P(All, TextFiles, ::testing::Range<size_t>(0, facts().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string s = fs::path(facts()[info.param].file).stem().string();
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// The 8xA100 matrix: GPUs 0-3 on NUMA 0 with CPUs 0-23, GPUs 4-7 on NUMA 1.
TEST(TextFormats, SmiTopoNumaAndAffinity) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(
      loadTopologyFile(topoDir() + "/tool-output/nvidia-smi-topo-m_8xA100_NV12_stas00.txt", &sys),
      braidSuccess)
      << lastError();
  Paths p = computePaths(sys);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(p.gpu_numa[g], g < 4 ? 0 : 1) << "GPU" << g;
  ASSERT_EQ(sys.cpus.size(), 2u);
  int n0 = sys.cpus[0].numaid == 0 ? 0 : 1;
  EXPECT_EQ(sys.cpus[n0].affinity, "00ffffff");               // 0-23
  EXPECT_EQ(sys.cpus[1 - n0].affinity, "0000ffff,ff000000");  // 24-47
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        EXPECT_EQ(p.gpu_gpu[a][b].cls, PathClass::kNvl);
      }
}

// A matrix with NIC rows, a NIC legend and every PCI class: the model reproduces each class
// (NODE through two host bridges of one NUMA node) and names the NICs from the legend.
TEST(TextFormats, SmiTopoPciClassesAndNics) {
  const std::string text =
      "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tNIC2\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
      "GPU0\t X \tPIX\tPXB\tSYS\tPIX\tNODE\tSYS\t0-15\t0\t\tN/A\n"
      "GPU1\tPIX\t X \tPXB\tSYS\tPIX\tNODE\tSYS\t0-15\t0\t\tN/A\n"
      "GPU2\tPXB\tPXB\t X \tSYS\tPXB\tNODE\tSYS\t0-15\t0\t\tN/A\n"
      "GPU3\tSYS\tSYS\tSYS\t X \tSYS\tSYS\tPIX\t16-31\t1\t\tN/A\n"
      "NIC0\tPIX\tPIX\tPXB\tSYS\t X \tNODE\tSYS\n"
      "NIC1\tNODE\tNODE\tNODE\tSYS\tNODE\t X \tSYS\n"
      "NIC2\tSYS\tSYS\tSYS\tPIX\tSYS\tSYS\t X \n"
      "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP\n"
      "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n";
  EXPECT_EQ(sniffTextTopology(text), "nvidia-smi-topo");
  System sys;
  ASSERT_EQ(loadNvidiaSmiTopo(text, "inline", &sys), braidSuccess) << lastError();
  ASSERT_EQ(sys.gpus.size(), 4u);
  ASSERT_EQ(sys.nics.size(), 3u);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(sys.nets[sys.nics[k].nets[0]].name, "mlx5_" + std::to_string(k));
  Paths p = computePaths(sys);
  const PathClass PIX = PathClass::kPix, PXB = PathClass::kPxb, NODE = PathClass::kNode,
                  SYS = PathClass::kSys, LOC = PathClass::kLoc;
  std::vector<std::vector<PathClass>> gg = {
      {LOC, PIX, PXB, SYS}, {PIX, LOC, PXB, SYS}, {PXB, PXB, LOC, SYS}, {SYS, SYS, SYS, LOC}};
  std::vector<std::vector<PathClass>> gn = {
      {PIX, NODE, SYS}, {PIX, NODE, SYS}, {PXB, NODE, SYS}, {SYS, SYS, PIX}};
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) EXPECT_EQ(p.gpu_gpu[a][b].cls, gg[a][b]) << a << "," << b;
    for (int k = 0; k < 3; ++k) EXPECT_EQ(p.gpu_nic[a][k].cls, gn[a][k]) << a << ",NIC" << k;
  }
  EXPECT_EQ(p.nearest_nic[3], 2);
  bool nodeNote = false;
  for (const auto& n : sys.notes)
    nodeNote |= n.find("2 PCIe host bridge(s) inferred from NODE and PHB") != std::string::npos;
  EXPECT_TRUE(nodeNote);
}

// Older nvidia-smi: NICs as mlx5_N columns without a legend, sparse NUMA ids (0 and 8), a
// truncated last row (noted, not fatal).
TEST(TextFormats, SmiTopoNamedNicColumnsSparseNuma) {
  const std::string text =
      "        GPU0    GPU1    mlx5_0  mlx5_1  CPU Affinity    NUMA Affinity\n"
      "GPU0     X      SYS     PHB     SYS     0-19            0\n"
      "GPU1    SYS      X      SYS     PHB     20-39           8\n"
      "mlx5_0  PHB     SYS      X      SYS\n"
      "mlx5_1  SYS     PHB\n";
  System sys;
  ASSERT_EQ(loadNvidiaSmiTopo(text, "inline", &sys), braidSuccess) << lastError();
  ASSERT_EQ(sys.nics.size(), 2u);
  EXPECT_EQ(sys.nets[sys.nics[0].nets[0]].name, "mlx5_0");
  EXPECT_EQ(sys.nets[sys.nics[1].nets[0]].name, "mlx5_1");
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_numa[0], 0);
  EXPECT_EQ(p.gpu_numa[1], 8);
  EXPECT_EQ(p.gpu_gpu[0][1].cls, PathClass::kSys);
  EXPECT_EQ(p.gpu_nic[0][0].cls, PathClass::kPhb);
  EXPECT_EQ(p.gpu_nic[1][1].cls, PathClass::kPhb);
  EXPECT_EQ(p.gpu_nic[0][1].cls, PathClass::kSys);
  EXPECT_EQ(p.nearest_nic[0], 0);
  EXPECT_EQ(p.nearest_nic[1], 1);
  bool truncated = false;
  for (const auto& n : sys.notes) truncated |= n.find("truncated") != std::string::npos;
  EXPECT_TRUE(truncated);
}

// Output cut short in the GPU rows is refused, naming the line: a GPU without its row (or
// with part of it) would have its links and placement guessed.
TEST(TextFormats, SmiTopoTruncatedGpuRowsRefused) {
  const std::string header =
      "        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      NV12    NV12    0-19            0\n";
  System sys;
  EXPECT_EQ(loadNvidiaSmiTopo(header + "GPU1    NV12     X      NV12    0-19            0\n",
                              "cut.txt", &sys),
            braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("cut.txt:1: the header lists GPU2 but no row"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(loadNvidiaSmiTopo(header + "GPU1    NV12     X\n", "cut.txt", &sys),
            braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("cut.txt:3: the row of GPU1 ends after 2 of its 3"),
            std::string::npos)
      << lastError();
}

// Mixed NV# pairs are direct links (no NVSwitch is invented).
TEST(TextFormats, SmiTopoMixedNvlinks) {
  const std::string text =
      "        GPU0    GPU1    GPU2    GPU3    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      NV1     NV2     SYS     0-19            0\n"
      "GPU1    NV1      X      SYS     NV2     0-19            0\n"
      "GPU2    NV2     SYS      X      NV1     20-39           1\n"
      "GPU3    SYS     NV2     NV1      X      20-39           1\n";
  System sys;
  ASSERT_EQ(loadNvidiaSmiTopo(text, "inline", &sys), braidSuccess) << lastError();
  EXPECT_TRUE(sys.nvswitches.empty());
  EXPECT_EQ(nvlinkCount(sys, 0, 1), 1);
  EXPECT_EQ(nvlinkCount(sys, 0, 2), 2);
  EXPECT_EQ(nvlinkCount(sys, 1, 3), 2);
  EXPECT_EQ(nvlinkCount(sys, 0, 3), 0);
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_gpu[0][3].cls, PathClass::kNvb);  // through GPU1 or GPU2 over NVLink
}

// lspci -vvv: the PCIe switch above GPU0 also holds the CX-7 at 1a:00.0, gen5 x16 links.
TEST(TextFormats, LspciVvvTree) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadTopologyFile(topoDir() + "/sysfs/lspci-vvv_hgx-h100_8xCX7_4xCX6Dx_gpud.txt", &sys),
            braidSuccess)
      << lastError();
  ASSERT_EQ(sys.gpus.size(), 8u);
  const Gpu& g0 = sys.gpus[0];
  EXPECT_EQ(g0.pci.busid, "0000:19:00.0");
  EXPECT_EQ(g0.pci.vendor, 0x10de);
  EXPECT_EQ(g0.pci.device, 0x2330);
  EXPECT_EQ(g0.pci.link_speed_gts, 32);
  EXPECT_EQ(g0.pci.link_width, 16);
  ASSERT_EQ(g0.parent.kind, NodeKind::kPci);
  EXPECT_EQ(sys.pcis[g0.parent.index].pci.busid, "0000:16:00.0");
  NodeRef nic = findByBusId(sys, "0000:1a:00.0");
  ASSERT_EQ(nic.kind, NodeKind::kNic);
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_nic[0][nic.index].cls, PathClass::kPix);
  EXPECT_EQ(p.gpu_numa[0], 0);
  EXPECT_EQ(p.gpu_numa[4], 1);
  EXPECT_EQ(p.gpu_gpu[0][4].cls, PathClass::kSys);
  // The Matrox BMC VGA is not a GPU.
  EXPECT_EQ(findByBusId(sys, "0000:03:00.0").kind, NodeKind::kNone);
}

TEST(TextFormats, LspciNnClasses) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadTopologyFile(topoDir() + "/sysfs/lspci-nn_a100-8gpu-vm_gpud.txt", &sys),
            braidSuccess)
      << lastError();
  int ib = 0, eth = 0;
  for (const Nic& n : sys.nics) {
    ib += (n.pci.class_code >> 8) == 0x0207;
    eth += (n.pci.class_code >> 8) == 0x0200;
  }
  EXPECT_EQ(ib, 8);
  EXPECT_EQ(eth, 1);
  for (const Gpu& g : sys.gpus) {
    EXPECT_EQ(g.pci.vendor, 0x10de);
    EXPECT_EQ(g.pci.device, 0x20b2);
    EXPECT_EQ(g.sm, 80);
  }
  for (const NvSwitch& s : sys.nvswitches) EXPECT_EQ(s.pci.device, 0x1af1);
}

TEST(TextFormats, LstopoCounts) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadTopologyFile(topoDir() + "/sysfs/hwloc_fsroot/nvidiagpunumanodes.output", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(sys.packages, 2);
  EXPECT_EQ(sys.cores, 8);
  EXPECT_EQ(sys.pus, 32);
  System vm;
  ASSERT_EQ(loadTopologyFile(topoDir() + "/sysfs/hwloc_fsroot/2pa-pcidomain32bits.output", &vm),
            braidSuccess)
      << lastError();
  EXPECT_EQ(vm.packages, 2);
  EXPECT_EQ(vm.cores, 2);
  EXPECT_EQ(vm.pus, 2);
  ASSERT_EQ(vm.nics.size(), 1u);
  EXPECT_EQ(vm.nics[0].pci.busid, "0000:00:03.0");
}

TEST(TextFormats, IbstatGuidsAndNotes) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadTopologyFile(
                topoDir() + "/tool-output/ibstat_azure-ndv4-a100_8xCX6-VF-HDR_gpud.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(sys.nets[0].guid, "0x00155dfffe3411eb");  // Node GUID of mlx5_0
  EXPECT_EQ(sys.nets[0].port, 1);
  bool panic = false;
  for (const auto& n : sys.notes) panic |= n.find("ibpanic") != std::string::npos;
  EXPECT_TRUE(panic);
  System st;
  ASSERT_EQ(
      loadTopologyFile(topoDir() + "/tool-output/ibstatus_azure-ndv4-a100_9ports_gpud.txt", &st),
      braidSuccess);
  EXPECT_EQ(st.nets[0].guid, "0x00155dfffd3411eb");  // low 64 bits of the default gid
}

// A two-port CA with one port Down: one NIC, two nets, the Down port noted.
TEST(TextFormats, IbstatTwoPortsOneDown) {
  const std::string text =
      "CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 2\n\tNode GUID: 0x1\n"
      "\tPort 1:\n\t\tState: Active\n\t\tRate: 200\n\t\tLink layer: InfiniBand\n"
      "\tPort 2:\n\t\tState: Down\n\t\tRate: 10\n\t\tLink layer: InfiniBand\n";
  System sys;
  ASSERT_EQ(loadIbstat(text, "inline", &sys), braidSuccess) << lastError();
  ASSERT_EQ(sys.nics.size(), 1u);
  ASSERT_EQ(sys.nets.size(), 2u);
  EXPECT_EQ(sys.nets[1].port, 2);
  EXPECT_EQ(sys.nets[1].guid, "0x1");
  bool down = false;
  for (const auto& n : sys.notes)
    down |= n == "mlx5_0 port 2: Down (not active: no bandwidth counted)";
  EXPECT_TRUE(down);
  EXPECT_EQ(sys.nets[0].speed_gbps, 200);
  EXPECT_EQ(sys.nets[1].speed_gbps, 0);  // Down: its Rate 10 is not counted
}

TEST(TextFormats, DirectoryWithoutInfinibandRefusedClearly) {
  REQUIRE_FIXTURES();
  System sys;
  EXPECT_EQ(loadTopologyFile(topoDir() + "/nccl", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("infiniband"), std::string::npos) << lastError();
}

TEST(TextFormats, Refusals) {
  System sys;
  EXPECT_EQ(loadTextTopology("hello world\n", "x.txt", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("x.txt"), std::string::npos);
  EXPECT_EQ(loadIbstat("nothing here\n", "ib.txt", &sys), braidInvalidArgument);
  EXPECT_EQ(loadIbstat("CA 'mlx5_0'\n\tPort x:\n", "ib.txt", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("ib.txt:2:"), std::string::npos) << lastError();
  EXPECT_EQ(loadNvidiaSmiNvlinkStatus("\tLink 0: 25 GB/s\n", "nv.txt", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("nv.txt:1:"), std::string::npos) << lastError();
  EXPECT_EQ(loadLspci("not lspci\n", "l.txt", &sys), braidInvalidArgument);
  EXPECT_EQ(loadNvidiaSmiTopo("CPU Affinity\n", "t.txt", &sys), braidInvalidArgument);
}

// Numbers a reader takes from text are bounded before any arithmetic: a PCIe width past x32
// or a speed past 1000 GT/s is an unknown link, a GPU index past GPU9999999 is refused, never
// an int overflow (fuzz_topo_xml found one in pcieBw through the XML reader).
TEST(TextFormats, AbsurdNumbersAreUnknownNotOverflow) {
  const std::string lspci =
      "0000:19:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
      "\tLnkSta:\tSpeed 32GT/s, Width x%s\n"
      "0000:1a:00.0 3D controller: NVIDIA Corporation Device 2330 (rev a1)\n"
      "\tLnkSta:\tSpeed %sGT/s, Width x16\n";
  struct Case {
    const char *width, *speed;
    int want_width;
    double want_speed;
  } cases[] = {{"16", "32", 16, 32},
               {"169999999", "32", 0, 32},
               {"99999999999999999999", "1e999", 0, 0},
               {"33", "1001", 0, 0},
               {"8.5", "16", 0, 16},
               {"16", "nan", 16, 0},
               {"16", "0.0000001", 16, 0}};
  for (const Case& c : cases) {
    char text[512];
    std::snprintf(text, sizeof text, lspci.c_str(), c.width, c.speed);
    System sys;
    ASSERT_EQ(loadLspci(text, "l.txt", &sys), braidSuccess) << c.width << ": " << lastError();
    ASSERT_EQ(sys.gpus.size(), 2u) << c.width;
    EXPECT_EQ(sys.gpus[0].pci.link_width, c.want_width) << c.width;
    EXPECT_EQ(sys.gpus[1].pci.link_speed_gts, c.want_speed) << c.speed;
  }
  System sys;
  EXPECT_EQ(loadNvidiaSmiTopo("\tGPU0\tGPU99999999999\nGPU0\t X \tNV4\n"
                              "GPU99999999999\tNV4\t X \n",
                              "t.txt", &sys),
            braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("column GPU99999999999"), std::string::npos)
      << lastError();
}

// Every file of the fixture tree loads through loadTopologyFile, except the README, and the
// hwloc fsroot tarballs when Braid was built without libarchive.
TEST(TextFormats, EveryFixtureLoads) {
  REQUIRE_FIXTURES();
  int loaded = 0;
  std::vector<std::string> failed;
  for (auto it = fs::recursive_directory_iterator(topoDir()); it != fs::end(it); ++it) {
    std::string path = it->path().string(), name = it->path().filename().string();
    bool ibDir = false;
    if (it->is_directory()) {
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(it->path(), ec))
        if (fs::is_directory(e.path() / "ports")) ibDir = true;
      if (!ibDir) continue;
      it.disable_recursion_pending();
    } else if (name == "README.md" ||
               (name.find(".tar.") != std::string::npos && !fsrootArchiveSupported())) {
      continue;
    }
    System sys;
    if (loadTopologyFile(path, &sys) != braidSuccess) {
      failed.push_back(path + ": " + lastError());
      continue;
    }
    ++loaded;
    EXPECT_FALSE(toJson(sys).empty());
  }
  EXPECT_TRUE(failed.empty()) << failed.size() << " failed, first: " << failed[0];
  EXPECT_GE(loaded, 45);
}

// Truncated and mutated text files load or fail cleanly, never crash; what loads prints.
TEST(TextFormats, MutatedReplays) {
  REQUIRE_FIXTURES();
  std::vector<std::string> files;
  for (const auto& f : facts())
    if (!f.kind.empty()) files.push_back(topoDir() + "/" + f.file);
  std::mt19937 rng(1234);
  int runs = 0;
  auto replay = [&](const std::string& text) {
    System sys;
    if (loadTextTopology(text, "mutated", &sys) == braidSuccess) {
      computePaths(sys);
      toJson(sys);
      toText(sys);
    }
    ++runs;
  };
  for (const std::string& path : files) {
    std::string text = readText(path);
    if (text.size() > 200000) text.resize(200000);  // lspci -vvv: its first devices suffice
    for (int cut = 0; cut < 24; ++cut) replay(text.substr(0, text.size() * cut / 24));
    const char alphabet[] = "X NV12PIXSYS:\t\n0123456789'GPU-,.abc";
    for (int m = 0; m < 60; ++m) {
      std::string t = text;
      int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits && !t.empty(); ++e) {
        size_t pos = rng() % t.size();
        switch (rng() % 3) {
          case 0:
            t[pos] = alphabet[rng() % (sizeof(alphabet) - 1)];
            break;
          case 1:
            t.erase(pos, 1 + rng() % 16);
            break;
          default:
            t.insert(pos, std::string(1 + rng() % 4, alphabet[rng() % (sizeof(alphabet) - 1)]));
        }
      }
      replay(t);
    }
  }
  EXPECT_GT(runs, 1000);
}

}  // namespace
}  // namespace braid::topo
