// The model entry points (braid/braid_model.h): a topology read or detected (topology's
// loaders and printers), and a job built from it over hosts (tuning's fabricFromTopology) whose
// calls the selector costs (rankCandidates, choosePieceBytes) and the simulator plays, without
// ranks. braid-topo and braid-sim are thin programs over them.
#include <strings.h>

#include <algorithm>
#include <memory>
#include <new>
#include <string>

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
    if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) >= braidNumTypes)
      return fail(braidInvalidArgument, "braidModelPredict: dtype %d is not a braid data type",
                  static_cast<int>(dtype));
    int c = 0;
    for (; c < braid::kNumCollectives; ++c)
      if (!strcasecmp(braid::collectiveName(static_cast<Collective>(c)), collective)) break;
    const auto coll = static_cast<Collective>(c);
    if (c == braid::kNumCollectives || coll == Collective::kAllToAllv ||
        coll == Collective::kBarrier)
      return fail(braidInvalidArgument,
                  "braidModelPredict: unknown collective \"%s\" (allreduce, reducescatter, "
                  "allgather, broadcast, reduce, alltoall, gather, scatter)",
                  collective);
    if (count == 0) return fail(braidInvalidArgument, "braidModelPredict: count is 0");
    const braid::tuning::Fabric& fabric = model->fabric;
    const int n = fabric.nranks();
    const size_t elemSize = braidTypeSize(dtype);
    // The call's bytes (count x element x ranks at most) must fit in 2^48, as any buffer.
    if (count > (size_t{1} << 48) / elemSize / static_cast<size_t>(n))
      return fail(braidInvalidArgument,
                  "braidModelPredict: count %zu of %s on %d ranks is more than 2^48 bytes", count,
                  braidTypeName(dtype), n);
    braid::CollArgs args;
    args.coll = coll;
    args.count = count;
    args.dtype = dtype;
    args.nranks = n;
    int best = -1;
    const auto cands = braid::tuning::rankCandidates(args, elemSize, fabric, &best);
    if (chosen) *chosen = best;
    // The chosen algorithm's grain, as a communicator without BRAID_CHUNKSIZE picks it.
    if (pieceBytes)
      *pieceBytes = best >= 0
                        ? braid::tuning::choosePieceBytes(*cands[best].algo, args, elemSize, fabric)
                        : 0;
    if (callBytes) *callBytes = braid::tuning::callBytes(coll, count, elemSize, n);
    if (busBwFactor) *busBwFactor = braid::tuning::busBwFactor(coll, n);
    *nestimates = static_cast<int>(cands.size());
    for (int i = 0; i < std::min(max, *nestimates) && estimates; ++i) {
      const braid::tuning::Candidate& cand = cands[i];
      braidModelEstimate& e = estimates[i];
      e.algorithm = cand.algo->name;
      e.supported = !cand.unsupported;
      e.predictedUs = cand.predicted_us;
      e.simulatedUs = -1;
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
