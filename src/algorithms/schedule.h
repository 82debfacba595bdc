// Schedules: what one rank does for one collective, as ordered steps over chunks of its
// buffers (DESIGN.md, "algorithms are schedules"). Algorithms build schedules and never
// touch transports; the executor runs them, and later the verifier and simulator read them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid {

// Buffer conventions, in elements of the call's datatype, n = nranks (NCCL's where NCCL has
// the collective). "count" is CollArgs::count.
//   kAllReduce      send[count]    -> recv[count]
//   kReduceScatter  send[n*count]  -> recv[count]      (in place: recv = send + rank*count)
//   kAllGather      send[count]    -> recv[n*count]    (in place: send = recv + rank*count)
//   kBroadcast      root's send[count] -> recv[count] on every rank (send unused off root)
//   kReduce         send[count]    -> root's recv[count] (recv may be null off root)
//   kAllToAll       send[n*count]  -> recv[n*count]: block j of rank i's send lands in
//                   block i of rank j's recv
//   kAllToAllv      send[sendDispls[j] ..+sendCounts[j]] -> rank j's
//                   recv[recvDispls[i] ..+recvCounts[i]]
//   kGather         send[count]    -> root's recv[n*count] (recv unused off root; the
//                   root's send may be its own slot, recv + root*count)
//   kScatter        root's send[n*count] -> recv[count] (send unused off root; the root's
//                   recv may be its own slot, send + root*count)
// No other aliasing: overlapping buffers that are none of these are refused
// (sharesMemoryAllowed, checked by every collective's entry point).
//   kBarrier        no data: no rank leaves before every rank has entered
enum class Collective : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kAllToAllv,
  kGather,
  kScatter,
  kBarrier,
};
constexpr int kNumCollectives = 10;
const char* collectiveName(Collective c);
// "all-reduce", "reduce-scatter", ...: the collective as messages name it.
const char* collectiveLabel(Collective c);

// Whether c combines the ranks' data with a reduction op: all-reduce, reduce-scatter, reduce.
inline bool isReducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}
// Whether c has a root rank (CollArgs::root): broadcast, reduce, gather, scatter.
inline bool isRooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}
// Whether c has an in-place form (the aliasing above); the others' buffers may not overlap,
// but gather's and scatter's root may hold its own block at its slot (sharesMemoryAllowed).
inline bool hasInPlace(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter ||
         c == Collective::kAllGather || c == Collective::kBroadcast || c == Collective::kReduce;
}

// Whether send and recv, a call's buffers on `rank`, are c's in-place form (the aliasing in
// the table above): the same buffer for all-reduce, broadcast and reduce; the rank's block
// for reduce-scatter (recv = send + rank*count) and all-gather (send = recv + rank*count).
inline bool isInPlaceForm(Collective c, int rank, size_t count, size_t elemSize, const void* send,
                          const void* recv) {
  if (!send || !recv || !hasInPlace(c)) return false;
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  const uintptr_t block = static_cast<uintptr_t>(rank) * count * elemSize;
  switch (c) {
    case Collective::kReduceScatter:
      return r == s + block;
    case Collective::kAllGather:
      return s == r + block;
    default:
      return s == r;
  }
}

// Whether send and recv, a call's buffers on `rank`, may share memory: c's in-place form, or
// gather's (scatter's) root with its own block at its slot, whose copy is then no copy.
inline bool sharesMemoryAllowed(Collective c, int rank, size_t count, size_t elemSize,
                                const void* send, const void* recv) {
  if (isInPlaceForm(c, rank, count, elemSize, send, recv)) return true;
  const auto s = reinterpret_cast<uintptr_t>(send);
  const auto r = reinterpret_cast<uintptr_t>(recv);
  const uintptr_t block = static_cast<uintptr_t>(rank) * count * elemSize;
  return (c == Collective::kGather && s == r + block) ||
         (c == Collective::kScatter && r == s + block);
}

// The call's buffers. Grouped point-to-point operations add one buffer per operation,
// numbered from kFirstUser.
enum class BufferId : uint16_t { kSend = 0, kRecv = 1, kScratch = 2, kFirstUser = 3 };

// A position in one of the call's buffers, in elements.
struct BufRef {
  BufferId buf;
  size_t offset;
};
inline BufferId userBuffer(int k) { return static_cast<BufferId>(3 + k); }

enum class StepKind : uint8_t {
  kSend,        // send `count` elements at src to `peer`
  kRecv,        // receive `count` elements from `peer` into dst
  kRecvReduce,  // dst = op(src, received from `peer`), then divided by `divisor` if > 1
  kCopy,        // dst = src (divided by `divisor` if > 1), local
};
// "send", "recv", "recv-reduce" or "copy", for messages; "?" for a value outside the enum.
inline const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::kSend:
      return "send";
    case StepKind::kRecv:
      return "recv";
    case StepKind::kRecvReduce:
      return "recv-reduce";
    case StepKind::kCopy:
      return "copy";
  }
  return "?";
}

struct Step {
  StepKind kind;
  int peer = -1;
  BufRef src{BufferId::kSend, 0};
  BufRef dst{BufferId::kRecv, 0};
  size_t count = 0;
  int divisor = 1;
  // Steps (indices into Schedule::steps) that must finish before this one starts; -1 none.
  // Steps of one queue (same peer and direction, or the local steps) already run in the
  // order they were added, so deps are needed only across queues.
  static constexpr int kMaxDeps = 4;
  int32_t deps[kMaxDeps] = {-1, -1, -1, -1};
};

// Steps to one peer run in the order they appear (each direction of a connection is a
// FIFO), so two ranks' schedules must list their messages to each other in the same order.
struct Schedule {
  std::vector<Step> steps;
  size_t scratchElems = 0;

  int add(const Step& s) {
    steps.push_back(s);
    return static_cast<int>(steps.size()) - 1;
  }
};

// Helpers every builder uses.
inline Step makeStep(StepKind kind, int peer, BufRef src, BufRef dst, size_t count) {
  Step s;
  s.kind = kind;
  s.peer = peer;
  s.src = src;
  s.dst = dst;
  s.count = count;
  return s;
}

// Adds dependency d (ignored if < 0 or already there). More than Step::kMaxDeps is a bug
// in the builder, which must chain through a step of the same queue instead: stop loudly
// rather than drop an ordering and race.
inline void addDep(Step* s, int32_t d) {
  if (d < 0) return;
  for (int32_t& x : s->deps) {
    if (x == d) return;
    if (x < 0) {
      x = d;
      return;
    }
  }
  std::fprintf(stderr, "braid internal error: a schedule step needs more than %d dependencies\n",
               Step::kMaxDeps);
  std::abort();
}

// Step constructors with any number (up to Step::kMaxDeps) of dependencies; -1 means none.
template <typename... Deps>
Step sendStep(int peer, BufRef src, size_t count, Deps... deps) {
  Step s = makeStep(StepKind::kSend, peer, src, BufRef{BufferId::kRecv, 0}, count);
  (addDep(&s, static_cast<int32_t>(deps)), ...);
  return s;
}
template <typename... Deps>
Step recvStep(int peer, BufRef dst, size_t count, Deps... deps) {
  Step s = makeStep(StepKind::kRecv, peer, BufRef{BufferId::kSend, 0}, dst, count);
  (addDep(&s, static_cast<int32_t>(deps)), ...);
  return s;
}
template <typename... Deps>
Step copyStep(BufRef src, BufRef dst, size_t count, Deps... deps) {
  Step s = makeStep(StepKind::kCopy, -1, src, dst, count);
  (addDep(&s, static_cast<int32_t>(deps)), ...);
  return s;
}

// Pieces per block of `elems`, so that none is larger than pieceElems (at least one).
inline size_t piecesFor(size_t elems, size_t pieceElems) {
  const size_t grain = std::max<size_t>(1, pieceElems);
  return std::max<size_t>(1, elems / grain + (elems % grain != 0));
}

// Everything an algorithm may look at to build one rank's schedule.
struct CollArgs {
  Collective coll = Collective::kAllReduce;
  size_t count = 0;  // elements per rank (all-reduce: of the whole vector)
  braidDataType_t dtype = braidFloat32;
  braidRedOp_t op = braidSum;
  int root = 0;
  int rank = 0;
  int nranks = 1;
  size_t pieceElems = 1;  // pipelining grain: elements per step
  // kAllToAllv only: this rank's nranks counts and displacements, in elements.
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
  // Where the ranks run: hostOf[r] is rank r's host, numbered 0.. by first appearance in
  // rank order (so hostOf[0] == 0); nullptr means every rank on one host. The communicator
  // fills it from the peers' host ids; hierarchical algorithms read it.
  const int* hostOf = nullptr;
  // The communicator's ring: ring[i] is the rank at position i (a permutation of 0..nranks-1),
  // ranks of one host (and of one NUMA node) next to each other, so a ring crosses each
  // boundary once (topology::commRing, or BRAID_RING). nullptr means rank order. The ring
  // algorithms follow it, and the tree algorithms build their trees over its positions, as
  // NCCL builds rings and trees over its topology search rather than rank numbers.
  const int* ring = nullptr;
  // The call is its collective's in-place form (the aliasing listed at the top of this file:
  // all-reduce's send == recv, ...). A builder may write the receive buffer early only out of
  // place, where it is not also the input that a send of the same piece still reads.
  // Plans are cached per form (runCollective); the verifier builds both.
  bool inPlace = false;
};

// A rank's place on CollArgs::ring, and its neighbours there.
struct RingPlace {
  const int* ring = nullptr;
  int n = 1;
  int pos = 0;  // position of the rank
  explicit RingPlace(const CollArgs& a) : ring(a.ring), n(a.nranks), pos(positionOf(a.rank)) {}
  // The rank at position p, taken modulo n (negative p allowed).
  int rankAt(int p) const {
    p = ((p % n) + n) % n;
    return ring ? ring[p] : p;
  }
  int positionOf(int rank) const {
    if (!ring) return rank;
    for (int i = 0; i < n; ++i)
      if (ring[i] == rank) return i;
    return -1;
  }
  int right() const { return rankAt(pos + 1); }
  int left() const { return rankAt(pos - 1); }
};

// Element i of a vector of `count` split into `parts` near-equal parts: where part p
// starts. 128-bit arithmetic, so no overflow for any size_t count and part count.
inline size_t partStart(size_t count, size_t parts, size_t p) {
  return static_cast<size_t>(static_cast<unsigned __int128>(count) * p / parts);
}

// Part p of `elems` cut into `pieces` parts (partStart): [*off, *off + *len).
inline void pieceOf(size_t elems, size_t pieces, size_t p, size_t* off, size_t* len) {
  *off = partStart(elems, pieces, p);
  *len = partStart(elems, pieces, p + 1) - *off;
}

// Which of those parts holds element e (< elems).
inline size_t pieceHolding(size_t elems, size_t pieces, size_t e) {
  size_t p =
      std::min(pieces - 1, static_cast<size_t>(static_cast<unsigned __int128>(e) * pieces / elems));
  while (p + 1 < pieces && partStart(elems, pieces, p + 1) <= e) ++p;
  while (p > 0 && partStart(elems, pieces, p) > e) --p;
  return p;
}

// The algorithm table: one row per (algorithm, collective). The executor, the perf
// binaries (-A), the verifier and the generated tests all read it, so adding an algorithm
// is one file and one row per collective it implements.
using BuildFn = void (*)(const CollArgs& args, Schedule* out);

// Builds rank args.rank's schedule with `build`, which numbers ranks 0..n-1, over the ring's
// positions instead: the schedule is built for this rank's position (the root likewise) and
// each step's peer mapped back to a rank. Valid for collectives whose buffers do not depend on
// rank numbers (all-reduce, broadcast, reduce, barrier); CollArgs::hostOf is dropped.
void buildOnRing(BuildFn build, const CollArgs& args, Schedule* out);
// nullptr when the algorithm can run this call, else why not (a sentence for the user).
using SupportsFn = const char* (*)(const CollArgs& args);
// The algorithm's closed-form time of one call, microseconds, on m's fabric for a vector of
// `bytes` = count * elemSize (algorithms/cost.h; compared by tuning/cost_model.h).
struct CostModel;
using CostFn = double (*)(const CostModel& m, double bytes);
struct AlgorithmInfo {
  const char* name;  // what BRAID_ALGO and -A take: "ring", "tree", "rhd", ...
  Collective coll;
  const char* description;  // one line, with the paper or library it follows
  BuildFn build;
  SupportsFn supports;    // nullptr: every call
  CostFn cost = nullptr;  // no closed form: the selector passes it over
};
const std::vector<AlgorithmInfo>& algorithms();
// The row named `name` for `coll`, or nullptr.
const AlgorithmInfo* findAlgorithm(Collective coll, const std::string& name);
// The fixed rule used until the cost-model selector exists (see schedule.cc for sources).
const AlgorithmInfo* defaultAlgorithm(const CollArgs& args, size_t elemSize);
// "why not" if `algo` cannot run args, else nullptr.
inline const char* unsupportedReason(const AlgorithmInfo& algo, const CollArgs& args) {
  return algo.supports ? algo.supports(args) : nullptr;
}

}  // namespace braid
