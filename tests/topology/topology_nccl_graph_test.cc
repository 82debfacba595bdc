// NCCL graph files (NCCL_GRAPH_FILE) as a topology: the facts of a real one (its RING channels
// become the rings), nets and nchannels that disagree, malformed graphs and speeds that are not
// finite non-negative numbers refused naming file and line.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "base/error.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

using fixtures::ncclDir;

#define REQUIRE_FIXTURES() REQUIRE_FIXTURE_DIR(ncclDir())

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

}  // namespace
}  // namespace braid::topo
