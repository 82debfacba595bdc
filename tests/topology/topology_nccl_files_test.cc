// The topology model over real NCCL topology files (../shared/topologies/nccl): facts read by
// hand from each file, dump -> load round trips (hwloc XML files' dumps too), and mutated files
// replayed through the loader (the fuzz target's entry) without a crash. Refusals of bad input:
// topology_nccl_errors_test.cc; NCCL graph files: topology_nccl_graph_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

namespace fs = std::filesystem;

using fixtures::ncclDir;
using fixtures::readText;
using fixtures::sharedDir;

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
