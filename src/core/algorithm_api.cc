// The algorithm entry points: braidListAlgorithms (a collective's algorithms, from the table of
// src/algorithms/schedule.cc), braidCommSetAlgorithm (the algorithm a communicator's calls of a
// collective must use, ahead of BRAID_ALGO and the selector: calls.cc's chooseAlgorithm) and
// braidCommPredict (the cost model's time for a call, by a given algorithm or the one it picks).
#include <strings.h>

#include <mutex>
#include <string>

#include "base/error.h"
#include "braid/braid.h"
#include "core/comm.h"
#include "core/entry_points.h"
#include "tuning/cost_model.h"

using braid::checkComm;
using braid::Collective;
using braid::fail;
using braid::record;

extern "C" {

braidResult_t braidListAlgorithms(const char* collective, const char** names, int max, int* count) {
  return braid::guardApi("braidListAlgorithms", [&]() -> braidResult_t {
    if (!collective || !count)
      return fail(braidInvalidArgument, "braidListAlgorithms: collective or count is NULL");
    int c = 0;
    for (; c < braid::kNumCollectives; ++c)
      if (!strcasecmp(braid::collectiveName(static_cast<Collective>(c)), collective)) break;
    if (c == braid::kNumCollectives)
      return fail(braidInvalidArgument,
                  "braidListAlgorithms: unknown collective \"%s\" (allreduce, reducescatter, "
                  "allgather, broadcast, reduce, alltoall, alltoallv, gather, scatter, barrier)",
                  collective);
    int k = 0;
    for (const braid::AlgorithmInfo& a : braid::algorithms()) {
      if (static_cast<int>(a.coll) != c) continue;
      if (names && k < max) names[k] = a.name;
      ++k;
    }
    *count = k;
    return braidSuccess;
  });
}

braidResult_t braidCommSetAlgorithm(braidComm_t comm, const char* collective,
                                    const char* algorithm) {
  return braid::guardApi("braidCommSetAlgorithm", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommSetAlgorithm"));
    if (!collective)
      return record(comm, fail(braidInvalidArgument, "braidCommSetAlgorithm: collective is NULL"));
    int c = 0;
    for (; c < braid::kNumCollectives; ++c)
      if (!strcasecmp(braid::collectiveName(static_cast<Collective>(c)), collective)) break;
    if (c == braid::kNumCollectives)
      return record(comm, fail(braidInvalidArgument,
                               "braidCommSetAlgorithm: unknown collective \"%s\"", collective));
    std::string name = algorithm ? algorithm : "";
    if (!name.empty() && !braid::findAlgorithm(static_cast<Collective>(c), name))
      return record(
          comm, fail(braidInvalidArgument, "braidCommSetAlgorithm: no %s algorithm named \"%s\"",
                     collective, name.c_str()));
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->forcedAlgo[c] = name;
    comm->clearPlans();  // cached plans carry the algorithm chosen before
    return braidSuccess;
  });
}

braidResult_t braidCommPredict(braidComm_t comm, const char* collective, size_t count,
                               braidDataType_t dtype, const char* algorithm, double* predictedUs,
                               const char** chosen) {
  return braid::guardApi("braidCommPredict", [&]() -> braidResult_t {
    BRAID_TRY(checkComm(comm, "braidCommPredict"));
    if (!collective)
      return record(comm, fail(braidInvalidArgument, "braidCommPredict: collective is NULL"));
    if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) >= braidNumTypes)
      return record(comm, fail(braidInvalidArgument,
                               "braidCommPredict: dtype %d is not a braid "
                               "data type",
                               static_cast<int>(dtype)));
    int c = 0;
    for (; c < braid::kNumCollectives; ++c)
      if (!strcasecmp(braid::collectiveName(static_cast<Collective>(c)), collective)) break;
    if (c == braid::kNumCollectives)
      return record(comm, fail(braidInvalidArgument, "braidCommPredict: unknown collective \"%s\"",
                               collective));
    braid::CollArgs args;
    args.coll = static_cast<Collective>(c);
    args.count = count;
    args.dtype = dtype;
    args.rank = comm->rank;
    args.nranks = comm->nranks;
    const size_t elemSize = braidTypeSize(dtype);
    int best = -1;
    const auto cands = braid::tuning::rankCandidates(args, elemSize, comm->fabric, &best);
    if (chosen) *chosen = best >= 0 ? cands[best].algo->name : nullptr;
    const braid::tuning::Candidate* pick = best >= 0 ? &cands[best] : nullptr;
    if (algorithm && *algorithm) {
      pick = nullptr;
      for (const auto& cand : cands)
        if (!strcasecmp(cand.algo->name, algorithm)) pick = &cand;
      if (!pick)
        return record(comm, fail(braidInvalidArgument,
                                 "braidCommPredict: no %s algorithm named "
                                 "\"%s\"",
                                 collective, algorithm));
      if (pick->unsupported)
        return record(comm, fail(braidInvalidUsage, "braidCommPredict: %s cannot run this %s: %s",
                                 algorithm, collective, pick->unsupported));
    }
    if (!pick)
      return record(comm, fail(braidInvalidUsage, "braidCommPredict: no algorithm can run this %s",
                               collective));
    if (predictedUs) *predictedUs = pick->predicted_us;
    return braidSuccess;
  });
}

}  // extern "C"
