// The topology model over real NCCL topology files (../shared/topologies/nccl): facts read by
// hand from each file, refusals of bad input naming file and line, dump -> load round trips,
// and mutated files replayed through the loader (the fuzz target's entry) without a crash.
#include "topology/topology.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "base/error.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

namespace fs = std::filesystem;

using fixtures::readText;
using fixtures::sharedDir;

std::string ncclDir() { return sharedDir() + "/topologies/nccl"; }

#define REQUIRE_FIXTURES() REQUIRE_FIXTURE_DIR(ncclDir())

std::vector<std::string> topoFiles() {
  std::vector<std::string> out;
  if (!fs::is_directory(ncclDir())) return out;
  for (const auto& e : fs::directory_iterator(ncclDir())) {
    std::string name = e.path().filename().string();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".xml" &&
        name.find("-graph") == std::string::npos)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What each file says, read from the file itself (see ../shared/topologies/README.md).
struct Facts {
  std::string file;
  int gpus;
  std::vector<int> numa;                      // numaids of its <cpu> elements, sorted
  std::vector<double> nic_speeds;             // Gb/s per NIC in file order (0: not given)
  std::vector<std::tuple<int, int, int>> nv;  // GPU pairs a<b with NVLinks, and the count
  int all_pairs_nvlink;                       // every GPU pair has this many (NVSwitch), or 0
  std::vector<int> nearest;                   // per GPU: nearest NIC index
  std::vector<std::string> nearest_class;     // per GPU: its path class
};

std::vector<int> rep(int n, int v) { return std::vector<int>(n, v); }
std::vector<std::string> reps(int n, const char* v) { return std::vector<std::string>(n, v); }

const std::vector<Facts>& facts() {
  static const std::vector<Facts> f = {
      // Busids only, no classes: nothing the model can call a GPU or a NIC.
      {"aws_g5.48xl-topo.xml", 0, {0, 1}, {}, {}, 0, {}, {}},
      // 4 virtual switches, each 2 GPUs + 1 EFA; NVLink not listed.
      {"aws_p4d-24xl-topo.xml",
       8,
       {0, 1},
       {0, 0, 0, 0},
       {},
       0,
       {0, 0, 1, 1, 2, 2, 3, 3},
       reps(8, "PIX")},
      {"aws_p4de-24xl-topo.xml",
       8,
       {0, 1},
       {0, 0, 0, 0},
       {},
       0,
       {0, 0, 1, 1, 2, 2, 3, 3},
       reps(8, "PIX")},
      // 8 switches, each 1 GPU + 4 EFA nets of 100 Gb/s.
      {"aws_p5.48xl-topo.PR1226-unmerged.xml",
       8,
       {0},
       std::vector<double>(32, 100.0),
       {},
       0,
       {0, 4, 8, 12, 16, 20, 24, 28},
       reps(8, "PIX")},
      // Busids only again.
      {"aws_p5.48xl-topo.xml", 0, {0, 1}, {}, {}, 0, {}, {}},
      // 2 GPUs bridged by 12 NVLinks; eth0 on NUMA 0.
      {"azure_nc48ads_A100_v4-topo.xml", 2, {0, 1}, {100}, {{0, 1, 12}}, 0, {0, 0}, {"PHB", "SYS"}},
      // Self-targeted NVLinks: no peer, so no NVLink pairs.
      {"azure_ncv4-topo.xml",
       4,
       {0, 1, 2, 3},
       {100},
       {},
       0,
       {0, 0, 0, 0},
       {"PHB", "SYS", "SYS", "SYS"}},
      // 8 GPUs straight under the CPUs, one IB NIC on NUMA 0.
      {"azure_ndv2-topo.xml",
       8,
       {0, 1},
       {0},
       {},
       0,
       rep(8, 0),
       {"PHB", "PHB", "PHB", "PHB", "SYS", "SYS", "SYS", "SYS"}},
      // 4 switches, each 2 GPUs + 2 IB NICs (first of the two wins the tie).
      {"azure_ndv4-topo.xml",
       8,
       {0, 1, 2, 3},
       std::vector<double>(8, 0.0),
       {},
       0,
       {0, 0, 2, 2, 4, 4, 6, 6},
       reps(8, "PIX")},
      {"oci_BM.GPU.B4.8_topo-flattened.xml",
       8,
       {1, 3, 5, 7},
       std::vector<double>(8, 0.0),
       {},
       0,
       {0, 0, 2, 2, 4, 4, 6, 6},
       reps(8, "PIX")},
      {"oci_BM.GPU4.8_topo-flattened.xml",
       8,
       {1, 3, 5, 7},
       std::vector<double>(8, 0.0),
       {},
       0,
       {0, 0, 2, 2, 4, 4, 6, 6},
       reps(8, "PIX")},
      // MI250 xGMI hybrid mesh; 2 IB NICs behind their own switch per NUMA node.
      {"rccl_topo_8p1h_MI250.xml",
       8,
       {1, 3},
       {200, 200, 200, 200},
       {{0, 1, 4},
        {0, 4, 2},
        {0, 6, 1},
        {1, 3, 1},
        {1, 7, 1},
        {2, 3, 4},
        {2, 4, 1},
        {2, 6, 2},
        {3, 5, 1},
        {4, 5, 4},
        {5, 7, 1},
        {6, 7, 4}},
       0,
       {0, 0, 0, 0, 2, 2, 2, 2},
       reps(8, "PXB")},
      // One GPU: the bond under the GPU's switch tree beats the one under the CPU.
      {"simai_topo_1A100_1CX6.xml", 1, {0}, {200, 200}, {}, 0, {1}, {"PXB"}},
      // HGX A100: 6 NVSwitches, 2 links from each GPU to each.
      {"simai_topo_8A100_4CX6.xml",
       8,
       {0, 1},
       {200, 200, 200, 200, 200},
       {},
       12,
       {1, 1, 2, 2, 3, 3, 4, 4},
       reps(8, "PXB")},
  };
  return f;
}

class NcclFile : public ::testing::TestWithParam<Facts> {};

TEST_P(NcclFile, Facts) {
  REQUIRE_FIXTURES();
  const Facts& f = GetParam();
  System sys;
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/" + f.file, &sys), braidSuccess) << lastError();
  EXPECT_EQ(static_cast<int>(sys.gpus.size()), f.gpus);
  std::vector<int> numa;
  for (const Cpu& c : sys.cpus) numa.push_back(c.numaid);
  std::sort(numa.begin(), numa.end());
  EXPECT_EQ(numa, f.numa);
  ASSERT_EQ(sys.nics.size(), f.nic_speeds.size());
  for (size_t i = 0; i < sys.nics.size(); ++i) {
    double speed = 0;
    for (int n : sys.nics[i].nets) speed += sys.nets[n].speed_gbps;
    EXPECT_DOUBLE_EQ(speed, f.nic_speeds[i]) << "NIC " << i;
  }
  for (int a = 0; a < f.gpus; ++a) {
    for (int b = a + 1; b < f.gpus; ++b) {
      int want = f.all_pairs_nvlink;
      for (const auto& [x, y, c] : f.nv)
        if (x == a && y == b) want = c;
      EXPECT_EQ(nvlinkCount(sys, a, b), want) << "GPUs " << a << "," << b;
      EXPECT_EQ(nvlinkCount(sys, b, a), want) << "GPUs " << b << "," << a;
    }
  }
  Paths p = computePaths(sys);
  ASSERT_EQ(static_cast<int>(p.nearest_nic.size()), f.gpus);
  for (int g = 0; g < f.gpus; ++g) {
    EXPECT_EQ(p.nearest_nic[g], f.nearest[g]) << "GPU " << g;
    if (p.nearest_nic[g] >= 0) {
      EXPECT_STREQ(pathClassName(p.gpu_nic[g][p.nearest_nic[g]].cls), f.nearest_class[g].c_str())
          << "GPU " << g;
    }
    EXPECT_GE(p.gpu_numa[g], 0) << "GPU " << g;
  }
  // Rings cover every GPU once.
  auto rings = buildRings(sys, p);
  if (f.gpus > 0) {
    ASSERT_EQ(rings.size(), 1u);
    std::vector<int> sorted = rings[0];
    std::sort(sorted.begin(), sorted.end());
    for (int g = 0; g < f.gpus; ++g) EXPECT_EQ(sorted[g], g);
  }
}

TEST_P(NcclFile, DumpLoadRoundTrip) {
  REQUIRE_FIXTURES();
  const Facts& f = GetParam();
  System a, b, c;
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/" + f.file, &a), braidSuccess) << lastError();
  std::string xml, xml2;
  ASSERT_EQ(dumpNcclTopoXml(a, &xml), braidSuccess);
  ASSERT_EQ(loadNcclTopoXmlString(xml, "dump of " + f.file, &b), braidSuccess)
      << lastError() << "\n"
      << xml;
  EXPECT_EQ(fingerprint(a), fingerprint(b)) << xml;
  EXPECT_TRUE(sameModel(a, b));
  // A second dump is a fixed point.
  ASSERT_EQ(dumpNcclTopoXml(b, &xml2), braidSuccess);
  EXPECT_EQ(xml, xml2);
  ASSERT_EQ(loadNcclTopoXmlString(xml2, "dump2", &c), braidSuccess);
  EXPECT_TRUE(sameModel(b, c));
}

INSTANTIATE_TEST_SUITE_P(Shared, NcclFile, ::testing::ValuesIn(facts()),
                         [](const ::testing::TestParamInfo<Facts>& info) {
                           std::string n = info.param.file;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// A <gpu> outside a <pci> has no bus id, so no <nvlink> can name it: its links are written from
// its own end only, and the dump loads back to the same model (fuzz_topo_xml found the other
// end written with target="", which the loader refuses).
TEST(NcclXml, GpuWithoutBusIdKeepsItsNvLinkThroughADump) {
  const std::string text =
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <gpu dev=\"1\" sm=\"80\">\n      "
      "<nvlink target=\"0001:00:00.0\" count=\"12\" tclass=\"0x030200\"/>\n    </gpu>\n    "
      "<pci busid=\"0001:00:00.0\" class=\"0x030200\">\n      <gpu dev=\"0\" sm=\"80\"/>\n    "
      "</pci>\n  </cpu>\n</system>\n";
  System a, b;
  ASSERT_EQ(loadNcclTopoXmlString(text, "gpu-outside-pci.xml", &a), braidSuccess) << lastError();
  auto nvlinks = [](const System& sys) {
    return std::count_if(sys.links.begin(), sys.links.end(),
                         [](const Link& l) { return l.type == LinkType::kNvLink; });
  };
  ASSERT_EQ(nvlinks(a), 1);
  std::string xml, xml2;
  ASSERT_EQ(dumpNcclTopoXml(a, &xml), braidSuccess);
  EXPECT_EQ(xml.find("target=\"\""), std::string::npos) << xml;
  ASSERT_EQ(loadNcclTopoXmlString(xml, "dump", &b), braidSuccess) << lastError() << "\n" << xml;
  EXPECT_TRUE(sameModel(a, b)) << xml;
  EXPECT_EQ(nvlinks(b), 1);
  ASSERT_EQ(dumpNcclTopoXml(b, &xml2), braidSuccess);
  EXPECT_EQ(xml, xml2);
}

// Two <nvlink> of one GPU to the same peer add up, as NCCL adds them; the peer's own listing of
// the pair is the same link, taken at the larger count when the two ends disagree.
TEST(NcclXml, RepeatedNvLinksOfOneGpuAddUp) {
  auto load = [](int peerCount, System* sys) {
    const std::string text =
        "<system version=\"1\">\n  <cpu numaid=\"0\">\n"
        "    <pci busid=\"0000:01:00.0\" class=\"0x030200\">\n      <gpu dev=\"0\" sm=\"80\">\n"
        "        <nvlink target=\"0000:02:00.0\" count=\"2\" tclass=\"0x030200\"/>\n"
        "        <nvlink target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030200\"/>\n"
        "      </gpu>\n    </pci>\n"
        "    <pci busid=\"0000:02:00.0\" class=\"0x030200\">\n      <gpu dev=\"1\" sm=\"80\">\n"
        "        <nvlink target=\"0000:01:00.0\" count=\"" +
        std::to_string(peerCount) +
        "\" tclass=\"0x030200\"/>\n"
        "      </gpu>\n    </pci>\n  </cpu>\n</system>\n";
    return loadNcclTopoXmlString(text, "repeated.xml", sys);
  };
  auto nvlinkCounts = [](const System& sys) {
    std::vector<int> counts;
    for (const Link& l : sys.links)
      if (l.type == LinkType::kNvLink) counts.push_back(l.count);
    return counts;
  };
  auto noted = [](const System& sys, const char* what) {
    for (const auto& n : sys.notes)
      if (n.find(what) != std::string::npos) return true;
    return false;
  };
  System same, fewer;
  ASSERT_EQ(load(6, &same), braidSuccess) << lastError();
  EXPECT_EQ(nvlinkCounts(same), std::vector<int>{6});
  EXPECT_TRUE(noted(same, "its count added (2 + 4), as NCCL adds them"));
  EXPECT_FALSE(noted(same, "counts differ"));
  ASSERT_EQ(load(3, &fewer), braidSuccess) << lastError();
  EXPECT_EQ(nvlinkCounts(fewer), std::vector<int>{6});
  EXPECT_TRUE(noted(fewer, "NVLink counts differ between the two ends (6 vs 3)"));
}

// Every *-topo*.xml in the directory, including ones added after this table.
TEST(NcclFiles, EveryFileLoadsAndRoundTrips) {
  REQUIRE_FIXTURES();
  auto files = topoFiles();
  ASSERT_FALSE(files.empty());
  std::set<std::string> known;
  for (const Facts& f : facts()) known.insert(f.file);
  for (const std::string& path : files) {
    System a, b;
    ASSERT_EQ(loadNcclTopoXml(path, &a), braidSuccess) << lastError();
    std::string xml;
    ASSERT_EQ(dumpNcclTopoXml(a, &xml), braidSuccess);
    ASSERT_EQ(loadNcclTopoXmlString(xml, path + " (dump)", &b), braidSuccess) << lastError();
    EXPECT_TRUE(sameModel(a, b)) << path;
    EXPECT_TRUE(known.count(fs::path(path).filename().string())) << "no facts for " << path;
  }
}

// Systems read from hwloc XML (hwloc_xml.cc) dump to NCCL XML that reads back to the same
// model; files the hwloc loader refuses are its own tests' business and are passed over here.
TEST(HwlocFiles, DumpLoadRoundTrip) {
  std::string dir = sharedDir() + "/topologies/hwloc";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "hwloc fixtures not found at " << dir;
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string path = e.path().string();
    System a, b;
    if (loadTopologyFile(path, &a) != braidSuccess) continue;
    ++checked;
    std::string xml;
    ASSERT_EQ(dumpNcclTopoXml(a, &xml), braidSuccess) << path << ": " << lastError();
    ASSERT_EQ(loadNcclTopoXmlString(xml, path + " (dump)", &b), braidSuccess) << lastError() << "\n"
                                                                              << xml;
    EXPECT_EQ(fingerprint(a), fingerprint(b)) << path;
  }
  if (checked == 0) GTEST_SKIP() << "the hwloc loader read none of " << dir;
}

TEST(NcclFiles, QuirksAreNoted) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/azure_ncv4-topo.xml", &sys), braidSuccess);
  auto has = [&](const std::string& what) {
    for (const auto& n : sys.notes)
      if (n.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("targets the GPU itself"));
  EXPECT_TRUE(has("empty link_speed"));
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/aws_p5.48xl-topo.xml", &sys), braidSuccess);
  EXPECT_TRUE(has("32 GT/s PCIe/s"));
  EXPECT_EQ(sys.pcis[1].pci.link_speed_gts, 32.0);
  EXPECT_EQ(sys.source, ncclDir() + "/aws_p5.48xl-topo.xml");
}

TEST(NcclFiles, GraphFileRefused) {
  REQUIRE_FIXTURES();
  System sys;
  std::string path = ncclDir() + "/azure_ncv4-graph.xml";
  EXPECT_EQ(loadNcclTopoXml(path, &sys), braidInvalidArgument);
  std::string msg = lastError();
  EXPECT_NE(msg.find(path + ":1:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("graph file"), std::string::npos) << msg;
}

TEST(NcclFiles, PathClasses) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/aws_p4d-24xl-topo.xml", &sys), braidSuccess);
  Paths p = computePaths(sys);
  EXPECT_EQ(p.gpu_gpu[0][0].cls, PathClass::kLoc);
  EXPECT_EQ(p.gpu_gpu[0][1].cls, PathClass::kPix);
  EXPECT_EQ(p.gpu_gpu[0][2].cls, PathClass::kPhb);
  EXPECT_EQ(p.gpu_gpu[0][4].cls, PathClass::kSys);
  EXPECT_DOUBLE_EQ(p.gpu_gpu[0][1].bw_gbs, 12.0);  // gen3 x16
  EXPECT_EQ(p.cpu_nic[0][0].cls, PathClass::kPhb);
  EXPECT_EQ(p.cpu_nic[0][2].cls, PathClass::kSys);
  EXPECT_DOUBLE_EQ(p.gpu_gpu[0][4].bw_gbs, 10.0);  // Skylake UPI (NCCL SKL_QPI_BW)

  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/rccl_topo_8p1h_MI250.xml", &sys), braidSuccess);
  p = computePaths(sys);
  EXPECT_EQ(p.gpu_gpu[0][1].cls, PathClass::kNvl);
  EXPECT_EQ(p.gpu_gpu[0][2].cls, PathClass::kNvb);  // 0-1-3-2 or 0-6-2 over xGMI
  EXPECT_EQ(p.gpu_numa[0], 1);
  EXPECT_EQ(p.gpu_numa[7], 3);

  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/simai_topo_8A100_4CX6.xml", &sys), braidSuccess);
  p = computePaths(sys);
  EXPECT_EQ(sys.nvswitches.size(), 6u);
  EXPECT_EQ(p.gpu_gpu[0][7].cls, PathClass::kNvl);
  // NCCL folds the switches into one: 6 switches x 2 links x 20 GB/s (sm80).
  EXPECT_DOUBLE_EQ(p.gpu_gpu[0][7].bw_gbs, 240.0);
  EXPECT_EQ(p.gpu_nic[0][0].cls, PathClass::kPhb);  // bond under the CPU
  EXPECT_EQ(p.gpu_nic[0][3].cls, PathClass::kSys);
}

TEST(NcclFiles, RingsFollowNvlinkAndSwitches) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/rccl_topo_8p1h_MI250.xml", &sys), braidSuccess);
  Paths p = computePaths(sys);
  auto rings = buildRings(sys, p);
  ASSERT_EQ(rings.size(), 1u);
  const auto& r = rings[0];
  for (size_t i = 0; i < r.size(); ++i)
    EXPECT_GT(nvlinkCount(sys, r[i], r[(i + 1) % r.size()]), 0)
        << r[i] << "->" << r[(i + 1) % r.size()];
  // Without NVLink, GPUs under one switch sit next to each other.
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/oci_BM.GPU4.8_topo-flattened.xml", &sys), braidSuccess);
  p = computePaths(sys);
  rings = buildRings(sys, p);
  ASSERT_EQ(rings.size(), 1u);
  std::vector<int> pos(8);
  for (int i = 0; i < 8; ++i) pos[rings[0][i]] = i;
  for (int g = 0; g < 8; g += 2) EXPECT_EQ(std::abs(pos[g] - pos[g + 1]), 1) << g;
}

TEST(NcclFiles, JsonAndText) {
  REQUIRE_FIXTURES();
  System sys;
  ASSERT_EQ(loadNcclTopoXml(ncclDir() + "/azure_nc48ads_A100_v4-topo.xml", &sys), braidSuccess);
  std::string j = toJson(sys);
  for (const char* key :
       {"\"numa_nodes\": [0, 1]", "\"nvlinks\": [{\"peer\": 1, \"count\": 12}]",
        "\"pci\": \"0001:00:00.0\"", "\"link_layer\": \"Ethernet\"", "\"speed_gbps\": 100",
        "\"gpu_gpu\"", "\"gpu_nic\"", "\"rings\": [[0, 1]]", "[\"LOC\", \"NVL\"]"})
    EXPECT_NE(j.find(key), std::string::npos) << key << "\n" << j;
  std::string t = toText(sys);
  EXPECT_NE(t.find("NV12"), std::string::npos) << t;
  EXPECT_NE(t.find("GPU0"), std::string::npos) << t;
}

// ---- Refusals: file and line named ----

std::string loadError(const std::string& text, const std::string& name = "bad.xml") {
  System sys;
  braidResult_t rc = loadNcclTopoXmlString(text, name, &sys);
  EXPECT_EQ(rc, braidInvalidArgument) << text;
  return lastError();
}

TEST(NcclErrors, Truncated) {
  std::string text =
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" "
      "class=\"0x030200\"/>\n";
  std::string msg = loadError(text);
  EXPECT_NE(msg.find("bad.xml:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed XML"), std::string::npos) << msg;
}

TEST(NcclErrors, TruncatedSharedFile) {
  REQUIRE_FIXTURES();
  std::string text = readText(ncclDir() + "/simai_topo_8A100_4CX6.xml");
  std::string msg = loadError(text.substr(0, text.size() / 2), "half.xml");
  EXPECT_NE(msg.find("half.xml:"), std::string::npos) << msg;
}

TEST(NcclErrors, UnknownElement) {
  std::string msg = loadError(
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <gizmo/>\n  </cpu>\n</system>\n");
  EXPECT_NE(msg.find("bad.xml:3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<gizmo>"), std::string::npos) << msg;
}

TEST(NcclErrors, BadBusId) {
  std::string msg = loadError(
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n\n    <pci busid=\"00:zz:1\"/>\n  </cpu>\n"
      "</system>\n");
  EXPECT_NE(msg.find("bad.xml:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("00:zz:1"), std::string::npos) << msg;
}

// Found by fuzz_topo_xml: a signed hexadecimal id loaded as a negative number, which the
// dump wrote as 0xfffff4f4 and the dump's reload refused. Ids take no sign.
TEST(NcclErrors, SignedHexIdRefused) {
  for (const char* v : {"0x-b0c", "-0xb0c", "0x+b0c", "+b0c"}) {
    std::string msg = loadError(std::string("<system version=\"1\">\n  <cpu numaid=\"0\">\n    "
                                            "<pci busid=\"0000:01:00.0\" subsystem_device=\"") +
                                v + "\"/>\n  </cpu>\n</system>\n");
    EXPECT_NE(msg.find("bad.xml:3:"), std::string::npos) << v << ": " << msg;
    EXPECT_NE(msg.find("subsystem_device"), std::string::npos) << v << ": " << msg;
  }
}

// Found by fuzz_topo_xml: link_width="169999999" overflowed int in pcieBw. A width is
// 0 (unknown, as real dumps write for some bridges) up to x32; anything else is refused.
TEST(NcclErrors, LinkWidthOutOfRangeRefused) {
  for (const char* v : {"169999999", "33", "-1", "2147483647"}) {
    std::string msg = loadError(std::string("<system version=\"1\">\n  <cpu numaid=\"0\">\n    "
                                            "<pci busid=\"0000:01:00.0\" link_speed=\"32 GT/s\" "
                                            "link_width=\"") +
                                v + "\"/>\n  </cpu>\n</system>\n");
    EXPECT_NE(msg.find("bad.xml:3:"), std::string::npos) << v << ": " << msg;
    EXPECT_NE(msg.find("link_width"), std::string::npos) << v << ": " << msg;
  }
  System sys;
  EXPECT_EQ(loadNcclTopoXmlString("<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci "
                                  "busid=\"0000:01:00.0\" link_speed=\"32 GT/s\" "
                                  "link_width=\"32\"/>\n  </cpu>\n</system>\n",
                                  "ok.xml", &sys),
            braidSuccess)
      << lastError();
  ASSERT_EQ(sys.pcis.size(), 1u);
  EXPECT_EQ(sys.pcis[0].pci.link_width, 32);
  EXPECT_NE(toText(sys).find("[PCIe gen5 x32, 96 GB/s]"), std::string::npos) << toText(sys);
  // 0 (or empty) is unknown, as real dumps write it: printed as such with the rating it gets, not
  // as x0.
  for (const auto& [attrs, shown] :
       {std::pair{"link_speed=\"32 GT/s\" link_width=\"0\"", "[PCIe gen5 x? (rated x16), 48 GB/s]"},
        std::pair{"link_speed=\"\" link_width=\"8\"", "[PCIe gen? (rated gen3) x8, 6 GB/s]"},
        std::pair{"link_speed=\"\" link_width=\"\"",
                  "[PCIe gen? (rated gen3) x? (rated x16), 12 GB/s]"}}) {
    System unknown;
    ASSERT_EQ(loadNcclTopoXmlString(std::string("<system version=\"1\">\n  <cpu numaid=\"0\">\n    "
                                                "<pci busid=\"0000:01:00.0\" ") +
                                        attrs + "/>\n  </cpu>\n</system>\n",
                                    "unknown.xml", &unknown),
              braidSuccess)
        << lastError();
    EXPECT_NE(toText(unknown).find(shown), std::string::npos) << attrs << ": " << toText(unknown);
  }
}

// NaN, infinite, absurd or below-gen1 link speeds, and NIC speeds or latencies no network has,
// are refused naming the attribute: they became NaN predictions, a 0 GB/s link, or a number
// too long for braid-sim's header line (which then printed forever).
TEST(NcclErrors, NonFiniteAndAbsurdSpeedsRefused) {
  for (const char* v : {"nan GT/s", "1e-308 GT/s", "1 GT/s", "1e308 GT/s", "-16 GT/s"}) {
    std::string msg = loadError(std::string("<system version=\"1\">\n  <cpu numaid=\"0\">\n    "
                                            "<pci busid=\"0000:01:00.0\" link_speed=\"") +
                                v + "\"/>\n  </cpu>\n</system>\n");
    EXPECT_NE(msg.find("bad.xml:3:"), std::string::npos) << v << ": " << msg;
    EXPECT_NE(msg.find("link_speed"), std::string::npos) << v << ": " << msg;
  }
  const std::string nic =
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" "
      "class=\"0x020000\">\n      <nic>\n        <net name=\"mlx5_0\" dev=\"0\" ";
  for (const char* attr : {"speed=\"nan\"", "speed=\"1e308\"", "speed=\"inf\"", "speed=\"-1\"",
                           "latency=\"nan\"", "latency=\"-2\"", "latency=\"1e300\""}) {
    std::string msg = loadError(nic + attr + "/>\n      </nic>\n    </pci>\n  </cpu>\n</system>\n");
    EXPECT_NE(msg.find("bad.xml:5:"), std::string::npos) << attr << ": " << msg;
    EXPECT_NE(msg.find(std::string(attr).substr(0, 5)), std::string::npos) << attr << ": " << msg;
  }
}

TEST(NcclErrors, DanglingNvlink) {
  std::string msg = loadError(
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\" "
      "class=\"0x030200\">\n      <gpu dev=\"0\" sm=\"80\">\n        <nvlink "
      "target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030200\"/>\n      </gpu>\n    </pci>\n  "
      "</cpu>\n</system>\n");
  EXPECT_NE(msg.find("bad.xml:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0000:02:00.0"), std::string::npos) << msg;
}

TEST(NcclErrors, MissingFile) {
  System sys;
  EXPECT_EQ(loadNcclTopoXml("/nonexistent/topo.xml", &sys), braidInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("/nonexistent/topo.xml"), std::string::npos);
}

TEST(NcclErrors, EmptyAndWrongRoot) {
  EXPECT_EQ(loadError(""), "bad.xml: empty file");
  EXPECT_EQ(loadError(" \n\t\n"), "bad.xml: empty file");
  std::string msg = loadError("<!-- only a comment -->\n<topology version=\"2.0\"/>\n");
  EXPECT_NE(msg.find("hwloc"), std::string::npos) << msg;
  msg = loadError("<system>\n<cpu numaid=\"zero\"/></system>");
  EXPECT_NE(msg.find("bad.xml:2:"), std::string::npos) << msg;
}

// An empty file through loadTopologyFile: "<file>: empty file", not tinyxml2's
// XML_ERROR_EMPTY_DOCUMENT at line 0.
TEST(NcclErrors, EmptyFileThroughLoadTopologyFile) {
  std::string path = fs::temp_directory_path() / ("braid-empty-" + std::to_string(getpid()));
  { std::ofstream(path) << "\n"; }
  System sys;
  EXPECT_EQ(loadTopologyFile(path, &sys), braidInvalidArgument);
  EXPECT_EQ(std::string(lastError()), path + ": empty file");
  fs::remove(path);
}

// Two <gpu dev="1"> on one host: refused at the second, naming the first's line.
TEST(NcclErrors, DuplicateGpuDev) {
  std::string msg = loadError(
      "<system version=\"1\">\n  <cpu numaid=\"0\">\n"
      "    <pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"1\"/></pci>\n"
      "    <pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"0\"/></pci>\n"
      "    <pci busid=\"0000:03:00.0\" class=\"0x030200\">\n      <gpu dev=\"1\"/>\n"
      "    </pci>\n  </cpu>\n</system>\n");
  EXPECT_NE(msg.find("bad.xml:6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dev 1 of line 3"), std::string::npos) << msg;
}

// ---- NCCL graph files (NCCL_GRAPH_FILE) ----

// azure_ncv4-graph.xml: 3 graphs on 4 GPUs, no nets - id 0 RING (pattern 4) with 2 channels
// 0 1 2 3 and 0 3 2 1; id 1 BALANCED_TREE (1) and id 2 TREE (3), 4 channels each; speeds 12,
// types SYS/PIX.
TEST(NcclGraph, AzureNcv4) {
  REQUIRE_FIXTURES();
  std::string path = ncclDir() + "/azure_ncv4-graph.xml";
  System sys;
  ASSERT_EQ(loadTopologyFile(path, &sys), braidSuccess) << lastError();
  EXPECT_EQ(sys.source, path);
  ASSERT_EQ(sys.graphs.size(), 3u);
  EXPECT_EQ(sys.graphs[0].pattern, kPatternRing);
  EXPECT_STREQ(graphPatternName(sys.graphs[0].pattern), "RING");
  EXPECT_EQ(sys.graphs[1].pattern, kPatternBalancedTree);
  EXPECT_STREQ(graphPatternName(sys.graphs[1].pattern), "BALANCED_TREE");
  EXPECT_EQ(sys.graphs[2].pattern, kPatternTree);
  EXPECT_EQ(sys.graphs[2].id, 2);
  EXPECT_EQ(sys.graphs[0].channels.size(), 2u);
  EXPECT_EQ(sys.graphs[1].channels.size(), 4u);
  EXPECT_EQ(sys.graphs[1].nchannels, 4);
  EXPECT_EQ(sys.graphs[0].speedintra, 12);
  EXPECT_EQ(sys.graphs[0].typeintra, "SYS");
  EXPECT_EQ(sys.graphs[0].typeinter, "PIX");
  EXPECT_FALSE(sys.graphs[0].crossnic);
  EXPECT_EQ(sys.graphs[0].channels[0].gpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(sys.graphs[0].channels[1].gpus, (std::vector<int>{0, 3, 2, 1}));
  EXPECT_EQ(sys.graphs[1].channels[3].gpus, (std::vector<int>{2, 3, 0, 1}));
  ASSERT_EQ(sys.gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sys.gpus[i].dev, i);
  EXPECT_TRUE(sys.nics.empty());
  bool placement = false;
  for (const auto& n : sys.notes) placement |= n.find("GPU placement unknown") == 0;
  EXPECT_TRUE(placement);
  EXPECT_EQ(graphRings(sys), (std::vector<std::vector<int>>{{0, 1, 2, 3}, {0, 3, 2, 1}}));
  std::string json = toJson(sys);
  EXPECT_NE(json.find("\"rings\": [[0, 1, 2, 3], [0, 3, 2, 1]]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"pattern_name\": \"BALANCED_TREE\""), std::string::npos) << json;
  EXPECT_NE(json.find("{\"gpus\": [0, 1, 2, 3], \"nets\": []}"), std::string::npos) << json;
  EXPECT_NE(toText(sys).find("graph 0 RING (pattern 4): 2 channel(s)"), std::string::npos);
  // No PCI placement, so no NCCL topology XML.
  std::string xml;
  EXPECT_EQ(dumpNcclTopoXml(sys, &xml), braidInvalidUsage);
  EXPECT_NE(std::string(lastError()).find("graph file"), std::string::npos) << lastError();
}

TEST(NcclGraph, NetsAndNchannelsMismatch) {
  System sys;
  ASSERT_EQ(loadNcclGraphXmlString(
                "<graphs version=\"1\">\n  <graph id=\"0\" pattern=\"4\" nchannels=\"2\" "
                "crossnic=\"1\">\n    <channel><net dev=\"1\"/><gpu dev=\"1\"/><gpu dev=\"0\"/>"
                "<net dev=\"1\"/></channel>\n  </graph>\n</graphs>\n",
                "g.xml", &sys),
            braidSuccess)
      << lastError();
  ASSERT_EQ(sys.graphs.size(), 1u);
  EXPECT_TRUE(sys.graphs[0].crossnic);
  EXPECT_EQ(sys.graphs[0].channels[0].nets, (std::vector<int>{1, 1}));
  EXPECT_EQ(sys.gpus.size(), 2u);
  ASSERT_EQ(sys.nets.size(), 1u);
  EXPECT_EQ(sys.nets[0].dev, 1);
  EXPECT_EQ(graphRings(sys), (std::vector<std::vector<int>>{{1, 0}}));
  bool noted = false;
  for (const auto& n : sys.notes) noted |= n.find("g.xml:2:") == 0 && n.find("nchannels") != n.npos;
  EXPECT_TRUE(noted);
}

std::string graphError(const std::string& text) {
  System sys;
  EXPECT_EQ(loadNcclGraphXmlString(text, "g.xml", &sys), braidInvalidArgument) << text;
  return lastError();
}

TEST(NcclGraph, Malformed) {
  const std::string head = "<graphs version=\"1\">\n<graph id=\"0\" pattern=\"4\">\n<channel>\n";
  const std::string tail = "</channel>\n</graph>\n</graphs>\n";
  std::string msg = graphError(head + "<gpu dev=\"-1\"/>\n" + tail);
  EXPECT_NE(msg.find("g.xml:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("negative"), std::string::npos) << msg;
  msg = graphError(head + "<gpu/>\n" + tail);
  EXPECT_NE(msg.find("g.xml:4: <gpu> without a dev attribute"), std::string::npos) << msg;
  msg = graphError(head + "<gpu dev=\"x\"/>\n" + tail);
  EXPECT_NE(msg.find("g.xml:4:"), std::string::npos) << msg;
  msg = graphError(head + "<gpu dev=\"0\"/>\n<gpu dev=\"0\"/>\n" + tail);
  EXPECT_NE(msg.find("g.xml:5:"), std::string::npos) << msg;
  msg = graphError(head + "<nvlink dev=\"0\"/>\n" + tail);
  EXPECT_NE(msg.find("g.xml:4: unknown element <nvlink> in <channel>"), std::string::npos) << msg;
  msg = graphError("<graphs version=\"1\">\n  <channel><gpu dev=\"0\"/></channel>\n</graphs>\n");
  EXPECT_NE(msg.find("g.xml:2: <channel> outside a <graph>"), std::string::npos) << msg;
  msg = graphError(head + "<gpu dev=\"0\">\n");
  EXPECT_NE(msg.find("malformed XML"), std::string::npos) << msg;
  EXPECT_EQ(graphError(""), "g.xml: empty file");
}

// Speeds that are not finite non-negative numbers are refused with file:line (they would
// otherwise reach the JSON output as inf/nan), and toJson writes null for any that get into a
// System another way.
TEST(NcclGraph, NonFiniteSpeeds) {
  auto graph = [](const std::string& attrs) {
    return "<graphs version=\"1\">\n<graph id=\"0\" pattern=\"4\" nchannels=\"1\" " + attrs +
           ">\n<channel><gpu dev=\"0\"/><gpu dev=\"1\"/></channel>\n</graph>\n</graphs>\n";
  };
  for (const char* bad : {"inf", "nan", "1e999", "-inf", "-1", "-0.5", "NaN", "infinity"}) {
    for (const char* attr : {"speedintra", "speedinter"}) {
      std::string msg = graphError(graph(std::string(attr) + "=\"" + bad + "\""));
      EXPECT_NE(msg.find("g.xml:2:"), std::string::npos) << attr << "=" << bad << ": " << msg;
      EXPECT_NE(msg.find(attr), std::string::npos) << msg;
      EXPECT_NE(msg.find(bad), std::string::npos) << msg;
    }
  }
  System sys;
  ASSERT_EQ(loadNcclGraphXmlString(graph("speedintra=\"0\" speedinter=\"12.5\""), "g.xml", &sys),
            braidSuccess)
      << lastError();
  ASSERT_EQ(sys.graphs.size(), 1u);
  EXPECT_EQ(sys.graphs[0].speedintra, 0);
  EXPECT_EQ(sys.graphs[0].speedinter, 12.5);
  std::string json = toJson(sys);
  EXPECT_NE(json.find("\"speedintra\": 0, \"speedinter\": 12.5,"), std::string::npos) << json;
  sys.graphs[0].speedintra = std::numeric_limits<double>::infinity();
  sys.graphs[0].speedinter = std::numeric_limits<double>::quiet_NaN();
  json = toJson(sys);
  EXPECT_NE(json.find("\"speedintra\": null, \"speedinter\": null,"), std::string::npos) << json;
  for (const char* word : {": inf", ": -inf", ": nan", ": -nan"})
    EXPECT_EQ(json.find(word), std::string::npos) << word << " in " << json;
}

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

// ---- Mutated input: the fuzz target's entry must never crash ----

TEST(NcclFuzzReplay, MutatedSharedFiles) {
  REQUIRE_FIXTURES();
  std::mt19937 rng(1234);
  int loaded = 0, refused = 0;
  for (const std::string& path : topoFiles()) {
    std::string text = readText(path);
    std::vector<std::string> variants;
    for (size_t cut : {size_t{0}, size_t{1}, text.size() / 3, text.size() / 2, text.size() - 2})
      variants.push_back(text.substr(0, std::min(cut, text.size())));
    for (int k = 0; k < 40; ++k) {
      std::string m = text;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !m.empty(); ++e) {
        size_t at = rng() % m.size();
        switch (rng() % 4) {
          case 0:
            m[at] = static_cast<char>(rng() % 256);
            break;
          case 1:
            m.erase(at, 1 + rng() % 16);
            break;
          case 2:
            m.insert(at, m.substr(rng() % m.size(), rng() % 64));
            break;
          case 3:
            m[at] = "<>\"=/:.0xf "[rng() % 11];
            break;
        }
      }
      variants.push_back(m);
    }
    for (const std::string& v : variants) {
      System sys;
      braidResult_t rc = loadNcclTopoXmlString(v, "mutant.xml", &sys);
      if (rc == braidSuccess) {
        ++loaded;
        // A model that loads must also print, route and dump.
        computePaths(sys);
        toJson(sys);
        toText(sys);
        std::string xml;
        if (dumpNcclTopoXml(sys, &xml) == braidSuccess) {
          System again;
          EXPECT_EQ(loadNcclTopoXmlString(xml, "redump.xml", &again), braidSuccess)
              << lastError() << "\n"
              << xml;
        }
      } else {
        ++refused;
        EXPECT_EQ(rc, braidInvalidArgument);
        EXPECT_NE(std::string(lastError()).find("mutant.xml"), std::string::npos);
      }
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace braid::topo
