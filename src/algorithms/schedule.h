// Schedules: what one rank does for one collective, as ordered steps over chunks of its
// buffers (DESIGN.md, "algorithms are schedules"). Algorithms build schedules and never
// touch transports; the executor runs them, and later the verifier and simulator read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid {

enum class Collective : uint8_t { kAllReduce };
const char* collectiveName(Collective c);

enum class BufferId : uint8_t { kSend, kRecv, kScratch };

// A position in one of the call's buffers, in elements.
struct BufRef {
  BufferId buf;
  size_t offset;
};

enum class StepKind : uint8_t {
  kSend,        // send `count` elements at src to `peer`
  kRecv,        // receive `count` elements from `peer` into dst
  kRecvReduce,  // dst = op(src, received from `peer`), then divided by `divisor` if > 1
  kCopy,        // dst = src (divided by `divisor` if > 1), local
};

struct Step {
  StepKind kind;
  int peer = -1;
  BufRef src{BufferId::kSend, 0};
  BufRef dst{BufferId::kRecv, 0};
  size_t count = 0;
  int divisor = 1;
  // Steps (indices into Schedule::steps) that must finish before this one starts; -1 none.
  int32_t deps[2] = {-1, -1};
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
};

// Element i of a vector of `count` split into `parts` near-equal parts: where part p
// starts. 128-bit arithmetic, so no overflow for any size_t count and part count.
inline size_t partStart(size_t count, size_t parts, size_t p) {
  return static_cast<size_t>(static_cast<unsigned __int128>(count) * p / parts);
}

// The algorithm table: one row per algorithm. The executor, perf binaries (-A) and the
// tests all read it, so adding an algorithm is one file and one row.
using BuildFn = void (*)(const CollArgs& args, Schedule* out);
struct AlgorithmInfo {
  const char* name;
  Collective coll;
  const char* description;
  BuildFn build;
};
const std::vector<AlgorithmInfo>& algorithms();
// The row named `name` for `coll`, or nullptr.
const AlgorithmInfo* findAlgorithm(Collective coll, const std::string& name);

// Builders (one file each).
void buildRingAllReduce(const CollArgs& args, Schedule* out);

}  // namespace braid
