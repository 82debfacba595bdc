// The model entry points (braid/braid_model.h): a topology read or detected (topology's
// loaders and printers), and a job built from it over hosts (tuning's fabricFromTopology) whose
// calls the selector costs (rankCandidates, choosePieceBytes) and the simulator plays, without
// ranks. braid-topo and braid-sim are thin programs over them.
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "algorithms/device_schedule.h"
#include "base/config.h"
#include "base/error.h"
#include "braid/braid_model.h"
#include "topology/placement.h"
#include "topology/topology.h"
#include "tuning/cost_model.h"
#include "tuning/simulate.h"
#include "tuning/topo_fabric.h"

struct braidTopology {
  braid::topo::System sys;
  std::string printed;  // braidTopologyPrint's last text
};

struct braidModel {
  braid::tuning::Fabric fabric;
  std::string fabricLine, notes;
};

using braid::Collective;
using braid::fail;

namespace {

// The call braidModelPredict and braidModelExplain are asked about, checked.
braidResult_t callOf(const char* fn, braidModel_t model, const char* collective, size_t count,
                     braidDataType_t dtype, braid::CollArgs* args, size_t* elemSize) {
  if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) >= braidNumTypes)
    return fail(braidInvalidArgument, "%s: dtype %d is not a braid data type", fn,
                static_cast<int>(dtype));
  int c = 0;
  for (; c < braid::kNumCollectives; ++c)
    if (!strcasecmp(braid::collectiveName(static_cast<Collective>(c)), collective)) break;
  const auto coll = static_cast<Collective>(c);
  if (c == braid::kNumCollectives || coll == Collective::kAllToAllv || coll == Collective::kBarrier)
    return fail(braidInvalidArgument,
                "%s: unknown collective \"%s\" (allreduce, reducescatter, allgather, broadcast, "
                "reduce, alltoall, gather, scatter)",
                fn, collective);
  if (count == 0) return fail(braidInvalidArgument, "%s: count is 0", fn);
  const int n = model->fabric.nranks();
  *elemSize = braidTypeSize(dtype);
  // The call's bytes (count x element x ranks at most) must fit in 2^48, as any buffer.
  if (count > (size_t{1} << 48) / *elemSize / static_cast<size_t>(n))
    return fail(braidInvalidArgument, "%s: count %zu of %s on %d ranks is more than 2^48 bytes", fn,
                count, braidTypeName(dtype), n);
  args->coll = coll;
  args->count = count;
  args->dtype = dtype;
  args->nranks = n;
  return braidSuccess;
}

// NCCL's device algorithms (NVLS, NVLSTree, PAT) for the call, priced from their schedules.
struct DeviceCandidate {
  const braid::DeviceAlgorithm* algo;
  const char* unsupported;
  double us;
  braid::TimeSplit split;
};
std::vector<DeviceCandidate> deviceCandidates(const braid::Fabric& f, const braid::CollArgs& a,
                                              size_t elemSize) {
  std::vector<DeviceCandidate> out;
  const double bytes =
      static_cast<double>(braid::tuning::callBytes(a.coll, a.count, elemSize, f.nranks()));
  for (const braid::DeviceAlgorithm& d : braid::deviceAlgorithms()) {
    if (d.coll != a.coll) continue;
    DeviceCandidate c{&d, d.supports(f), -1, {}};
    if (!c.unsupported) {
      braid::DeviceSchedule s;
      d.build(f, bytes, &s);
      c.split = braid::deviceScheduleTime(s);
      c.us = c.split.total_us;
    }
    out.push_back(c);
  }
  return out;
}
double bestUs(const std::vector<braid::tuning::Candidate>& cands,
              const std::vector<DeviceCandidate>& device, int best) {
  return best < static_cast<int>(cands.size()) ? cands[best].predicted_us
                                               : device[best - cands.size()].us;
}

// Where a table algorithm's time goes: each resource's busy time on the busiest rank, tallied
// from the schedules (every rank's up to 64 ranks, else the first, middle and last).
braid::TimeSplit scheduleSplit(const braid::AlgorithmInfo& algo, braid::CollArgs args,
                               size_t elemSize, const braid::Fabric& f, double totalUs) {
  const int n = f.nranks();
  args.hostOf = f.nhosts() > 1 ? f.hostOf.data() : nullptr;
  args.ring = f.ring.empty() ? nullptr : f.ring.data();
  args.pieceElems = std::max<size_t>(1, f.chunk_bytes / elemSize);
  const double nvl = f.intra.bw_gbs * 1e3, red = f.reduce_gbs * 1e3, cp = f.copy_gbs * 1e3;
  const double net =
      f.inter.bw_gbs * 1e3 *
      std::min(1.0, static_cast<double>(f.nicsPerHost) / std::max(1, f.ranksPerHost()));
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r)
    if (n <= 64 || r == 0 || r == n / 2 || r == n - 1) ranks.push_back(r);
  braid::TimeSplit t;
  braid::Schedule sched;
  for (int r : ranks) {
    args.rank = r;
    sched.steps.clear();
    algo.build(args, &sched);
    double nvTx = 0, nvRx = 0, netTx = 0, netRx = 0, local = 0;
    for (const braid::Step& s : sched.steps) {
      const double b = static_cast<double>(s.count) * elemSize;
      const bool cross = s.peer >= 0 && f.hostOf[s.peer] != f.hostOf[r];
      switch (s.kind) {
        case braid::StepKind::kSend:
          (cross ? netTx : nvTx) += b / (cross ? net : nvl);
          break;
        case braid::StepKind::kRecvReduce:
          local += b / red;
          [[fallthrough]];
        case braid::StepKind::kRecv:
          (cross ? netRx : nvRx) += b / (cross ? net : nvl);
          break;
        case braid::StepKind::kCopy:
          local += b / cp;
          break;
      }
    }
    t.nvlink_us = std::max({t.nvlink_us, nvTx, nvRx});
    t.network_us = std::max({t.network_us, netTx, netRx});
    t.reduce_us = std::max(t.reduce_us, local);
  }
  t.total_us = totalUs;
  t.latency_us = std::max(0.0, totalUs - std::max({t.nvlink_us, t.network_us, t.reduce_us}));
  return t;
}

}  // namespace

extern "C" {

braidResult_t braidTopologyLoad(braidTopology_t* topo, const char* file, const char* fsroot) {
  return braid::guardApi("braidTopologyLoad", [&]() -> braidResult_t {
    if (!topo) return fail(braidInvalidArgument, "braidTopologyLoad: topo is NULL");
    *topo = nullptr;
    const std::string path = file ? file : "", root = fsroot ? fsroot : "";
    if (!path.empty() && !root.empty())
      return fail(braidInvalidArgument,
                  "braidTopologyLoad: file and fsroot exclude each other (%s, %s)", file, fsroot);
    auto t = std::make_unique<braidTopology>();
    BRAID_TRY(!path.empty()   ? braid::topo::loadTopologyFile(path, &t->sys)
              : !root.empty() ? braid::topo::detectSystemAt(root, &t->sys)
                              : braid::topo::detectSystem(&t->sys));
    *topo = t.release();
    return braidSuccess;
  });
}

braidResult_t braidTopologyPrint(braidTopology_t topo, braidTopologyFormat_t format,
                                 const char** text) {
  return braid::guardApi("braidTopologyPrint", [&]() -> braidResult_t {
    if (!topo || !text)
      return fail(braidInvalidArgument, "braidTopologyPrint: topo or text is NULL");
    switch (format) {
      case braidTopologyText:
        topo->printed = braid::topo::toText(topo->sys);
        break;
      case braidTopologyJson:
        topo->printed = braid::topo::toJson(topo->sys);
        break;
      case braidTopologyNcclXml: {
        std::string xml;
        BRAID_TRY(braid::topo::dumpNcclTopoXml(topo->sys, &xml));
        topo->printed = std::move(xml);
        break;
      }
      default:
        return fail(braidInvalidArgument,
                    "braidTopologyPrint: format %d is not a braidTopologyFormat_t (0 text, 1 "
                    "JSON, 2 NCCL XML)",
                    static_cast<int>(format));
    }
    *text = topo->printed.c_str();
    return braidSuccess;
  });
}

braidResult_t braidTopologyDestroy(braidTopology_t topo) {
  delete topo;
  return braidSuccess;
}

braidResult_t braidModelCreate(braidModel_t* model, braidTopology_t topo,
                               const braidModelConfig* config) {
  return braid::guardApi("braidModelCreate", [&]() -> braidResult_t {
    if (!model || !topo)
      return fail(braidInvalidArgument, "braidModelCreate: model or topo is NULL");
    *model = nullptr;
    const braidModelConfig c = config ? *config : braidModelConfig{};
    if (c.hosts < 0 || c.ranksPerHost < 0 || c.nvswitchLinks < 0 || !(c.nicGbps >= 0))
      return fail(braidInvalidArgument,
                  "braidModelCreate: hosts %d, ranksPerHost %d, nvswitchLinks %d and nicGbps %g "
                  "must not be negative",
                  c.hosts, c.ranksPerHost, c.nvswitchLinks, c.nicGbps);
    const braid::topo::System& sys = topo->sys;
    const int hosts = std::max(1, c.hosts);
    // Ranks per host as fabricFromTopology takes them: one per GPU (per core) by default.
    const int perHost = c.ranksPerHost > 0  ? c.ranksPerHost
                        : !sys.gpus.empty() ? static_cast<int>(sys.gpus.size())
                                            : std::max(1, sys.cores);
    if (static_cast<long long>(hosts) * perHost > (1 << 24))
      return fail(braidInvalidUsage, "%d hosts x %d ranks is more than 16,777,216 ranks", hosts,
                  perHost);
    auto m = std::make_unique<braidModel>();
    braid::tuning::TopoFabricOptions opts;
    opts.ranksPerHost = c.ranksPerHost;
    if (c.nicGbps > 0) opts.unknownNicGbps = c.nicGbps;
    opts.nvswitchLinks = c.nvswitchLinks;
    opts.mnnvl = c.mnnvl != 0;
    if (c.nvlsChannels < 0 || c.nvlsChannels > 64 || c.mnnvlDomainHosts < 0)
      return fail(braidInvalidArgument,
                  "braidModelCreate: nvlsChannels %d (0..64) or mnnvlDomainHosts %d (>= 0) out "
                  "of range",
                  c.nvlsChannels, c.mnnvlDomainHosts);
    if (c.mnnvlDomainHosts > 0 && !c.mnnvl)
      return fail(braidInvalidArgument,
                  "braidModelCreate: mnnvlDomainHosts %d without mnnvl (NVLink domains span "
                  "hosts only with multi-node NVLink)",
                  c.mnnvlDomainHosts);
    opts.domainHosts = c.mnnvlDomainHosts;
    opts.nvls = c.nvlsDisable == 0;
    opts.nvlsChannels = c.nvlsChannels;
    BRAID_TRY(braid::tuning::fabricFromTopology(sys, hosts, opts, &m->fabric, &m->notes));
    if (c.calibration && *c.calibration) {
      BRAID_TRY(braid::tuning::loadCalibration(c.calibration, &m->fabric));
      m->notes += std::string("link figures from --calibration ") + c.calibration +
                  " (braid-tune --calibrate)\n";
    }
    braid::tuning::Fabric& f = m->fabric;
    f.ring = braid::topo::commRing(f.hostOf, {});
    bool identity = true;
    for (int i = 0; i < f.nranks(); ++i) identity = identity && f.ring[i] == i;
    if (identity) f.ring.clear();
    m->fabricLine = f.describe();
    *model = m.release();
    return braidSuccess;
  });
}

braidResult_t braidModelGetInfo(braidModel_t model, braidModelInfo* info) {
  if (!model || !info)
    return fail(braidInvalidArgument, "braidModelGetInfo: model or info is NULL");
  info->nranks = model->fabric.nranks();
  info->simulates = info->nranks <= braid::tuning::kSimulateRanks;
  info->fabric = model->fabricLine.c_str();
  info->notes = model->notes.c_str();
  return braidSuccess;
}

braidResult_t braidModelPredict(braidModel_t model, const char* collective, size_t count,
                                braidDataType_t dtype, int simulate, braidModelEstimate* estimates,
                                int max, int* nestimates, int* chosen, size_t* pieceBytes,
                                size_t* callBytes, double* busBwFactor) {
  return braid::guardApi("braidModelPredict", [&]() -> braidResult_t {
    if (!model || !collective || !nestimates)
      return fail(braidInvalidArgument,
                  "braidModelPredict: model, collective or nestimates is NULL");
    braid::CollArgs args;
    size_t elemSize = 0;
    BRAID_TRY(callOf("braidModelPredict", model, collective, count, dtype, &args, &elemSize));
    const braid::tuning::Fabric& fabric = model->fabric;
    const int n = fabric.nranks();
    int best = -1;
    const auto cands = braid::tuning::rankCandidates(args, elemSize, fabric, &best);
    const auto device = deviceCandidates(fabric, args, elemSize);
    // The device algorithms are NCCL's: the job's pick is the least of every candidate, and
    // the grain (pieceBytes) is that pick's: PAT's chunk, NVLS's and NVLSTree's chunk times
    // their channels, or what choosePieceBytes picks for a table algorithm.
    for (size_t i = 0; i < device.size(); ++i)
      if (!device[i].unsupported &&
          (best < 0 || device[i].us * (1 + braid::tuning::kTie) < bestUs(cands, device, best)))
        best = static_cast<int>(cands.size() + i);
    if (chosen) *chosen = best;
    // The chosen algorithm's grain, as a communicator without BRAID_CHUNKSIZE picks it.
    if (pieceBytes)
      *pieceBytes =
          best < 0 ? 0
          : best >= static_cast<int>(cands.size())
              ? (std::strcmp(device[best - cands.size()].algo->name, "pat") == 0
                     ? fabric.chunk_bytes
                     : fabric.nvls_chunk_bytes * static_cast<size_t>(fabric.nvls_channels))
              : braid::tuning::choosePieceBytes(*cands[best].algo, args, elemSize, fabric);
    if (callBytes) *callBytes = braid::tuning::callBytes(args.coll, count, elemSize, n);
    if (busBwFactor) *busBwFactor = braid::tuning::busBwFactor(args.coll, n);
    *nestimates = static_cast<int>(cands.size() + device.size());
    for (int i = 0; i < std::min(max, *nestimates) && estimates; ++i) {
      braidModelEstimate& e = estimates[i];
      e.simulatedUs = -1;
      if (i >= static_cast<int>(cands.size())) {
        const DeviceCandidate& d = device[i - cands.size()];
        e.algorithm = d.algo->name;
        e.supported = !d.unsupported;
        e.predictedUs = d.unsupported ? -1 : d.us;
        e.deviceOnly = 1;
        continue;
      }
      const braid::tuning::Candidate& cand = cands[i];
      e.algorithm = cand.algo->name;
      e.supported = !cand.unsupported;
      e.predictedUs = cand.predicted_us;
      e.deviceOnly = 0;
      if (!simulate || cand.unsupported) continue;
      try {
        auto r = braid::tuning::simulateSchedules(*cand.algo, args, elemSize, fabric);
        if (r.ok) e.simulatedUs = r.time_us;
      } catch (const std::bad_alloc&) {
        // too many steps to hold: not played
      }
    }
    return braidSuccess;
  });
}

braidResult_t braidModelExplain(braidModel_t model, const char* collective, size_t count,
                                braidDataType_t dtype, const char* algorithm,
                                braidModelTimeSplit* split) {
  return braid::guardApi("braidModelExplain", [&]() -> braidResult_t {
    if (!model || !collective || !algorithm || !split)
      return fail(braidInvalidArgument,
                  "braidModelExplain: model, collective, algorithm or split is NULL");
    braid::CollArgs args;
    size_t elemSize = 0;
    BRAID_TRY(callOf("braidModelExplain", model, collective, count, dtype, &args, &elemSize));
    const braid::tuning::Fabric& fabric = model->fabric;
    braid::TimeSplit t;
    bool found = false;
    for (const DeviceCandidate& d : deviceCandidates(fabric, args, elemSize)) {
      if (strcasecmp(d.algo->name, algorithm) != 0) continue;
      if (d.unsupported)
        return fail(braidInvalidArgument, "braidModelExplain: %s cannot run %s here: %s", algorithm,
                    collective, d.unsupported);
      t = d.split;
      found = true;
    }
    if (!found) {
      int best = -1;
      for (const auto& c : braid::tuning::rankCandidates(args, elemSize, fabric, &best)) {
        if (strcasecmp(c.algo->name, algorithm) != 0) continue;
        if (c.unsupported)
          return fail(braidInvalidArgument, "braidModelExplain: %s cannot run %s here: %s",
                      algorithm, collective, c.unsupported);
        t = scheduleSplit(*c.algo, args, elemSize, fabric, c.predicted_us);
        found = true;
      }
    }
    if (!found)
      return fail(braidInvalidArgument, "braidModelExplain: %s has no algorithm \"%s\"", collective,
                  algorithm);
    *split = {t.nvlink_us, t.network_us, t.reduce_us, t.latency_us, t.total_us};
    return braidSuccess;
  });
}

braidResult_t braidModelDestroy(braidModel_t model) {
  delete model;
  return braidSuccess;
}

braidResult_t braidParseSize(const char* text, size_t* bytes) {
  if (!text || !bytes) return fail(braidInvalidArgument, "braidParseSize: text or bytes is NULL");
  if (!braid::parseByteSize(text, bytes))
    return fail(braidInvalidArgument,
                "braidParseSize: \"%s\" is not a size (digits, then B, K, M, G or T: 1024-based)",
                text);
  return braidSuccess;
}

}  // extern "C"
