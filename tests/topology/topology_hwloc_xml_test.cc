// hwloc XML loading (v1, v2.0, v3.0 exports of real machines) and its errors: truncated,
// malformed and corrupted files refused naming file and line, and the fuzz target's regressions
// replayed. The facts table below was written by reading the XML files (grep of
// Package/Core/PU/NUMANode objects, GPU OS devices per PCI device, network OS devices per PCI
// function, the NVLinkBandwidth matrix), not from the loader's output. Fixtures:
// $BRAID_SHARED_DIR (default <source>/../shared)/topologies.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "detect_fixtures.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

using fixtures::hasNote;
using fixtures::hwlocDir;
using fixtures::sharedDir;

struct Facts {
  const char* file;
  int packages, cores, pus;
  int numa;        // NUMA nodes with CPUs
  int memoryNuma;  // NUMA nodes without CPUs (GPU memory)
  int gpus;
  std::vector<std::string> models;  // expected model per GPU, in file order
  int nics;                         // PCI functions with network OS devices
  std::vector<std::string> nets;    // OpenFabrics devices, else netdevs
  int nvswitches;
  int nvlinks;  // sum of NVLink counts (GPU<->GPU and GPU<->NVSwitch)
};

std::vector<std::string> rep(int n, const std::string& s) { return std::vector<std::string>(n, s); }

const std::vector<Facts>& factsTable() {
  static const std::vector<Facts> kFacts = {
      {"flux-core_sierra_power9_4xV100.xml",
       2,
       44,
       176,
       2,
       4,
       4,
       rep(4, "Tesla V100-SXM2-16GB"),
       6,
       {"mlx5_0", "mlx5_1", "enP5p1s0f0", "enP5p1s0f1", "mlx5_2", "mlx5_3"},
       0,
       0},
      {"flux-core_tuolumne_MI300A_CPX.xml",
       4,
       96,
       192,
       4,
       0,
       4,
       rep(4, "Aqua Vanjaram [Instinct MI300A]"),
       5,
       {"hsi0", "enp129s0", "hsi1", "hsi2", "hsi3"},
       0,
       0},
      {"flux-core_tuolumne_MI300A_SPX.xml",
       4,
       96,
       192,
       4,
       0,
       4,
       rep(4, "Aqua Vanjaram [Instinct MI300A]"),
       5,
       {"hsi0", "enp129s0", "hsi1", "hsi2", "hsi3"},
       0,
       0},
      {"flux-sched_chimera_threadripper_mixed-GPUs.xml",
       1,
       32,
       64,
       4,
       0,
       2,
       {"GeForce GTX 1070", "Vega 10 XTX [Radeon Vega Frontier Edition]"},
       3,
       {"enp4s0", "wlp5s0", "enp6s0"},
       0,
       0},
      {"flux-sched_lassen6_power9_4xV100_4xIB.xml",
       2,
       40,
       160,
       2,
       0,
       4,
       rep(4, "Tesla V100-SXM2-16GB"),
       6,
       {"mlx5_0", "mlx5_1", "enP5p1s0f0", "enP5p1s0f1", "mlx5_2", "mlx5_3"},
       0,
       0},
      {"hwloc-tests_16amd64-4distances.xml", 8, 16, 16, 8, 0, 0, {}, 0, {}, 0, 0},
      {"hwloc-tests_192em64t-24n8c2t.xml",
       24,
       192,
       384,
       24,
       0,
       0,
       {},
       7,
       {"eth0", "eth1", "eth2", "eth3", "eth4", "eth5", "mlx4_0"},
       0,
       0},
      {"hwloc-tests_24em64t-2n6c2t-pci.xml",
       2,
       12,
       24,
       2,
       0,
       0,
       {},
       3,
       {"eth0", "eth1", "mlx4_0"},
       0,
       0},
      {"hwloc-tests_32em64t-2n8c2t-pci-wholeio.xml",
       2,
       16,
       32,
       2,
       0,
       2,
       {"Tesla K40m", "AMD Radeon R9 200 / HD 7900 Series"},
       3,
       {"eth0", "eth1", "mlx5_0"},
       0,
       0},
      // 16 GPUs x 6 NVSwitches of their baseboard, 25000 MB/s (one link) each: 192 non-zero
      // entries in the symmetric 28x28 NVLinkBandwidth matrix.
      {"hwloc-tests_nvidiaDGX2.xml",
       2,
       4,
       4,
       2,
       0,
       16,
       rep(16, "Tesla V100-SXM3-32GB-H"),
       0,
       {},
       12,
       96},
      {"hwloc-tests_nvidiaDGX2.v3format.xml",
       2,
       4,
       4,
       2,
       0,
       16,
       rep(16, "Tesla V100-SXM3-32GB-H"),
       0,
       {},
       12,
       96},
      {"mpibind_aws-g4dn.metal_8xT4.xml",
       2,
       48,
       96,
       2,
       0,
       8,
       rep(8, "Tesla T4"),
       2,
       {"rdmap197s0", "eth0"},
       0,
       0},
      {"mpibind_coral-lassen_power9_4xV100.xml",
       2,
       40,
       160,
       2,
       0,
       4,
       rep(4, "Tesla V100-SXM2-16GB"),
       6,
       {"mlx5_0", "mlx5_1", "enP5p1s0f0", "enP5p1s0f1", "mlx5_2", "mlx5_3"},
       0,
       0},
      // OpenCL's osdev comes first and names the PCI ids' product; RSMI's is truncated.
      {"mpibind_corona_2xEPYC7402_8xMI50.xml",
       2,
       48,
       96,
       2,
       0,
       8,
       rep(8, "Vega 20 WKS GL-XE [Radeon Pro VII]"),
       3,
       {"mlx5_0", "eno1", "eno2"},
       0,
       0},
      {"mpibind_cts1-pascal_2xP100.xml",
       2,
       36,
       72,
       2,
       0,
       2,
       rep(2, "Tesla P100-PCIE-16GB"),
       3,
       {"mlx5_0", "enp12s0f0", "enp12s0f1"},
       0,
       0},
  };
  return kFacts;
}

class HwlocFacts : public ::testing::TestWithParam<Facts> {};

TEST_P(HwlocFacts, MatchesTheFile) {
  REQUIRE_DIR(hwlocDir());
  const Facts& f = GetParam();
  std::string path = hwlocDir() + "/" + f.file;
  System sys;
  ASSERT_EQ(loadHwlocXml(path, &sys), braidSuccess) << lastError();
  EXPECT_EQ(sys.source, path);
  EXPECT_EQ(sys.packages, f.packages);
  EXPECT_EQ(sys.cores, f.cores);
  EXPECT_EQ(sys.pus, f.pus);
  EXPECT_EQ(static_cast<int>(sys.cpus.size()), f.numa);
  EXPECT_EQ(sys.memory_numa_nodes, f.memoryNuma);
  ASSERT_EQ(static_cast<int>(sys.gpus.size()), f.gpus);
  for (int i = 0; i < f.gpus; i++) {
    EXPECT_EQ(sys.gpus[i].model, f.models[i]) << "GPU " << i;
    EXPECT_FALSE(sys.gpus[i].pci.busid.empty());
    EXPECT_EQ(sys.gpus[i].parent.valid(), true);
  }
  EXPECT_EQ(static_cast<int>(sys.nics.size()), f.nics);
  std::vector<std::string> nets;
  for (auto& n : sys.nets) nets.push_back(n.name);
  EXPECT_EQ(nets, f.nets);
  EXPECT_EQ(static_cast<int>(sys.nvswitches.size()), f.nvswitches);
  int nvl = 0;
  for (auto& l : sys.links)
    if (l.type == LinkType::kNvLink) nvl += l.count;
  EXPECT_EQ(nvl, f.nvlinks);
  // Every GPU, NIC and NVSwitch hangs from a Cpu or a kept bridge.
  for (auto& p : sys.pcis) EXPECT_TRUE(p.isBridge());
}

INSTANTIATE_TEST_SUITE_P(Files, HwlocFacts, ::testing::ValuesIn(factsTable()),
                         [](const ::testing::TestParamInfo<Facts>& i) {
                           std::string n = i.param.file;
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(HwlocXml, Dgx2NvLinksPerGpu) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/hwloc-tests_nvidiaDGX2.xml", &sys), braidSuccess);
  std::vector<int> perGpu(sys.gpus.size(), 0);
  for (auto& l : sys.links) {
    if (l.type != LinkType::kNvLink) continue;
    EXPECT_EQ(l.count, 1);
    ASSERT_EQ(l.a.kind == NodeKind::kGpu || l.b.kind == NodeKind::kGpu, true);
    NodeRef g = l.a.kind == NodeKind::kGpu ? l.a : l.b;
    NodeRef s = l.a.kind == NodeKind::kGpu ? l.b : l.a;
    EXPECT_EQ(s.kind, NodeKind::kNvSwitch);
    perGpu[g.index]++;
  }
  for (int n : perGpu) EXPECT_EQ(n, 6);
  // NVSwitch PCI devices: subtype NVSwitch, one with an all-zero pci_type.
  EXPECT_EQ(sys.nvswitches[0].pci.busid, "0000:61:00.0");
  // pci_link_speed 15.753846 GB/s = gen3 x16.
  EXPECT_DOUBLE_EQ(sys.gpus[0].pci.link_speed_gts, 8);
  EXPECT_EQ(sys.gpus[0].pci.link_width, 16);
  EXPECT_EQ(sys.gpus[0].pci.class_code, 0x030200u);
  EXPECT_EQ(sys.gpus[0].pci.vendor, 0x10de);
  EXPECT_EQ(sys.gpus[0].pci.device, 0x1db8);
  EXPECT_EQ(sys.numa_latency.size(), 2u);
  EXPECT_EQ(sys.numa_latency[0][0], 10u);
  EXPECT_EQ(sys.numa_latency[0][1], 21u);
}

TEST(HwlocXml, V3FormatSaysSo) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/hwloc-tests_nvidiaDGX2.v3format.xml", &sys), braidSuccess);
  EXPECT_TRUE(hasNote(sys, "format 3.0")) << "notes lack the v3 remark";
}

TEST(HwlocXml, NumaLatencyV1AndV2) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  // 8x8 NUMALatency, indexes by os index "1 0 2 5 4 3 6 7", first row 10 20 20 20 ...
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/hwloc-tests_16amd64-4distances.xml", &sys), braidSuccess);
  ASSERT_EQ(sys.numa_latency.size(), 8u);
  for (size_t i = 0; i < 8; i++) EXPECT_EQ(sys.numa_latency[i][i], 10u);
  // v1 (lassen6): 2 NUMA nodes, <distances latency_base="1.000000">.
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/flux-sched_lassen6_power9_4xV100_4xIB.xml", &sys),
            braidSuccess);
  ASSERT_EQ(sys.numa_latency.size(), 2u);
  EXPECT_EQ(sys.numa_latency[0][0], 10u);
  EXPECT_EQ(sys.numa_latency[0][1], 40u);
}

TEST(HwlocXml, PowerGpuMemoryNumaAndIbPorts) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/flux-core_sierra_power9_4xV100.xml", &sys), braidSuccess);
  EXPECT_EQ(sys.cpus[0].numaid, 0);
  EXPECT_EQ(sys.cpus[1].numaid, 8);
  EXPECT_EQ(sys.cpus[0].arch, "ppc64");
  EXPECT_TRUE(hasNote(sys, "without CPUs"));
  const Net& ib = sys.nets[0];
  EXPECT_EQ(ib.name, "mlx5_0");
  EXPECT_EQ(ib.port, 1);
  EXPECT_EQ(ib.guid, "0xec0d9a030049a212");
  EXPECT_EQ(ib.link_layer, LinkLayer::kInfiniBand);
  EXPECT_EQ(sys.nics[ib.nic].pci.busid, "0003:01:00.0");
  EXPECT_EQ(sys.nets[2].link_layer, LinkLayer::kEthernet);
  // CUDA device indices from cudaN.
  EXPECT_EQ(sys.gpus[0].dev, 0);
  EXPECT_EQ(sys.gpus[3].dev, 3);
}

TEST(HwlocXml, PartitionsAndXgmi) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/flux-core_tuolumne_MI300A_CPX.xml", &sys), braidSuccess);
  EXPECT_TRUE(hasNote(sys, "6 GPU OS devices of one backend"));
  int xgmiPairs = 0;
  for (auto& l : sys.links)
    if (l.type == LinkType::kXgmi) xgmiPairs++;
  EXPECT_EQ(xgmiPairs, 6);  // 4 APUs, every pair at 100000 MB/s
}

TEST(HwlocXml, BmcVgaAndBare3dControllersAreNotGpus) {
  REQUIRE_DIR(hwlocDir());
  System sys;
  // Sierra's ASPEED VGA (0300 [1a03:2000]) has only DRM osdevs (card4, controlD68).
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/flux-core_sierra_power9_4xV100.xml", &sys), braidSuccess);
  for (auto& g : sys.gpus) EXPECT_NE(g.pci.vendor, 0x1a03);
  // Tesla M2075s without a CUDA osdev in the wholeio file.
  ASSERT_EQ(loadHwlocXml(hwlocDir() + "/hwloc-tests_32em64t-2n8c2t-pci-wholeio.xml", &sys),
            braidSuccess);
  EXPECT_TRUE(hasNote(sys, "3D controller"));
}

// ---- errors ----

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char tmpl[] = "/tmp/braid_hwloc_XXXXXX";
    int fd = mkstemp(tmpl);
    path_ = tmpl;
    FILE* f = fdopen(fd, "w");
    fwrite(text.data(), 1, text.size(), f);
    fclose(f);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string loadError(const std::string& text, std::string* path) {
  TempFile t(text);
  *path = t.path();
  System sys;
  braidResult_t rc = loadHwlocXml(t.path(), &sys);
  EXPECT_EQ(rc, braidInvalidArgument);
  return lastError();
}

const char* kHead =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"                  // 1
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"                   // 2
    "<topology version=\"2.0\">\n"                                  // 3
    "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x3\">\n";  // 4

TEST(HwlocXmlErrors, BadBusIdNamesFileAndLine) {
  std::string path;
  std::string msg = loadError(
      std::string(kHead) +
          "    <object type=\"Bridge\" bridge_type=\"0-1\" depth=\"0\">\n"  // 5
          "      <object type=\"PCIDev\" pci_busid=\"0000:zz:00.0\" pci_type=\"0302 [10de:1db8] "
          "[10de:131d] a1\"/>\n"  // 6
          "    </object>\n  </object>\n</topology>\n",
      &path);
  EXPECT_NE(msg.find(path + ":6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0000:zz:00.0"), std::string::npos) << msg;
}

TEST(HwlocXmlErrors, BadPciType) {
  std::string path;
  std::string msg =
      loadError(std::string(kHead) +
                    "    <object type=\"PCIDev\" pci_busid=\"0000:01:00.0\" pci_type=\"junk\"/>\n"
                    "  </object>\n</topology>\n",
                &path);
  EXPECT_NE(msg.find(path + ":5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pci_type"), std::string::npos) << msg;
}

TEST(HwlocXmlErrors, TruncatedFile) {
  REQUIRE_DIR(hwlocDir());
  std::ifstream in(hwlocDir() + "/hwloc-tests_nvidiaDGX2.xml");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str().substr(0, ss.str().size() / 2);
  std::string path;
  std::string msg = loadError(text, &path);
  EXPECT_NE(msg.find(path + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed or truncated"), std::string::npos) << msg;
  // The line is a number > 0.
  size_t at = msg.find(path + ":");
  EXPECT_GT(atoi(msg.c_str() + at + path.size() + 1), 0) << msg;
}

TEST(HwlocXmlErrors, MalformedXml) {
  std::string path;
  std::string msg = loadError(
      std::string(kHead) + "    <object type=\"Core\">\n  </object>\n</topology>\n", &path);
  EXPECT_NE(msg.find(path + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed"), std::string::npos) << msg;
}

TEST(HwlocXmlErrors, MissingEmptyWrongRootUnknownVersion) {
  System sys;
  EXPECT_EQ(loadHwlocXml("/nonexistent/dir/topo.xml", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("/nonexistent/dir/topo.xml"), std::string::npos);
  EXPECT_NE(std::string(lastError()).find("cannot open"), std::string::npos);
  std::string path;
  std::string msg = loadError("", &path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  msg = loadError("<?xml version=\"1.0\"?>\n<system version=\"1\">\n</system>\n", &path);
  EXPECT_NE(msg.find(path + ":2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NCCL topology file"), std::string::npos) << msg;
  msg = loadError("<topology version=\"9.1\">\n</topology>\n", &path);
  EXPECT_NE(msg.find(path + ":1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("9.1"), std::string::npos) << msg;
  msg = loadError("<topology version=\"2.0\">\n</topology>\n", &path);
  EXPECT_NE(msg.find("no <object>"), std::string::npos) << msg;
  // A distance matrix naming an object the file does not hold.
  msg =
      loadError(std::string(kHead) +
                    "  </object>\n"
                    "  <distances2 type=\"NUMANode\" nbobjs=\"1\" kind=\"5\" name=\"NUMALatency\" "
                    "indexing=\"os\">\n"  // 6
                    "    <indexes length=\"1\">7 </indexes>\n"
                    "    <u64values length=\"2\">10 </u64values>\n"
                    "  </distances2>\n</topology>\n",
                &path);
  EXPECT_NE(msg.find(path + ":6:"), std::string::npos) << msg;
}

// Every file cut at 40 points and with bytes flipped loads or fails with a message; never
// crashes.
TEST(HwlocXmlErrors, CutAndCorruptedFilesNeverCrash) {
  REQUIRE_DIR(hwlocDir());
  for (const Facts& f : factsTable()) {
    std::ifstream in(hwlocDir() + "/" + f.file);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (int k = 1; k <= 40; k++) {
      System sys;
      std::string cut = text.substr(0, text.size() * k / 41);
      braidResult_t rc = loadHwlocXmlString(cut, f.file, &sys);
      EXPECT_EQ(rc, braidInvalidArgument) << f.file << " cut " << k;
      EXPECT_NE(std::string(lastError()).find(f.file), std::string::npos);
      std::string bad = text;
      unsigned seed = static_cast<unsigned>(k * 7919);
      for (int j = 0; j < 8; j++) {
        seed = seed * 1103515245u + 12345u;
        bad[seed % bad.size()] = "0x:.<>\" \n"[(seed >> 16) % 10];
      }
      rc = loadHwlocXmlString(bad, f.file, &sys);
      EXPECT_TRUE(rc == braidSuccess || rc == braidInvalidArgument) << f.file;
    }
  }
}

// ---- fuzz regressions (tests/fuzz/fuzz_hwloc_xml.cc): each input through the target's entry ----

// What fuzz_hwloc_xml does with an input: load, or be refused with braidInvalidArgument; a
// model that loads routes, rings, prints and dumps NCCL XML that loads back.
void replayHwlocFuzzInput(const std::string& text, const std::string& what) {
  System sys;
  braidResult_t rc = loadHwlocXmlString(text, "fuzz-hwloc.xml", &sys);
  if (rc != braidSuccess) {
    EXPECT_EQ(rc, braidInvalidArgument) << what;
    EXPECT_NE(std::string(lastError()).find("fuzz-hwloc.xml"), std::string::npos) << what;
    return;
  }
  Paths paths = computePaths(sys);
  buildRings(sys, paths);
  buildHostTree(sys, paths);
  toJson(sys);
  toText(sys);
  std::string xml;
  if (dumpNcclTopoXml(sys, &xml) == braidSuccess) {
    System again;
    EXPECT_EQ(loadNcclTopoXmlString(xml, "fuzz-dump.xml", &again), braidSuccess)
        << what << ": " << lastError() << "\n"
        << xml;
  }
}

struct FuzzCase {
  const char* what;
  std::string text;
  const char* error;  // part of the refusal, or nullptr when the input loads
};

const std::vector<FuzzCase>& hwlocFuzzCases() {
  static const std::vector<FuzzCase> kCases = {
      // Found by fuzz_hwloc_xml (a DGX-2 file with one NVSwitch's bus id changed into
      // another's): two kept PCI devices with one bus id loaded as two nodes, and the NCCL XML
      // dump of that did not load back ("busid appears twice"). Now refused at load.
      {"two NICs with one bus id",
       std::string(kHead) +
           "    <object type=\"PCIDev\" pci_busid=\"0000:04:00.0\" pci_type=\"0200 [8086:1521] "
           "[8086:0001] 01\">\n"  // 5
           "      <object type=\"OSDev\" name=\"eth0\" osdev_type=\"2\"/>\n"
           "    </object>\n"
           "    <object type=\"PCIDev\" pci_busid=\"0000:04:00.0\" pci_type=\"0200 [8086:1521] "
           "[8086:0001] 01\">\n"  // 8
           "      <object type=\"OSDev\" name=\"eth1\" osdev_type=\"2\"/>\n"
           "    </object>\n  </object>\n</topology>\n",
       "fuzz-hwloc.xml:8: busid 0000:04:00.0 appears twice (first at line 5)"},
      // Found by fuzz_hwloc_xml (a DGX-2 file with one NVLinkBandwidth value grown to 2502500
      // MB/s): 100 links per pair loaded, and the dump's <nvlink count="100"> was out of the
      // NCCL loader's 1..64. Now refused at load.
      {"NVLinkBandwidth of more than 64 links",
       std::string(kHead) +
           "    <object type=\"PCIDev\" gp_index=\"10\" pci_busid=\"0000:34:00.0\" "
           "pci_type=\"0302 [10de:1db8] [10de:131d] a1\">\n"
           "      <object type=\"OSDev\" gp_index=\"11\" name=\"nvml0\" osdev_type=\"5\"/>\n"
           "    </object>\n"
           "    <object type=\"PCIDev\" gp_index=\"20\" pci_busid=\"0000:36:00.0\" "
           "pci_type=\"0302 [10de:1db8] [10de:131d] a1\">\n"
           "      <object type=\"OSDev\" gp_index=\"21\" name=\"nvml1\" osdev_type=\"5\"/>\n"
           "    </object>\n  </object>\n"
           "  <distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"  // 12
           "    <indexes length=\"18\">OSDev:11 OSDev:21</indexes>\n"
           "    <u64values length=\"21\">0 2500000 2500000 0</u64values>\n"
           "  </distances2hetero>\n</topology>\n",
       "fuzz-hwloc.xml:12: NVLinkBandwidth value 2.5e+06 MB/s is 100 links, more than 64"},
      // Found by fuzz_hwloc_xml (a DGX-2 file with an NVSwitch's pci_type made 0681): the
      // NVSwitch kept class 0x068100, which the NCCL loader reads back as a plain PCI device, so
      // the dump's NVLinks to it did not load. Now it loads, taken as class 0x068000.
      {"NVSwitch subtype with another PCI class",
       std::string(kHead) +
           "    <object type=\"PCIDev\" gp_index=\"10\" pci_busid=\"0000:34:00.0\" "
           "pci_type=\"0302 [10de:1db8] [10de:131d] a1\">\n"
           "      <object type=\"OSDev\" gp_index=\"11\" name=\"nvml0\" osdev_type=\"5\"/>\n"
           "    </object>\n"
           "    <object type=\"PCIDev\" gp_index=\"20\" subtype=\"NVSwitch\" "
           "pci_busid=\"0000:65:00.0\" pci_type=\"0681 [10de:1ac2] [0000:0000] a1\"/>\n"
           "  </object>\n"
           "  <distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
           "    <indexes length=\"19\">OSDev:11 PCIDev:20</indexes>\n"
           "    <u64values length=\"17\">0 25000 25000 0</u64values>\n"
           "  </distances2hetero>\n</topology>\n",
       nullptr},
      // Found by fuzz_hwloc_xml (a NIC's pci_type "0200 ..." made "-200 ..."): sscanf's %x
      // took the sign, class 0xfffe0000 was kept and dumped, and the dump did not load back.
      // Now refused at load.
      {"negative PCI class in pci_type",
       std::string(kHead) +
           "    <object type=\"PCIDev\" pci_busid=\"0000:81:00.1\" pci_type=\"-200 [8086:1521] "
           "[00d9:0021] 01\">\n"  // 5
           "      <object type=\"OSDev\" name=\"eth1\" osdev_type=\"2\"/>\n"
           "    </object>\n  </object>\n</topology>\n",
       "fuzz-hwloc.xml:5: unparsable pci_type=\"-200 [8086:1521] [00d9:0021] 01\""},
      // Found by fuzz_hwloc_xml: two GPUs both cuda0 loaded, and their NCCL dump did not.
      {"two GPUs with one CUDA index",
       std::string(kHead) +
           "    <object type=\"PCIDev\" pci_busid=\"0000:04:00.0\" pci_type=\"0302 [10de:1db8] "
           "[10de:131d] a1\">\n"
           "      <object type=\"OSDev\" name=\"cuda0\" osdev_type=\"5\"/>\n"
           "    </object>\n"
           "    <object type=\"PCIDev\" pci_busid=\"0000:05:00.0\" pci_type=\"0302 [10de:1db8] "
           "[10de:131d] a1\">\n"
           "      <object type=\"OSDev\" name=\"cuda0\" osdev_type=\"5\"/>\n"
           "    </object>\n  </object>\n</topology>\n",
       "fuzz-hwloc.xml:9: a second GPU OS device with index 0"},
      // hwloc's own test files repeat a bus id on a device the model drops (a SATA controller
      // beside an InfiniBand HCA in 2n8c2t-pci-wholeio): still loads.
      {"dropped device sharing a bus id",
       std::string(kHead) +
           "    <object type=\"PCIDev\" pci_busid=\"0000:04:00.0\" pci_type=\"0107 [8086:1d6b] "
           "[00d9:0062] 06\"/>\n"
           "    <object type=\"PCIDev\" pci_busid=\"0000:04:00.0\" pci_type=\"0200 [8086:1521] "
           "[8086:0001] 01\">\n"
           "      <object type=\"OSDev\" name=\"eth0\" osdev_type=\"2\"/>\n"
           "    </object>\n  </object>\n</topology>\n",
       nullptr},
  };
  return kCases;
}

TEST(HwlocFuzzReplay, Regressions) {
  for (const FuzzCase& c : hwlocFuzzCases()) {
    replayHwlocFuzzInput(c.text, c.what);
    System sys;
    braidResult_t rc = loadHwlocXmlString(c.text, "fuzz-hwloc.xml", &sys);
    if (c.error) {
      EXPECT_EQ(rc, braidInvalidArgument) << c.what;
      EXPECT_NE(std::string(lastError()).find(c.error), std::string::npos)
          << c.what << ": " << lastError();
    } else {
      EXPECT_EQ(rc, braidSuccess) << c.what << ": " << lastError();
    }
    if (std::string(c.what) == "NVSwitch subtype with another PCI class") {
      ASSERT_EQ(sys.nvswitches.size(), 1u);
      EXPECT_EQ(sys.nvswitches[0].pci.class_code, 0x068000u);
      int nvlinks = 0;
      for (auto& l : sys.links) nvlinks += l.type == LinkType::kNvLink ? l.count : 0;
      EXPECT_EQ(nvlinks, 1);  // GPU 0 - NVSwitch 0
      EXPECT_TRUE(hasNote(sys, "NVSwitch 0000:65:00.0 has PCI class 0x068100"));
    }
  }
}

}  // namespace
}  // namespace braid::topo
