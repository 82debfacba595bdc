#include "algorithms/schedule.h"

#include <strings.h>

namespace braid {

namespace {

// Each collective's two spellings, in enum order: the name BRAID_ALGO and the tools take,
// and the label messages print.
struct CollectiveNames {
  const char* name;
  const char* label;
};
constexpr CollectiveNames kCollectiveNames[kNumCollectives] = {
    {"allreduce", "all-reduce"},   {"reducescatter", "reduce-scatter"},
    {"allgather", "all-gather"},   {"broadcast", "broadcast"},
    {"reduce", "reduce"},          {"alltoall", "all-to-all"},
    {"alltoallv", "all-to-all-v"}, {"gather", "gather"},
    {"scatter", "scatter"},        {"barrier", "barrier"},
};
static_assert(static_cast<int>(Collective::kBarrier) == kNumCollectives - 1);

}  // namespace

const char* collectiveName(Collective c) {
  const auto i = static_cast<size_t>(c);
  return i < kNumCollectives ? kCollectiveNames[i].name : "unknown";
}

const char* collectiveLabel(Collective c) {
  const auto i = static_cast<size_t>(c);
  return i < kNumCollectives ? kCollectiveNames[i].label : "collective";
}

// The table of algorithms. Each algorithm's file defines its rows (builders, where they
// apply, closed-form cost) and one function appending them: adding an algorithm is its file,
// one line here (and one in meson.build), and its tests. The order is the order of preference
// among equally fast candidates (tuning/cost_model.cc's rankCandidates).
void appendRingAlgorithms(std::vector<AlgorithmInfo>* table);
void appendTreeAlgorithms(std::vector<AlgorithmInfo>* table);
void appendRecursiveDoublingAlgorithms(std::vector<AlgorithmInfo>* table);
void appendRhdAlgorithms(std::vector<AlgorithmInfo>* table);
void appendBinomialAlgorithms(std::vector<AlgorithmInfo>* table);
void appendDisseminationAlgorithms(std::vector<AlgorithmInfo>* table);
void appendBruckAlgorithms(std::vector<AlgorithmInfo>* table);
void appendPairwiseAlgorithms(std::vector<AlgorithmInfo>* table);
void appendScatterAllGatherAlgorithms(std::vector<AlgorithmInfo>* table);
void appendDirectAlgorithms(std::vector<AlgorithmInfo>* table);
void appendHierarchicalAlgorithms(std::vector<AlgorithmInfo>* table);
void appendLinearAlgorithms(std::vector<AlgorithmInfo>* table);

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> table = [] {
    std::vector<AlgorithmInfo> t;
    appendRingAlgorithms(&t);
    appendTreeAlgorithms(&t);
    appendRecursiveDoublingAlgorithms(&t);
    appendRhdAlgorithms(&t);
    appendBinomialAlgorithms(&t);
    appendDisseminationAlgorithms(&t);
    appendBruckAlgorithms(&t);
    appendPairwiseAlgorithms(&t);
    appendScatterAllGatherAlgorithms(&t);
    appendDirectAlgorithms(&t);
    appendHierarchicalAlgorithms(&t);
    appendLinearAlgorithms(&t);
    return t;
  }();
  return table;
}

// Whether the ranks span more than one host, with the same number (more than one) on each:
// the layouts the hierarchical algorithms are for.
namespace {
bool evenMultiHost(const CollArgs& args) {
  if (!args.hostOf || args.nranks < 4) return false;
  std::vector<int> size;
  for (int r = 0; r < args.nranks; ++r) {
    const int g = args.hostOf[r];
    if (g < 0 || g >= args.nranks) return false;
    if (g >= static_cast<int>(size.size())) size.resize(g + 1, 0);
    ++size[g];
  }
  if (size.size() < 2 || size[0] < 2) return false;
  for (int s : size)
    if (s != size[0]) return false;
  return true;
}
}  // namespace

// The fixed rule until the cost-model selector lands. Thresholds follow MPICH's defaults
// (Thakur, Rabenseifner & Gropp 2005; MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE = 2048,
// ALLGATHER_SHORT/LONG = 80 KiB / 512 KiB, BCAST_SHORT = 12 KiB, ALLTOALL_SHORT = 256 B
// per block with at least 8 ranks) and NCCL's use of rings for large messages. `bytes` is
// the size of the vector each rank contributes or receives in full.
//
// Across hosts: when the ranks span several hosts with the same number of ranks (more than
// one) on each, and the vector being reduced or distributed is at least 256 KiB (all-reduce,
// broadcast, reduce: count elements; reduce-scatter, all-gather: nranks * count), the
// two-level "hierarchical" algorithms come first, as NCCL and Horovod do across nodes: per
// host the network carries no more than under a flat ring over host-contiguous ranks (and
// far less than a flat ring over interleaved ones, which crosses it at every hop), in
// 2(H-1) network steps for H hosts instead of 2(n-1), with every local rank driving its own
// share (one NIC per GPU), while the fast intra-host links do the rest. Below 256 KiB the
// one-level rules stay: latency rules, and their few steps beat two phases. All-to-all
// keeps pairwise: its hierarchical form saves network messages but adds an intra-host hop
// for every block, which only the cost-model selector can weigh.
const AlgorithmInfo* defaultAlgorithm(const CollArgs& args, size_t elemSize) {
  const size_t n = static_cast<size_t>(args.nranks);
  const size_t bytes = args.count * elemSize;
  if (evenMultiHost(args)) {
    size_t total = 0;
    switch (args.coll) {
      case Collective::kAllReduce:
      case Collective::kBroadcast:
      case Collective::kReduce:
        total = bytes;
        break;
      case Collective::kReduceScatter:
      case Collective::kAllGather:
        total = bytes * n;
        break;
      default:
        break;
    }
    if (total >= (256u << 10)) {
      const AlgorithmInfo* a = findAlgorithm(args.coll, "hierarchical");
      if (a && !unsupportedReason(*a, args)) return a;
    }
  }
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

namespace braid {

void buildOnRing(BuildFn build, const CollArgs& args, Schedule* out) {
  if (!args.ring) {
    build(args, out);
    return;
  }
  const RingPlace place(args);
  CollArgs onRing = args;
  onRing.rank = place.pos;
  onRing.root = place.positionOf(args.root);
  onRing.ring = nullptr;
  onRing.hostOf = nullptr;
  build(onRing, out);
  for (Step& s : out->steps)
    if (s.peer >= 0) s.peer = place.rankAt(s.peer);
}

}  // namespace braid
