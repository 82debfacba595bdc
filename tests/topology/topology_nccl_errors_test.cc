// The NCCL topology XML reader's refusals of bad input, each naming file and line: truncated
// and malformed XML, unknown elements, bad bus ids and numbers, dangling NVLinks, duplicate
// GPUs, missing and empty files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo {
namespace {

namespace fs = std::filesystem;

using fixtures::ncclDir;
using fixtures::readText;

#define REQUIRE_FIXTURES() REQUIRE_FIXTURE_DIR(ncclDir())

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

}  // namespace
}  // namespace braid::topo
