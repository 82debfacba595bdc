// braid/braid_model.h: a topology read and printed, a job built from it, and its calls costed,
// each against the internals it wraps on the same input (the loaders and printers, the fabric,
// the selector and the simulator), and every refusal with its code and the argument it names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/device_schedule.h"
#include "base/error.h"
#include "braid/braid_model.h"
#include "topology/placement.h"
#include "topology/topology.h"
#include "tuning/cost_model.h"
#include "tuning/simulate.h"
#include "tuning/topo_fabric.h"

namespace {

// In the repository (perf/systems), so these tests need nothing from ../shared.
const std::string kGb300 =
    std::string(BRAID_SOURCE_DIR) + "/perf/systems/oci_bm_gpu_gb300_4-topo.xml";

braidTopology_t load(const std::string& file) {
  braidTopology_t t = nullptr;
  EXPECT_EQ(braidTopologyLoad(&t, file.c_str(), nullptr), braidSuccess) << braid::lastError();
  return t;
}

TEST(ModelApi, PrintsWhatTheLoaderAndPrintersMake) {
  braidTopology_t t = load(kGb300);
  braid::topo::System sys;
  ASSERT_EQ(braid::topo::loadTopologyFile(kGb300, &sys), braidSuccess);
  const char* text = nullptr;
  ASSERT_EQ(braidTopologyPrint(t, braidTopologyText, &text), braidSuccess);
  EXPECT_EQ(std::string(text), braid::topo::toText(sys));
  ASSERT_EQ(braidTopologyPrint(t, braidTopologyJson, &text), braidSuccess);
  EXPECT_EQ(std::string(text), braid::topo::toJson(sys));
  std::string xml;
  ASSERT_EQ(braid::topo::dumpNcclTopoXml(sys, &xml), braidSuccess);
  ASSERT_EQ(braidTopologyPrint(t, braidTopologyNcclXml, &text), braidSuccess);
  EXPECT_EQ(std::string(text), xml);
  EXPECT_EQ(braidTopologyPrint(t, static_cast<braidTopologyFormat_t>(7), &text),
            braidInvalidArgument);
  EXPECT_NE(std::string(braid::lastError()).find("format 7"), std::string::npos);
  EXPECT_EQ(braidTopologyPrint(t, braidTopologyText, nullptr), braidInvalidArgument);
  braidTopologyDestroy(t);
}

TEST(ModelApi, RefusesBadSources) {
  braidTopology_t t = nullptr;
  EXPECT_EQ(braidTopologyLoad(nullptr, kGb300.c_str(), nullptr), braidInvalidArgument);
  EXPECT_EQ(braidTopologyLoad(&t, kGb300.c_str(), "/"), braidInvalidArgument);
  EXPECT_NE(std::string(braid::lastError()).find("exclude each other"), std::string::npos);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(braidTopologyLoad(&t, "/nonexistent/topo.xml", nullptr), braidSuccess);
  EXPECT_NE(std::string(braid::lastError()).find("/nonexistent/topo.xml"), std::string::npos);
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(braidTopologyDestroy(nullptr), braidSuccess);
}

// Every algorithm's figures are the selector's and the simulator's on the fabric the model
// describes, built here from the same file and options.
TEST(ModelApi, PredictsWhatTheSelectorAndSimulatorPredict) {
  braidTopology_t t = load(kGb300);
  braidModelConfig config = {};
  config.hosts = 2;
  braidModel_t m = nullptr;
  ASSERT_EQ(braidModelCreate(&m, t, &config), braidSuccess) << braid::lastError();
  braidTopologyDestroy(t);  // the model stands alone

  braid::topo::System sys;
  ASSERT_EQ(braid::topo::loadTopologyFile(kGb300, &sys), braidSuccess);
  braid::tuning::Fabric fabric;
  std::string why;
  ASSERT_EQ(braid::tuning::fabricFromTopology(sys, 2, {}, &fabric, &why), braidSuccess);
  fabric.ring = braid::topo::commRing(fabric.hostOf, {});
  bool identity = true;
  for (int i = 0; i < fabric.nranks(); ++i) identity = identity && fabric.ring[i] == i;
  if (identity) fabric.ring.clear();

  braidModelInfo info;
  ASSERT_EQ(braidModelGetInfo(m, &info), braidSuccess);
  EXPECT_EQ(info.nranks, 8);  // 4 GPUs per host
  EXPECT_EQ(info.simulates, 1);
  EXPECT_EQ(std::string(info.fabric), fabric.describe());
  EXPECT_EQ(std::string(info.notes), why);

  for (const char* coll : {"allreduce", "allgather", "alltoall", "broadcast"}) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 24}) {
      SCOPED_TRACE(std::string(coll) + " count " + std::to_string(count));
      braidModelEstimate est[16];
      int n = 0, chosen = -2;
      size_t piece = 0, bytes = 0;
      double factor = 0;
      ASSERT_EQ(braidModelPredict(m, coll, count, braidFloat32, 1, est, 16, &n, &chosen, &piece,
                                  &bytes, &factor),
                braidSuccess)
          << braid::lastError();
      braid::CollArgs args;
      for (int c = 0; c < braid::kNumCollectives; ++c)
        if (std::string(braid::collectiveName(static_cast<braid::Collective>(c))) == coll)
          args.coll = static_cast<braid::Collective>(c);
      args.count = count;
      args.dtype = braidFloat32;
      args.nranks = 8;
      int best = -1;
      const auto cands = braid::tuning::rankCandidates(args, 4, fabric, &best);
      // After the table's algorithms, NCCL's device algorithms (NVLS, NVLSTree, PAT), priced
      // from their device schedules; the pick is the least of all (a device algorithm only
      // where it is more than kTie faster).
      int expectChosen = best, i = static_cast<int>(cands.size());
      double bestUs = cands[best].predicted_us;
      for (const braid::DeviceAlgorithm& d : braid::deviceAlgorithms()) {
        if (d.coll != args.coll) continue;
        ASSERT_LT(i, n);
        EXPECT_STREQ(est[i].algorithm, d.name);
        EXPECT_EQ(est[i].deviceOnly, 1);
        EXPECT_EQ(est[i].supported, d.supports(fabric) == nullptr);
        if (est[i].supported) {
          braid::DeviceSchedule s;
          d.build(fabric, static_cast<double>(bytes), &s);
          const double us = braid::deviceScheduleTime(s).total_us;
          EXPECT_EQ(est[i].predictedUs, us);
          if (us * (1 + braid::tuning::kTie) < bestUs) {
            expectChosen = i;
            bestUs = us;
          }
        }
        ++i;
      }
      ASSERT_EQ(n, i);
      EXPECT_EQ(chosen, expectChosen);
      EXPECT_EQ(bytes, braid::tuning::callBytes(args.coll, count, 4, 8));
      EXPECT_EQ(factor, braid::tuning::busBwFactor(args.coll, 8));
      EXPECT_EQ(piece, chosen == best
                           ? braid::tuning::choosePieceBytes(*cands[best].algo, args, 4, fabric)
                           : fabric.nvls_chunk_bytes * fabric.nvls_channels);
      for (int i = 0; i < static_cast<int>(cands.size()); ++i) {
        EXPECT_EQ(est[i].deviceOnly, 0);
        EXPECT_STREQ(est[i].algorithm, cands[i].algo->name);
        EXPECT_EQ(est[i].supported, cands[i].unsupported == nullptr);
        EXPECT_EQ(est[i].predictedUs, cands[i].predicted_us);
        if (!est[i].supported) continue;
        const auto sim = braid::tuning::simulateSchedules(*cands[i].algo, args, 4, fabric);
        EXPECT_EQ(est[i].simulatedUs, sim.ok ? sim.time_us : -1);
      }
    }
  }
  braidModelDestroy(m);
}

TEST(ModelApi, RefusesBadJobsAndCalls) {
  braidTopology_t t = load(kGb300);
  braidModel_t m = nullptr;
  braidModelConfig config = {};
  config.hosts = 16777216;  // x 4 GPUs
  EXPECT_EQ(braidModelCreate(&m, t, &config), braidInvalidUsage);
  EXPECT_NE(std::string(braid::lastError()).find("16777216 hosts x 4 ranks"), std::string::npos);
  config.hosts = -1;
  EXPECT_EQ(braidModelCreate(&m, t, &config), braidInvalidArgument);
  config.hosts = 2;
  config.calibration = "/nonexistent/calibration.json";
  EXPECT_NE(braidModelCreate(&m, t, &config), braidSuccess);
  EXPECT_NE(std::string(braid::lastError()).find("/nonexistent/calibration.json"),
            std::string::npos);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(braidModelCreate(&m, nullptr, nullptr), braidInvalidArgument);
  ASSERT_EQ(braidModelCreate(&m, t, nullptr), braidSuccess);  // one host
  braidModelInfo info;
  ASSERT_EQ(braidModelGetInfo(m, &info), braidSuccess);
  EXPECT_EQ(info.nranks, 4);
  int n = 0;
  EXPECT_EQ(braidModelPredict(m, "alltoallv", 8, braidFloat32, 0, nullptr, 0, &n, nullptr, nullptr,
                              nullptr, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braid::lastError()).find("\"alltoallv\""), std::string::npos);
  EXPECT_EQ(braidModelPredict(m, "allreduce", 0, braidFloat32, 0, nullptr, 0, &n, nullptr, nullptr,
                              nullptr, nullptr),
            braidInvalidArgument);
  // A call whose bytes overflow is refused, not played (it would never end).
  EXPECT_EQ(braidModelPredict(m, "allreduce", size_t{1} << 62, braidFloat32, 1, nullptr, 0, &n,
                              nullptr, nullptr, nullptr, nullptr),
            braidInvalidArgument);
  EXPECT_NE(std::string(braid::lastError()).find("2^48 bytes"), std::string::npos);
  EXPECT_EQ(braidModelPredict(m, "allreduce", 8, static_cast<braidDataType_t>(99), 0, nullptr, 0,
                              &n, nullptr, nullptr, nullptr, nullptr),
            braidInvalidArgument);
  EXPECT_EQ(braidModelPredict(m, "allreduce", 8, braidFloat32, 0, nullptr, 0, nullptr, nullptr,
                              nullptr, nullptr, nullptr),
            braidInvalidArgument);
  // Without room for estimates it still counts them.
  ASSERT_EQ(braidModelPredict(m, "allreduce", 8, braidFloat32, 0, nullptr, 0, &n, nullptr, nullptr,
                              nullptr, nullptr),
            braidSuccess);
  int listed = 0;
  ASSERT_EQ(braidListAlgorithms("allreduce", nullptr, 0, &listed), braidSuccess);
  EXPECT_EQ(n, listed + 2);  // and NCCL's device algorithms for all-reduce: nvls, nvlstree
  braidModelDestroy(m);
  braidTopologyDestroy(t);
}

TEST(ModelApi, ParsesSizesAsTheSettingsDo) {
  size_t b = 0;
  ASSERT_EQ(braidParseSize("256MiB", &b), braidSuccess);
  EXPECT_EQ(b, size_t{256} << 20);
  ASSERT_EQ(braidParseSize("8", &b), braidSuccess);
  EXPECT_EQ(b, 8u);
  EXPECT_EQ(braidParseSize("1.5K", &b), braidInvalidArgument);
  EXPECT_NE(std::string(braid::lastError()).find("\"1.5K\""), std::string::npos);
  EXPECT_EQ(braidParseSize(nullptr, &b), braidInvalidArgument);
}

}  // namespace
