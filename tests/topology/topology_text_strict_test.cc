// Malformed or out-of-range terminal text refused with the line number, the line's text and
// what was expected, never read silently into another machine: nvidia-smi matrices with a
// repeated column or row, a row the header does not list, a diagonal that is not X, an
// asymmetric matrix, extra cells, a NUMA or CPU affinity out of range; more devices than a
// text topology may have.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "topology/text_util.h"
#include "topology/topology.h"

namespace braid::topo {
namespace {

std::string smiError(const std::string& text) {
  System sys;
  EXPECT_EQ(loadNvidiaSmiTopo(text, "m.txt", &sys), braidInvalidArgument) << text;
  return lastError();
}

#define EXPECT_HAS(hay, needle) EXPECT_NE((hay).find(needle), std::string::npos) << (hay)

TEST(StrictText, SmiRepeatedHeaderColumnRefused) {
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\tNV4\t0-7\n"),
             "m.txt:1: 'GPU0\tGPU1\tGPU1\tCPU Affinity': column GPU1 given twice; expected "
             "each device's column once");
}

TEST(StrictText, SmiRowGivenTwiceRefused) {
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\t X \t0-7\n"
                      "GPU1\tNV4\t X \t0-7\n"),
             "m.txt:4: 'GPU1\tNV4\t X \t0-7': a second row of GPU1 (the first at line 3); "
             "expected each device's row once");
}

TEST(StrictText, SmiRowNotInHeaderRefused) {
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\t X \t0-7\n"
                      "GPU2\tNV4\tNV4\t0-7\n"),
             "m.txt:4: 'GPU2\tNV4\tNV4\t0-7': a row of GPU2, which the header at line 1 does "
             "not list; expected the row of a device of the header");
  // topo -p2p r with a row beyond its header.
  EXPECT_HAS(smiError(" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n GPU2\tOK\tOK\tX\n"),
             "m.txt:4: 'GPU2\tOK\tOK\tX': a row of GPU2");
}

TEST(StrictText, SmiDiagonalNotXRefused) {
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\tNV4\tNV4\t0-7\nGPU1\tNV4\t X \t0-7\n"),
             "m.txt:2: 'GPU0\tNV4\tNV4\t0-7': cell 1 (GPU0) is 'NV4', expected X (the device "
             "itself)");
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \t X \t0-7\nGPU1\tNV4\t X \t0-7\n"),
             "cell 2 (GPU1) is 'X', expected no X off the diagonal");
}

TEST(StrictText, SmiAsymmetricMatrixRefused) {
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSYS\t0-7\nGPU1\tNV12\t X \t0-7\n"),
             "m.txt:3: 'GPU1\tNV12\t X \t0-7': cell 1 (GPU0) is 'NV12' but line 2 gives "
             "GPU0-GPU1 as 'SYS'; expected a symmetric matrix");
  // A P2P capability may differ by direction.
  System sys;
  EXPECT_EQ(loadNvidiaSmiTopo(" \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n GPU1\tNS\tX\t\n", "p.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(sys.gpus.size(), 2u);
}

TEST(StrictText, SmiRowWithExtraCellsRefused) {
  EXPECT_HAS(smiError("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV4\t0-7\t0\n"
                      "GPU1\tNV4\t X \t0-7\t0\t99\tzz\n"),
             "m.txt:3: 'GPU1\tNV4\t X \t0-7\t0\t99\tzz': 6 cells after GPU1; expected at most 4 "
             "(the header's columns)");
}

TEST(StrictText, SmiAffinityOutOfRangeRefused) {
  const std::string h = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n";
  EXPECT_HAS(smiError(h + "GPU0\t X \tNV4\t0-7\t99999999999\nGPU1\tNV4\t X \t0-7\t0\n"),
             "m.txt:2: 'GPU0\t X \tNV4\t0-7\t99999999999': NUMA affinity '99999999999' of GPU0; "
             "expected a NUMA node 0..1023 or N/A");
  EXPECT_HAS(smiError(h + "GPU0\t X \tNV4\t7-0\t0\nGPU1\tNV4\t X \t0-7\t0\n"),
             "m.txt:2: 'GPU0\t X \tNV4\t7-0\t0': CPU affinity '7-0' of GPU0; expected a CPU list");
  EXPECT_HAS(smiError(h + "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV4\t X \tabc\t0\n"),
             "m.txt:3: 'GPU1\tNV4\t X \tabc\t0': CPU affinity 'abc' of GPU1");
  System sys;
  ASSERT_EQ(
      loadNvidiaSmiTopo(h + "GPU0\t X \tNV4\tN/A\tN/A\nGPU1\tNV4\t X \t0-7\t1023\n", "m.txt", &sys),
      braidSuccess)
      << lastError();
  EXPECT_EQ(sys.gpus.size(), 2u);
}

TEST(StrictText, SmiTooManyDevicesRefused) {
  const int n = text::kMaxTextDevices + 1;
  std::string t;
  for (int i = 0; i < n; ++i) t += "\tGPU" + std::to_string(i);
  t += "\tCPU Affinity\n";
  EXPECT_HAS(smiError(t),
             "m.txt:1: the header lists 1025 devices, more than the 1024 a text "
             "topology may have");
}

}  // namespace
}  // namespace braid::topo
