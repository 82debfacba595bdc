// Bruck et al.'s log-round all-gather and all-to-all for any rank count (J. Bruck, C.-T. Ho,
// S. Kipnis, E. Upfal, D. Weathersby, "Efficient algorithms for all-to-all communications in
// multiport message-passing systems", IEEE TPDS 8(11), 1997). Both send ceil(log2 n)
// messages per rank, the latency optimum, and suit small messages.
#include <algorithm>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

BufRef scratchAt(size_t offset) { return {BufferId::kScratch, offset}; }

// Bruck all-gather (the paper's concatenation algorithm; MPICH's
// MPIR_Allgather_intra_brucks).
//
// Scratch holds n blocks in rank order relative to this rank: block j is rank (r + j)'s.
//   1. Copy the own block into scratch block 0.
//   2. Rounds k = 0, 1, ... while 2^k < n: send scratch blocks [0, m) to rank r - 2^k and
//      receive blocks [2^k, 2^k + m) from rank r + 2^k, m = min(2^k, n - 2^k). The blocks
//      held double each round; the last round tops up to exactly n, so any n works.
//   3. Rotate into place: scratch block j goes to receive block (r + j) mod n, as two copies
//      (blocks 0 .. n-r-1 to r .., and the rest to 0 ..).
// A round's send waits for the previous round's receive and send, hence for every block it
// carries. In place the own block is read from the receive buffer in step 1, before step 3
// rewrites it (the local copies run in order).
void buildBruckAllGather(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  if (c == 0) return;
  if (n == 1) {
    out->add(copyStep({BufferId::kSend, 0}, {BufferId::kRecv, 0}, c));
    return;
  }
  out->scratchElems = static_cast<size_t>(n) * c;
  const int32_t own = out->add(copyStep({BufferId::kSend, 0}, scratchAt(0), c));
  int32_t prevSend = -1, prevRecv = -1;
  for (int64_t pof2 = 1; pof2 < n; pof2 *= 2) {
    const size_t blocks = static_cast<size_t>(std::min<int64_t>(pof2, n - pof2));
    const int to = static_cast<int>((r - pof2 + n) % n), from = static_cast<int>((r + pof2) % n);
    prevSend = out->add(sendStep(to, scratchAt(0), blocks * c, own, prevSend, prevRecv));
    prevRecv = out->add(recvStep(from, scratchAt(static_cast<size_t>(pof2) * c), blocks * c));
  }
  const size_t head = static_cast<size_t>(n - r) * c;
  out->add(copyStep(scratchAt(0), {BufferId::kRecv, static_cast<size_t>(r) * c}, head, prevSend,
                    prevRecv));
  if (r > 0) out->add(copyStep(scratchAt(head), {BufferId::kRecv, 0}, static_cast<size_t>(r) * c));
}

// Bruck all-to-all (the paper's index algorithm; MPICH's MPIR_Alltoall_intra_brucks).
//
// Scratch holds n blocks T, a pack area P and an unpack area U.
//   1. Rotate: T[j] = send block (r + j) mod n, the block bound for rank r + j.
//   2. Rounds k = 0, 1, ... while 2^k < n: pack the blocks T[j] whose index j has bit k set
//      into P (one copy per run of 2^k consecutive such j), send P to rank r + 2^k, receive
//      as many blocks from rank r - 2^k into U and unpack them into the same T[j]. A block
//      moves by the sum of j's bits, i.e. by j, so the block that started on rank s at T[j]
//      ends on rank s + j, its destination, still at T[j].
//   3. Inverse rotation: receive block (r - j) mod n = T[j], one copy per block.
// Dependencies: a round's send waits for its last pack copy; its receive waits for the
// previous round's last unpack copy (U is reused), and its first pack copy for the previous
// round's send (P is reused). The local copies run in order, which orders the rest.
void buildBruckAllToAll(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  if (c == 0) return;
  if (n == 1) {
    out->add(copyStep({BufferId::kSend, 0}, {BufferId::kRecv, 0}, c));
    return;
  }
  size_t maxBlocks = 0;
  for (int64_t pof2 = 1; pof2 < n; pof2 *= 2) {
    size_t blocks = 0;
    for (int64_t j = pof2; j < n; j += 2 * pof2)
      blocks += static_cast<size_t>(std::min<int64_t>(pof2, n - j));
    maxBlocks = std::max(maxBlocks, blocks);
  }
  const size_t tBase = 0, pBase = static_cast<size_t>(n) * c, uBase = pBase + maxBlocks * c;
  out->scratchElems = uBase + maxBlocks * c;
  auto block = [&](int64_t j) { return static_cast<size_t>(j) * c; };

  out->add(copyStep({BufferId::kSend, block(r)}, scratchAt(tBase), block(n - r)));
  if (r > 0) out->add(copyStep({BufferId::kSend, 0}, scratchAt(tBase + block(n - r)), block(r)));
  int32_t prevSend = -1, prevUnpack = -1;
  for (int64_t pof2 = 1; pof2 < n; pof2 *= 2) {
    size_t packed = 0;
    int32_t lastPack = -1;
    for (int64_t j = pof2; j < n; j += 2 * pof2) {
      const size_t len = block(std::min<int64_t>(pof2, n - j));
      lastPack = out->add(copyStep(scratchAt(tBase + block(j)), scratchAt(pBase + packed), len,
                                   lastPack < 0 ? prevSend : -1));
      packed += len;
    }
    const int to = static_cast<int>((r + pof2) % n), from = static_cast<int>((r - pof2 + n) % n);
    prevSend = out->add(sendStep(to, scratchAt(pBase), packed, lastPack));
    const int32_t got = out->add(recvStep(from, scratchAt(uBase), packed, prevUnpack));
    size_t unpacked = 0;
    for (int64_t j = pof2; j < n; j += 2 * pof2) {
      const size_t len = block(std::min<int64_t>(pof2, n - j));
      prevUnpack = out->add(copyStep(scratchAt(uBase + unpacked), scratchAt(tBase + block(j)), len,
                                     unpacked == 0 ? got : -1));
      unpacked += len;
    }
  }
  for (int j = 0; j < n; ++j)
    out->add(copyStep(scratchAt(tBase + block(j)), {BufferId::kRecv, block((r - j + n) % n)}, c));
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// Bruck: ceil(log2 n) rounds to r - 2^k, doubling the blocks carried, then a local rotation.
double bruckAllGatherCost(const CostModel& m, double b) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(b * std::min(d, m.n - d), m.addCrossing(m.n - d), false);
  return p.total() + m.copy(b * m.n);
}
double bruckAllToAllCost(const CostModel& m, double b) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(b * m.n / 2, m.addCrossing(d), false);
  return p.total() + 2 * m.copy(b * m.n);
}

}  // namespace

void appendBruckAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"bruck", Collective::kAllGather,
                    "ceil(log2 n) rounds to rank - 2^k doubling the blocks held, any n, then a "
                    "local rotation (Bruck et al. 1997)",
                    buildBruckAllGather, nullptr, bruckAllGatherCost});
  table->push_back({"bruck", Collective::kAllToAll,
                    "index algorithm: ceil(log2 n) rounds, round k moves the blocks whose index "
                    "has bit k set, packed, to rank + 2^k (Bruck et al. 1997)",
                    buildBruckAllToAll, nullptr, bruckAllToAllCost});
}

}  // namespace braid
