// The schedule verifier's program: every rank's schedule, built, checked and packed for the
// simulation in verifier.cc (DESIGN.md, "algorithms are schedules"; the checks are listed
// in verifier.h). Internal to the verifier.
//
// Every rank's schedule is built, checked step by step (peers, bounds, null buffers, the
// read-only send buffer, divisors, dependency indices) and packed into a Program: 40-byte
// steps with element addresses resolved, sorted into the executor's queues (one FIFO per
// peer and direction, one for local steps), with each send queue linked to the receive
// queue at the other end of its connection and each step to the steps that depend on it.
//
// Symbols. A reducing collective's element is (source index, number of ranks combined, two
// 64-bit sums of per-rank random values, divided flag): 32 bytes whatever nranks is, and a
// rank counted twice shows as a count above nranks or a sum that is not the full one. A
// data-movement element is the same with one contributor, so it names its source rank
// and index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"

namespace braid::verify {

struct Sym {
  uint64_t h1;
  uint64_t h2;
  uint64_t idx;      // source element index
  uint32_t cnt;      // ranks combined into it; 0: undefined
  uint32_t divided;  // AVG's division applied
};
static_assert(sizeof(Sym) == 32, "one symbol is 32 bytes");

inline bool same(const Sym& a, const Sym& b) {
  return a.h1 == b.h1 && a.h2 == b.h2 && a.idx == b.idx && a.cnt == b.cnt && a.divided == b.divided;
}

// printf into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Pairs the k-th send of each connection with its k-th receive. sends and recvs hold
// (connection key, id) with ids in posting order within a connection; both are sorted here.
// match(sendId, recvId) is called for each pair and returns false to stop the walk; the
// result is false if it did. Unpaired entries are left alone (the caller finds them).
template <typename Key, typename Id, typename Match>
bool matchInOrder(std::vector<std::pair<Key, Id>>* sends, std::vector<std::pair<Key, Id>>* recvs,
                  Match match) {
  std::sort(sends->begin(), sends->end());
  std::sort(recvs->begin(), recvs->end());
  for (size_t i = 0, j = 0; i < sends->size() && j < recvs->size();) {
    if ((*sends)[i].first < (*recvs)[j].first) {
      ++i;
    } else if ((*sends)[i].first > (*recvs)[j].first) {
      ++j;
    } else if (!match((*sends)[i++].second, (*recvs)[j++].second)) {
      return false;
    }
  }
  return true;
}
// "sum", "prod", "max", "min", "avg" or "premulsum".
const char* opName(braidRedOp_t op);
// "send", "recv", "scratch" or "user", by BufferId value.
const char* bufName(int b);

struct BufInfo {
  int64_t base = 0;  // into the flat element array
  size_t size = 0;
  bool null = true;  // the collective leaves this buffer unset on this rank
};

// A step packed for the simulation; src/dst are indices into the flat element array.
struct PStep {
  int32_t rank;
  int32_t peer;
  int32_t queue;
  int32_t pos;  // in its queue
  uint32_t count;
  uint32_t src;
  uint32_t dst;
  int32_t divisor;
  int32_t depBegin;  // into Program::deps, global step ids
  StepKind kind;
  uint8_t srcBuf, dstBuf, ndeps;
};
static_assert(sizeof(PStep) == 40, "a packed step is 40 bytes");

enum QueueKind : uint8_t { kLocalQ, kSendQ, kRecvQ };

struct Queue {
  int32_t rank;
  int32_t peer;  // -1 for the local queue
  QueueKind kind;
  int32_t begin, end;    // into Program::qSteps
  int32_t partner = -1;  // the queue at the other end of the connection
};

// Every rank's schedule, checked and packed; immutable once built.
struct Program {
  int n = 0;
  Collective coll = Collective::kAllReduce;
  bool reducing = false, barrier = false, inPlace = false;
  int root = 0;
  braidRedOp_t op = braidSum;
  size_t pieceElems = 1;
  std::vector<CollArgs> args;

  std::vector<BufInfo> bufs;  // [rank * 3 + BufferId]
  int64_t elems = 0;          // flat array size
  std::vector<uint64_t> r1, r2;
  uint64_t h1All = 0, h2All = 0;
  std::vector<std::pair<uint64_t, int>> hashToRank;

  std::vector<int64_t> stepBase;   // rank -> first global step id
  std::vector<int32_t> queueBase;  // rank -> first queue id (a rank's queues are contiguous)
  std::vector<PStep> steps;
  std::vector<int32_t> deps;
  std::vector<Queue> queues;
  std::vector<int32_t> qSteps;         // queue members in order
  std::vector<int32_t> revBegin, rev;  // who depends on each step
  std::vector<int32_t> refs;           // barrier: consumers of each step's heard set

  const BufInfo& buf(int r, int b) const { return bufs[static_cast<size_t>(r) * 3 + b]; }
  int local(int32_t g) const { return static_cast<int>(g - stepBase[steps[g].rank]); }

  Sym dataSym(int r, uint64_t k) const { return Sym{r1[r], r2[r], k, 1, 0}; }
  Sym fullSym(uint64_t k) const {
    return Sym{h1All, h2All, k, static_cast<uint32_t>(n), op == braidAvg && n > 1 ? 1u : 0u};
  }

  // One step, for messages: "rank r step i (send 4 elements from send[0] to rank 1)".
  std::string describeStep(int32_t g) const;
  // The rank whose random value is h, or -1.
  int rankOfHash(uint64_t h) const;
  // What a symbol holds, in words ("the reduction of element 3 over all 8 ranks").
  std::string describeSym(const Sym& s) const;

  // Builds and checks every rank's schedule; false with *error on the first problem.
  bool build(const AlgorithmInfo& algo, int nranks, std::vector<CollArgs> a, bool inPlaceCall,
             std::string* error);

 private:
  bool fail(std::string* error, std::string msg) {
    *error = std::move(msg);
    return false;
  }
  bool checkArgs(std::string* error);
  bool layout(int r, size_t scratchElems, std::string* error);
  bool pack(int r, const Schedule& s, std::string* error);
  void link();

  // Per-rank queue lookup while packing: peer -> queue id (reset after each rank).
  std::vector<int32_t> sendQ_, recvQ_;
  std::vector<int32_t> qCount_;
};

}  // namespace braid::verify
