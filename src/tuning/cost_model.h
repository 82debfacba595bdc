// The cost model and the selector. For each call (collective, bytes, ranks, layout) the
// model predicts every algorithm's time on a Fabric from closed forms of the algorithm's
// schedule (rounds, bytes per round, which rounds cross hosts and how many flows share a NIC;
// the alpha-beta-gamma model of Thakur, Rabenseifner & Gropp 2005, with NCCL's per-hop view of
// the network), each written in its algorithm's file (AlgorithmInfo::cost, over
// algorithms/cost.h); the selector takes the least. The closed forms are checked against the
// schedule simulator (simulate.h), which plays the schedules themselves.
//
// BRAID_ALGO overrides the selector per collective and size range:
//   BRAID_ALGO=ring                           every collective that has "ring"
//   BRAID_ALGO=allreduce:ring@0-64K,rhd@64K-;broadcast:tree
// Items are separated by ';' (or ','); "coll:" starts a collective's list, and items without
// it continue the last one. "@lo-hi" is a byte range, lo inclusive, hi exclusive, either side
// may be empty (open), suffixes K, M, G (binary). Bytes are nccl-tests' size column: the
// vector for all-reduce, broadcast and reduce, n x count elements for reduce-scatter,
// all-gather and all-to-all, n x count for gather and scatter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "braid/braid.h"
#include "tuning/fabric.h"

namespace braid::tuning {

// The call's size in bytes as nccl-tests prints it (see above).
size_t callBytes(Collective coll, size_t count, size_t elemSize, int nranks);

// Predicted time in microseconds of `algo` running the call on the fabric (ranks as
// fabric.hostOf, ring as fabric.ring), out of place or in place (CollArgs::inPlace). For
// all-to-all-v, count is the mean block.
double predictUs(const AlgorithmInfo& algo, Collective coll, size_t count, size_t elemSize,
                 const Fabric& fabric, bool inPlace = false);

// The time the selector uses for a call: the schedule simulator's (simulate.h; exact to the
// schedules' pipelining and contention) when the fabric has at most kSimulateRanks ranks and
// the call at most about kSimulateSteps steps, the closed form above beyond that (and for
// all-to-all-v, whose counts differ per rank).
constexpr int kSimulateRanks = 32;
// ... and at most about this many steps (a few milliseconds of simulation).
constexpr double kSimulateSteps = 1000000;
// Kept per process (keyed by the call's shape and the fabric): concurrent askers of one
// question (a communicator's thread ranks compiling the same plan) wait for the first one's
// answer instead of computing it too.
double predictCallUs(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                     const Fabric& fabric);
// The same answer computed afresh, nothing kept.
double predictCallUsUncached(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                             const Fabric& fabric);
// How many of predictCallUs's answers were computed rather than taken from what it keeps,
// since the process started (a diagnostic count: tests check that askers share answers).
uint64_t predictionsComputed();

// The pipelining grain for one call of `algo` (NCCL sizes its steps per call likewise): of
// the fabric's chunk and its halves down to an eighth (none under kMinPieceBytes, each a
// whole number of elements), the one with the least predictCallUs, a smaller piece only
// where it is more than kTie faster than the best larger one (fewer steps otherwise). The
// FIFO's slots keep their size, so a smaller piece lets no more bytes be in flight, only
// more, smaller steps. Bytes, at least elemSize. Calls of more than kPieceChoiceChunks
// chunks per rank (callBytes / nranks), and all-to-all-v (counts differ per rank), keep the
// chunk.
constexpr size_t kMinPieceBytes = 4096;
constexpr size_t kPieceChoiceChunks = 4;
size_t choosePieceBytes(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                        const Fabric& fabric);

struct Candidate {
  const AlgorithmInfo* algo = nullptr;
  double predicted_us = 0;
  const char* unsupported = nullptr;  // why the algorithm cannot run the call, else nullptr
};
// Every algorithm of args.coll with its prediction, in table order; *best is the index of the
// supported one with the least predicted time, of those within kTie of it the first in table
// order (-1 when none is supported). The tables list an operation's algorithms in order of
// preference: ring first (every rank's engine moves each byte once).
// args.hostOf and args.ring are taken from the fabric for the support checks.
constexpr double kTie = 0.01;
std::vector<Candidate> rankCandidates(const CollArgs& args, size_t elemSize, const Fabric& fabric,
                                      int* best);

// One BRAID_ALGO item: `algo` for `coll` (-1: every collective having that algorithm) on
// calls of bytes in [lo, hi).
struct AlgoRule {
  int coll = -1;
  std::string algo;
  size_t lo = 0;
  size_t hi = SIZE_MAX;
};
struct AlgoSpec {
  std::string text;
  std::vector<AlgoRule> rules;
  // The algorithm the spec names for the call ("" for none): the first rule that matches.
  std::string forced(Collective coll, size_t bytes) const;
};
// Parses BRAID_ALGO's syntax (above); blank text is no rules. Errors: braidInvalidArgument,
// naming BRAID_ALGO, the item and the problem (an empty item, an unknown collective, an
// algorithm the collective does not have, a range that does not parse or is empty).
braidResult_t parseAlgoSpec(const std::string& text, AlgoSpec* out);

}  // namespace braid::tuning

namespace braid::tuning {
// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw x factor, with algbw
// = callBytes / time. All-reduce 2(n-1)/n; reduce-scatter, all-gather, all-to-all (v) (n-1)/n;
// broadcast, reduce, gather, scatter 1; barrier 0.
double busBwFactor(Collective coll, int nranks);
}  // namespace braid::tuning
