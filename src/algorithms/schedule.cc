#include "algorithms/schedule.h"

#include <strings.h>

namespace braid {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kAllToAllv:
      return "alltoallv";
    case Collective::kGather:
      return "gather";
    case Collective::kScatter:
      return "scatter";
    case Collective::kBarrier:
      return "barrier";
  }
  return "unknown";
}

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> table = [] {
    std::vector<AlgorithmInfo> t;
    appendRingAlgorithms(&t);
    appendTreeAlgorithms(&t);
    appendRecursiveDoublingAlgorithms(&t);
    appendRhdAlgorithms(&t);
    appendBinomialAlgorithms(&t);
    appendBruckAlgorithms(&t);
    appendPairwiseAlgorithms(&t);
    appendScatterAllGatherAlgorithms(&t);
    appendDirectAlgorithms(&t);
    return t;
  }();
  return table;
}

// The fixed rule until the cost-model selector lands. Thresholds follow MPICH's defaults
// (Thakur, Rabenseifner & Gropp 2005; MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE = 2048,
// ALLGATHER_SHORT/LONG = 80 KiB / 512 KiB, BCAST_SHORT = 12 KiB, ALLTOALL_SHORT = 256 B
// per block with at least 8 ranks) and NCCL's use of rings for large messages. `bytes` is
// the size of the vector each rank contributes or receives in full.
const AlgorithmInfo* defaultAlgorithm(const CollArgs& args, size_t elemSize) {
  const size_t n = static_cast<size_t>(args.nranks);
  const size_t bytes = args.count * elemSize;
  std::vector<const char*> prefs;
  switch (args.coll) {
    case Collective::kAllReduce:
      if (bytes <= 2048)
        prefs = {"recursive_doubling", "rhd", "ring"};
      else if (bytes <= (256u << 10))
        prefs = {"rhd", "ring"};
      else
        prefs = {"ring", "rhd"};
      break;
    case Collective::kReduceScatter:
      prefs = bytes * n <= (512u << 10) ? std::vector<const char*>{"rhd", "ring"}
                                        : std::vector<const char*>{"ring", "rhd"};
      break;
    case Collective::kAllGather:
      if (bytes * n < (80u << 10))
        prefs = {(n & (n - 1)) == 0 ? "recursive_doubling" : "bruck", "bruck", "ring"};
      else
        prefs = {"ring", "bruck"};
      break;
    case Collective::kBroadcast:
      if (bytes < (12u << 10) || n < 8)
        prefs = {"binomial", "ring"};
      else if (bytes < (512u << 10))
        prefs = {"scatter_allgather", "ring"};
      else
        prefs = {"ring", "scatter_allgather"};
      break;
    case Collective::kReduce:
      prefs = bytes <= (64u << 10) ? std::vector<const char*>{"binomial", "tree"}
                                   : std::vector<const char*>{"tree", "binomial"};
      break;
    case Collective::kAllToAll:
      prefs = bytes <= 256 && n >= 8 ? std::vector<const char*>{"bruck", "pairwise"}
                                     : std::vector<const char*>{"pairwise", "bruck"};
      break;
    case Collective::kAllToAllv:
      prefs = {"pairwise"};
      break;
    case Collective::kGather:
    case Collective::kScatter:
      prefs = {"direct"};
      break;
    case Collective::kBarrier:
      prefs = {"dissemination"};
      break;
  }
  for (const char* name : prefs) {
    const AlgorithmInfo* a = findAlgorithm(args.coll, name);
    if (a && !unsupportedReason(*a, args)) return a;
  }
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == args.coll && !unsupportedReason(a, args)) return &a;
  return nullptr;
}

const AlgorithmInfo* findAlgorithm(Collective coll, const std::string& name) {
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == coll && !strcasecmp(a.name, name.c_str())) return &a;
  return nullptr;
}

}  // namespace braid
