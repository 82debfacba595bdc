// Malformed or out-of-range terminal text refused with the line number, the line's text and
// what was expected, never read silently into another machine: nvidia-smi matrices with a
// repeated column or row, a row the header does not list, a diagonal that is not X, an
// asymmetric matrix, extra cells, a NUMA or CPU affinity out of range; more devices than a
// text topology may have.
#include <gtest/gtest.h>

#include <cstdio>
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

namespace braid::topo {
namespace {

double nicGbps(const System& sys, int nic) {
  double s = 0;
  for (int k : sys.nics[nic].nets) s += sys.nets[k].speed_gbps;
  return s;
}

bool noted(const System& sys, const std::string& part) {
  for (const auto& n : sys.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(StrictText, IbPortsNotActiveCountNoBandwidth) {
  System sys;
  ASSERT_EQ(loadIbstat("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: 400\n"
                       "\tPort 2:\n\t\tState: Polling\n\t\tRate: 10\n\tPort 3:\n\t\tRate: 10\n"
                       "\t\tState: Down\n",
                       "s.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(nicGbps(sys, 0), 400);
  EXPECT_TRUE(noted(sys, "mlx5_0 port 2: Polling (not active: no bandwidth counted)"));
  EXPECT_TRUE(noted(sys, "mlx5_0 port 3: Down (not active: no bandwidth counted)"));
  ASSERT_EQ(loadIbvDevinfo("hca_id:\tmlx5_0\n\tport:\t1\n\t\tstate:\t\tPORT_ACTIVE (4)\n"
                           "\t\tactive_width:\t4X (2)\n\t\tactive_speed:\t100.0 Gbps (128)\n"
                           "\tport:\t2\n\t\tstate:\t\tPORT_DOWN (1)\n\t\tactive_width:\t4X (2)\n"
                           "\t\tactive_speed:\t100.0 Gbps (128)\n",
                           "v.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(nicGbps(sys, 0), 400);
  EXPECT_TRUE(noted(sys, "mlx5_0 port 2: PORT_DOWN (1) (not active: no bandwidth counted)"));
  ASSERT_EQ(loadIbstatus("Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t 1: DOWN\n"
                         "\trate:\t 400 Gb/sec (4X NDR)\n",
                         "st.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(nicGbps(sys, 0), 0);
}

TEST(StrictText, IbPortNumberOutOfRangeRefused) {
  System sys;
  EXPECT_EQ(loadIbstat("CA 'mlx5_0'\n\tPort 4294967297:\n\t\tState: Active\n", "s.txt", &sys),
            braidInvalidArgument);
  EXPECT_HAS(std::string(lastError()),
             "s.txt:2: 'Port 4294967297:': bad port number, expected 'Port N:' with N in 0..255");
  EXPECT_EQ(loadIbstatus("Infiniband device 'mlx5_0' port 256 status:\n", "st.txt", &sys),
            braidInvalidArgument);
  EXPECT_HAS(std::string(lastError()), "st.txt:1: 'Infiniband device 'mlx5_0' port 256 status:'");
}

TEST(StrictText, IbRatesOutOfRangeNoted) {
  System sys;
  ASSERT_EQ(loadIbstat("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n"
                       "\t\tRate: 99999999999999999999\n"
                       "CA 'mlx5_1'\n\tPort 1:\n\t\tState: Active\n\t\tRate: -400\n",
                       "s.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_EQ(nicGbps(sys, 0), 0);
  EXPECT_EQ(nicGbps(sys, 1), 0);
  EXPECT_TRUE(noted(sys,
                    "s.txt:4: 'Rate: 99999999999999999999': not a rate in (0, 10000] Gb/sec; "
                    "the port's rate is unknown (0)"));
  EXPECT_TRUE(noted(sys, "s.txt:8: 'Rate: -400': not a rate"));
  ASSERT_EQ(loadIbstatus("Infiniband device 'mlx5_1' port 1 status:\n\tstate:\t 4: ACTIVE\n"
                         "\trate:\t abc Gb/sec (4X NDR)\n",
                         "st.txt", &sys),
            braidSuccess)
      << lastError();
  EXPECT_TRUE(noted(sys, "st.txt:3: 'rate:\t abc Gb/sec (4X NDR)': not a rate"));
}

}  // namespace
}  // namespace braid::topo

namespace braid::topo {
namespace {

TEST(StrictText, LspciTreeRootBusTwiceRefused) {
  System sys;
  EXPECT_EQ(loadLspciTree("-+-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100\n"
                          " \\-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100\n",
                          "t.txt", &sys),
            braidInvalidArgument);
  EXPECT_HAS(std::string(lastError()),
             "t.txt:2: '\\-[0000:00]-+-01.0-[01]----00.0  NVIDIA Corporation GH100': root bus "
             "[0000:00] listed twice (first at line 1)");
}

TEST(StrictText, LspciTreeTooManyDevicesRefused) {
  std::string t = "-[0000:00]-+-00.0  Intel Corporation Device 09a2\n";
  for (int b = 1; b <= 255; ++b)
    for (int f = 0; f < 5; ++f) {
      char buf[96];
      std::snprintf(buf, sizeof(buf),
                    "           +-%02x.%d-[%02x]----00.0  NVIDIA Corporation GH100\n", b & 0x1f, f,
                    b);
      t += buf;
    }
  System sys;
  EXPECT_EQ(loadLspciTree(t, "t.txt", &sys), braidInvalidArgument);
  EXPECT_HAS(std::string(lastError()),
             "t.txt: the tree has 1275 GPUs, NVSwitches and NICs, more than the 1024 a text "
             "topology may have");
}

}  // namespace
}  // namespace braid::topo

namespace braid::topo {
namespace {

TEST(StrictText, LspciTooManyDevicesRefused) {
  std::string t;
  for (int b = 1; b <= 255; ++b)
    for (int d = 0; d < 5; ++d) {
      char buf[96];
      std::snprintf(buf, sizeof(buf), "%02x:%02x.0 3D controller: NVIDIA Corporation GH100\n", b,
                    d);
      t += buf;
    }
  System sys;
  EXPECT_EQ(loadLspci(t, "l.txt", &sys), braidInvalidArgument);
  EXPECT_HAS(std::string(lastError()),
             "l.txt: lspci lists 1275 GPUs, NVSwitches and NICs, more than the 1024 a text "
             "topology may have");
}

}  // namespace
}  // namespace braid::topo
