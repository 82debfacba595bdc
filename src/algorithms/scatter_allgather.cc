// Large-message broadcast: binomial scatter from the root, then ring all-gather (M. Barnett,
// L. Shuler, R. van de Geijn, S. Gupta, D. Payne, J. Watts, "Interprocessor collective
// communication library (InterCom)", SHPCC 1994; R. Thakur, R. Rabenseifner, W. Gropp,
// IJHPCA 2005; MPICH's MPIR_Bcast_intra_scatter_ring_allgather).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// Ranks are relabelled so the root is vrank 0, and the vector is cut into n chunks with
// partStart (any count; chunks may be empty when count < n); chunk v is vrank v's.
//   1. Scatter down the binomial tree: vrank v with lowest set bit m (the root: the power
//      of two >= n) receives chunks [v, v + m) from v - m in one message, then sends
//      chunks [v + h, v + 2h) to child v + h for h = m/2, m/4, .., 1. Afterwards v holds
//      chunks [v, min(v + m, n)): at least its own.
//   2. Ring all-gather over vranks, steps s = 0 .. n-2: v sends chunk (v - s) to v + 1 and
//      receives chunk (v - 1 - s) from v - 1. A chunk the receiver already holds from the
//      scatter is skipped on both sides (both can tell), as is an empty chunk, so no
//      element is written twice; the root, holding all, only sends.
// The root sends from its send buffer and copies it into its receive buffer. Every other
// rank receives each chunk once, (n-1)/n of the vector in all, and no rank sends more than
// 2(n-1)/n of it, where a binomial tree's root sends log2(n) whole vectors.
void buildScatterAllGatherBroadcast(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks;
  if (a.count == 0) return;
  if (n == 1 || a.rank == a.root) {
    Step s;
    s.kind = StepKind::kCopy;
    s.src = {BufferId::kSend, 0};
    s.dst = {BufferId::kRecv, 0};
    s.count = a.count;
    out->add(s);
    if (n == 1) return;
  }
  const int v = (a.rank - a.root + n) % n;
  auto phys = [&](int64_t vr) { return static_cast<int>((vr % n + a.root) % n); };
  auto chunkBegin = [&](int64_t c) { return partStart(a.count, n, static_cast<size_t>(c)); };
  int64_t pof2 = 1;
  while (pof2 < n) pof2 *= 2;
  // The scatter leaves vrank w holding chunks [w, heldEnd(w)).
  auto heldEnd = [&](int64_t w) {
    const int64_t m = w == 0 ? pof2 : (w & -w);
    return std::min<int64_t>(w + m, n);
  };
  auto holds = [&](int64_t w, int64_t c) { return c >= w && c < heldEnd(w); };
  const BufferId from = v == 0 ? BufferId::kSend : BufferId::kRecv;
  std::vector<int32_t> writer(n, -1);  // the step that brought each chunk here, if any

  const int64_t m = v == 0 ? pof2 : (v & -v);
  if (v != 0) {
    const size_t b = chunkBegin(v), e = chunkBegin(heldEnd(v));
    if (e > b) {
      Step s;
      s.kind = StepKind::kRecv;
      s.peer = phys(v - m);
      s.dst = {BufferId::kRecv, b};
      s.count = e - b;
      const int32_t idx = out->add(s);
      for (int64_t c = v; c < heldEnd(v); ++c) writer[c] = idx;
    }
  }
  for (int64_t h = m / 2; h >= 1; h /= 2) {
    const int64_t child = v + h;
    if (child >= n) continue;
    const size_t b = chunkBegin(child), e = chunkBegin(heldEnd(child));
    if (e == b) continue;
    Step s;
    s.kind = StepKind::kSend;
    s.peer = phys(child);
    s.src = {from, b};
    s.count = e - b;
    s.deps[0] = writer[child];
    out->add(s);
  }

  const int64_t right = (v + 1) % n;
  for (int64_t step = 0; step + 1 < n; ++step) {
    const int64_t sc = ((v - step) % n + n) % n, rc = ((v - 1 - step) % n + n) % n;
    const size_t sb = chunkBegin(sc), se = chunkBegin(sc + 1);
    if (se > sb && !holds(right, sc)) {
      Step s;
      s.kind = StepKind::kSend;
      s.peer = phys(right);
      s.src = {from, sb};
      s.count = se - sb;
      s.deps[0] = writer[sc];
      out->add(s);
    }
    const size_t rb = chunkBegin(rc), re = chunkBegin(rc + 1);
    if (re > rb && !holds(v, rc)) {
      Step s;
      s.kind = StepKind::kRecv;
      s.peer = phys(v - 1 + n);
      s.dst = {BufferId::kRecv, rb};
      s.count = re - rb;
      writer[rc] = out->add(s);
    }
  }
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// van de Geijn: binomial scatter of n blocks, then ring all-gather of the blocks.
double scatterAllGatherCost(const CostModel& m, double S) {
  Pipe p(m);
  double bytes = S;
  for (int span = pow2Below(m.n) / 2; span >= 1; span /= 2) {
    bytes /= 2;
    const Crossing c = m.crossing([&](int r) { return r % (2 * span) == 0 ? r + span : -1; });
    p.round(bytes, c, false);
  }
  p.round(S / m.n, m.ringCrossing(), false, m.n - 1);
  return p.total();
}

}  // namespace

void appendScatterAllGatherAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"scatter_allgather", Collective::kBroadcast,
                    "binomial scatter of n chunks from the root, then ring all-gather; each "
                    "rank receives (n-1)/n of the vector once (Barnett et al. 1994, van de "
                    "Geijn; MPICH scatter_ring_allgather)",
                    buildScatterAllGatherBroadcast, nullptr, scatterAllGatherCost});
}

}  // namespace braid
