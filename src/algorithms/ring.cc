// Ring algorithms: every rank sends only to its right neighbour on the communicator's ring
// (CollArgs::ring; rank + 1 without one) and receives only from its left one, and long messages are
// cut into pieces of about pieceElems so that a piece travels on while the next one is still
// arriving. Bandwidth-optimal for all-reduce, reduce-scatter and all-gather; the pipelined chain
// that NCCL's ring broadcast uses. In the comments below r is a rank's position on the ring, r+1
// the next position, and "block b" of a reduce-scatter or all-gather the block of the rank at
// position b.
#include "algorithms/ring.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

// Ring reduce-scatter (Patarasuk & Yuan 2009, in the form of ring.cc's reduce-scatter):
// steps s = 0 .. m-2 send block (me-s-1) to the right (at s = 0 the contribution, later
// the partial sum received the step before) and recv-reduce block (me-s-2) from the left
// with this rank's contribution; at s = m-2 that is block me, summed over the ring, and it
// lands at its units' `at` (divided by `divisor` if > 1). Partial sums go to `at` when
// slots is null (each block has its own place, so a contribution there is replaced by
// the partial sum that includes it), else alternately to slots[0] and slots[1] at the
// unit's slotOff. Unit by unit, so pieces pipeline. *done gets, per unit k of the own
// block, the step leaving its result; *sent, per unit of every block, the send that read
// it here (-1: none). Needs size() >= 2.
void ringReduceScatter(const RingPhase& ph, const BufRef* slots, int divisor, Schedule* out,
                       std::vector<int32_t>* done, std::vector<int32_t>* sent) {
  const int m = ph.size();
  const size_t U = ph.perBlock;
  done->assign(U, -1);
  sent->assign(static_cast<size_t>(m) * U, -1);
  auto partial = [&](int s, const RingUnit& u) {
    return slots ? BufRef{slots[s % 2].buf, slots[s % 2].offset + u.slotOff} : u.at;
  };
  std::vector<int32_t> prevRed(U, -1), curRed(U, -1), prevSend(U, -1), curSend(U, -1);
  for (int s = 0; s + 1 < m; ++s) {
    const bool last = s == m - 2;
    const int sb = ph.block(ph.me - s - 1), rb = ph.block(ph.me - s - 2);
    for (size_t k = 0; k < U; ++k) {
      curSend[k] = curRed[k] = -1;
      const RingUnit& su = ph.unit(sb, k);
      if (su.len > 0) {
        const BufRef src = s == 0 ? su.in : partial(s - 1, su);
        curSend[k] = out->add(sendStep(ph.right(), src, su.len, s == 0 ? su.ready : prevRed[k]));
        (*sent)[ph.index(sb, k)] = curSend[k];
      }
      const RingUnit& ru = ph.unit(rb, k);
      if (ru.len > 0) {
        Step st = makeStep(StepKind::kRecvReduce, ph.left(), ru.in, last ? ru.at : partial(s, ru),
                           ru.len);
        addDep(&st, ru.ready);
        // That slot's previous partial sum is still being sent.
        if (slots && !last) addDep(&st, prevSend[k]);
        st.divisor = last ? divisor : 1;
        curRed[k] = out->add(st);
        if (last) (*done)[k] = curRed[k];
      }
    }
    prevRed.swap(curRed);
    prevSend.swap(curSend);
  }
}

// Ring all-gather (ring.cc's): steps s = 0 .. m-2 send block (me-s) to the right (at s = 0
// the own block from its units' `in`, later the block received the step before) and
// receive block (me-s-1) from the left into its units' `at`. *got gets, per unit of every
// block, the receive that brought it here (-1: none). Needs size() >= 2.
void ringAllGather(const RingPhase& ph, Schedule* out, std::vector<int32_t>* got) {
  const int m = ph.size();
  const size_t U = ph.perBlock;
  got->assign(static_cast<size_t>(m) * U, -1);
  for (int s = 0; s + 1 < m; ++s) {
    const int sb = ph.block(ph.me - s), rb = ph.block(ph.me - s - 1);
    for (size_t k = 0; k < U; ++k) {
      const RingUnit& su = ph.unit(sb, k);
      if (su.len > 0) {
        if (s == 0) {
          const int32_t sent = out->add(sendStep(ph.right(), su.in, su.len, su.ready));
          if (ph.copyOwn) out->add(copyStep(su.in, su.at, su.len, sent));
        } else {
          out->add(sendStep(ph.right(), su.at, su.len, (*got)[ph.index(sb, k)]));
        }
      }
      const RingUnit& ru = ph.unit(rb, k);
      if (ru.len > 0)
        (*got)[ph.index(rb, k)] = out->add(recvStep(ph.left(), ru.at, ru.len, ru.ready));
    }
  }
}

namespace {

// How many pieces a ring all-reduce step runs ahead of the next step (see
// buildRingAllReduce). 2 leaves one piece of slack for the hop to the neighbour while the
// piece being reduced is still in a core's cache when it is sent on. Measured on 2 ranks,
// 5 interleaved rounds (all_reduce_perf -B host, median): 16 MiB 1494 -> 1267 us, 256 MiB
// 31.5 -> 27.1 ms against plain step order; 4 pieces: 1383 us and 27.3 ms. On 4 ranks
// (oversubscribed, 3 rounds) 2 pieces was 2-13% faster at 1, 16 and 64 MiB and 6% slower at 4.
constexpr size_t kRingLagPieces = 2;

void resetSchedule(Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
}

// One rank: the output is the input (AVG over one rank divides by one).
void addSelfCopy(size_t count, size_t dstOffset, Schedule* out) {
  out->add(
      makeStep(StepKind::kCopy, -1, {BufferId::kSend, 0}, {BufferId::kRecv, dstOffset}, count));
}

// The communicator's ring as a ring phase (ring.h) over blocks of `count` elements, the block
// at position b that of the rank there, each cut into `pieces` units; a unit's slotOff is its
// offset in the block. The callers set where the units are read and land.
RingPhase blockRing(const RingPlace& place, size_t count, size_t pieces) {
  RingPhase ph;
  for (int b = 0; b < place.n; ++b) ph.ranks.push_back(place.rankAt(b));
  ph.me = place.pos;
  ph.perBlock = pieces;
  ph.units.resize(static_cast<size_t>(place.n) * pieces);
  for (int b = 0; b < place.n; ++b)
    for (size_t p = 0; p < pieces; ++p) {
      RingUnit& u = ph.unit(b, p);
      u.slotOff = partStart(count, pieces, p);
      u.len = partStart(count, pieces, p + 1) - u.slotOff;
    }
  return ph;
}

// Ring all-reduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
// clusters of workstations", JPDC 2009; the algorithm NCCL's ring uses).
//
// The vector is cut into nranks chunks, each cut again into pieces of about pieceElems
// so consecutive steps pipeline. Rank r sends to r+1 and receives from r-1.
//   Reduce-scatter, steps s = 0 .. n-2: send chunk (r-s) (at s = 0 straight from the send
//   buffer, later the partial sum just computed), receive the partial sum of chunk
//   (r-s-1) and add the local contribution into the receive buffer. After n-1 steps rank
//   r holds the full reduction of chunk (r+1). For AVG the last addition also divides.
//   All-gather, steps s = 0 .. n-2: send chunk (r+1-s), receive chunk (r-s) into place.
// Each rank sends 2(n-1)/n of the vector: the bandwidth lower bound.
void buildRingAllReduce(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const RingPlace place(a);
  const int n = a.nranks, r = place.pos;
  if (a.count == 0) return;
  if (n == 1) {
    addSelfCopy(a.count, 0, out);
    return;
  }
  const int right = place.right(), left = place.left();
  auto chunk = [&](int c) { return ((c % n) + n) % n; };
  const size_t maxChunk = (a.count + n - 1) / n;
  const size_t pieces = piecesFor(maxChunk, a.pieceElems);
  // Piece p of chunk c: [begin, begin + len) in elements.
  auto piece = [&](int c, size_t p, size_t* begin, size_t* len) {
    size_t cb = partStart(a.count, n, c), ce = partStart(a.count, n, c + 1);
    size_t pb = partStart(ce - cb, pieces, p), pe = partStart(ce - cb, pieces, p + 1);
    *begin = cb + pb;
    *len = pe - pb;
  };
  // Index of the step that last wrote / sent each (chunk, piece); -1 when none.
  std::vector<int32_t> lastReduce(static_cast<size_t>(n) * pieces, -1);
  std::vector<int32_t> rsSend(static_cast<size_t>(n) * pieces, -1);
  std::vector<int32_t> agRecv(static_cast<size_t>(n) * pieces, -1);
  auto at = [&](int c, size_t p) { return static_cast<size_t>(c) * pieces + p; };

  // Global step t = 0 .. 2n-3: reduce-scatter step t, then all-gather step t - (n-1). Piece p
  // of step t is emitted at key p + lag * t (ties: the earlier step first), so a piece's
  // all-gather send follows its last reduction `lag` pieces later, while the reduced piece
  // is still in this core's cache, instead of a whole chunk later. lag >= pieces is plain
  // step order. Every rank emits in the same order and every dependency has a smaller key,
  // so the FIFOs of the ring stay matched and no rank waits on a later step.
  const size_t lag = std::min(pieces, kRingLagPieces);
  const int steps = 2 * (n - 1);
  std::vector<std::pair<size_t, int>> order;  // (key, t) for every (t, p); p = key - lag * t
  order.reserve(static_cast<size_t>(steps) * pieces);
  for (int t = 0; t < steps; ++t)
    for (size_t p = 0; p < pieces; ++p) order.emplace_back(p + lag * static_cast<size_t>(t), t);
  std::sort(order.begin(), order.end());
  for (const auto& [key, t] : order) {
    const size_t p = key - lag * static_cast<size_t>(t);
    const bool rs = t < n - 1;
    const int s = rs ? t : t - (n - 1);
    const int sc = rs ? chunk(r - s) : chunk(r + 1 - s), rc = rs ? chunk(r - s - 1) : chunk(r - s);
    size_t b, len;
    piece(sc, p, &b, &len);
    if (len > 0) {
      const BufferId from = rs && s == 0 ? BufferId::kSend : BufferId::kRecv;
      Step st = makeStep(StepKind::kSend, right, {from, b}, {}, len);
      st.deps[0] = rs || s == 0 ? lastReduce[at(sc, p)] : agRecv[at(sc, p)];
      const int i = out->add(st);
      if (rs) rsSend[at(sc, p)] = i;
    }
    piece(rc, p, &b, &len);
    if (len > 0) {
      if (rs) {
        Step st =
            makeStep(StepKind::kRecvReduce, left, {BufferId::kSend, b}, {BufferId::kRecv, b}, len);
        st.divisor = (a.op == braidAvg && s == n - 2) ? n : 1;
        lastReduce[at(rc, p)] = out->add(st);
      } else {
        Step st = makeStep(StepKind::kRecv, left, {}, {BufferId::kRecv, b}, len);
        st.deps[0] = rsSend[at(rc, p)];  // in place, the old value may still be unsent
        agRecv[at(rc, p)] = out->add(st);
      }
    }
  }
}

// Ring reduce-scatter (the first half of the ring all-reduce above; Patarasuk & Yuan 2009,
// NCCL's ring reduce-scatter).
//
// Block b is send[b*count .. (b+1)*count); rank r must end with the reduction of block r.
// Each block is cut into pieces of about pieceElems. Rank r sends to r+1, receives from r-1.
//   Step s = 0 .. n-2: send the partial sum of block (r-s-1) (at s = 0 this rank's own
//   contribution, straight from the send buffer; later the partial sum received and
//   extended in step s-1), and receive the partial sum of block (r-s-2) from the left,
//   adding this rank's contribution from the send buffer.
//   At s = n-2 the block received is block r itself, now summed over all n ranks: it is
//   reduced straight into the receive buffer (dividing by n for AVG).
// Partial sums of steps before the last live in two scratch slots of one block each, used
// alternately: the piece reduced in step s can land while the slot written in step s-1 is
// still being forwarded. The receive buffer is not usable for them, since in place it is
// the send buffer's block r, which the last step still reads.
// Each rank sends (n-1)/n of its input: the bandwidth lower bound.
void buildRingReduceScatter(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const RingPlace place(a);
  const int n = a.nranks;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    addSelfCopy(count, 0, out);
    return;
  }
  RingPhase ph = blockRing(place, count, piecesFor(count, a.pieceElems));
  for (int b = 0; b < n; ++b)
    for (size_t p = 0; p < ph.perBlock; ++p) {
      RingUnit& u = ph.unit(b, p);
      u.in = {BufferId::kSend, static_cast<size_t>(place.rankAt(b)) * count + u.slotOff};
      u.at = {BufferId::kRecv, u.slotOff};  // read for the own block only
    }
  out->scratchElems = count * static_cast<size_t>(std::min(n - 2, 2));
  const BufRef slots[2] = {{BufferId::kScratch, 0}, {BufferId::kScratch, count}};
  std::vector<int32_t> done, sent;
  ringReduceScatter(ph, slots, a.op == braidAvg ? n : 1, out, &done, &sent);
}

// Ring all-gather (the second half of the ring all-reduce above; NCCL's ring all-gather).
//
// Block b of the receive buffer is rank b's input. Rank r copies its own input into block
// r and, in steps s = 0 .. n-2, sends block (r-s) to r+1 (at s = 0 straight from the send
// buffer, later the block just received) and receives block (r-s-1) from r-1 into place.
// Blocks are cut into pieces of about pieceElems, so a piece is forwarded as soon as it
// has arrived. In place the send buffer is block r of the receive buffer; the local copy
// of each piece then waits for its first send, so nothing writes what a send still reads.
// Each rank sends (n-1)/n of the output: the bandwidth lower bound.
void buildRingAllGather(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const RingPlace place(a);
  const int n = a.nranks;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    addSelfCopy(count, 0, out);
    return;
  }
  RingPhase ph = blockRing(place, count, piecesFor(count, a.pieceElems));
  ph.copyOwn = true;
  for (int b = 0; b < n; ++b)
    for (size_t p = 0; p < ph.perBlock; ++p) {
      RingUnit& u = ph.unit(b, p);
      u.in = {BufferId::kSend, u.slotOff};  // read for the own block only
      u.at = {BufferId::kRecv, static_cast<size_t>(place.rankAt(b)) * count + u.slotOff};
    }
  std::vector<int32_t> got;
  ringAllGather(ph, out, &got);
}

// Ring broadcast: a pipelined chain (the ring broadcast of NCCL; for long messages its time
// approaches count / bandwidth however many ranks there are, as in Träff's pipelined
// broadcasts).
//
// Ranks are ordered root, root+1, ..., root-1 around the ring. The vector is cut into
// pieces of about pieceElems. The root sends piece after piece to root+1; every other rank
// receives each piece from its left neighbour into its receive buffer and, unless it is
// the chain's last rank, passes it on to the right while the next piece is arriving. The
// root copies its input into its own receive buffer piece by piece, each piece after it was
// sent (in place the two are one buffer, and the copy must not overlap the send's read).
void buildRingBroadcast(const CollArgs& a, Schedule* out) {
  resetSchedule(out);
  const RingPlace place(a);
  const int n = a.nranks;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    addSelfCopy(count, 0, out);
    return;
  }
  const int right = place.right(), left = place.left();
  const int pos = (place.pos - place.positionOf(a.root) + n) % n;  // place in the chain, root 0
  const size_t pieces = piecesFor(count, a.pieceElems);
  for (size_t p = 0; p < pieces; ++p) {
    const size_t off = partStart(count, pieces, p);
    const size_t len = partStart(count, pieces, p + 1) - off;
    if (len == 0) continue;
    if (pos == 0) {
      const int32_t sent =
          out->add(makeStep(StepKind::kSend, right, {BufferId::kSend, off}, {}, len));
      Step cp = makeStep(StepKind::kCopy, -1, {BufferId::kSend, off}, {BufferId::kRecv, off}, len);
      cp.deps[0] = sent;
      out->add(cp);
      continue;
    }
    const int32_t got = out->add(makeStep(StepKind::kRecv, left, {}, {BufferId::kRecv, off}, len));
    if (pos != n - 1) {
      Step snd = makeStep(StepKind::kSend, right, {BufferId::kRecv, off}, {}, len);
      snd.deps[0] = got;
      out->add(snd);
    }
  }
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
double ringAllReduceCost(const CostModel& m, double S) {
  const Crossing c = m.ringCrossing();
  return Pipe(m).round(S / m.n, c, true, m.n - 1).round(S / m.n, c, false, m.n - 1).total();
}
double ringReduceScatterCost(const CostModel& m, double b) {
  return Pipe(m).round(b, m.ringCrossing(), true, m.n - 1).total();
}
double ringAllGatherCost(const CostModel& m, double b) {
  return Pipe(m).round(b, m.ringCrossing(), false, m.n - 1).total();  // the copy overlaps
}
double ringBroadcastCost(const CostModel& m, double S) {  // the root's copy overlaps the sends
  const Crossing c = m.ringCrossing();
  return m.chain(S, m.n - 1, c, m.pieceService(S, c.flows, false), false);
}

}  // namespace

void appendRingAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"ring", Collective::kAllReduce,
                    "ring reduce-scatter then ring all-gather, chunked and pipelined; sends "
                    "2(n-1)/n of the vector, the bandwidth optimum (Patarasuk & Yuan 2009)",
                    buildRingAllReduce, nullptr, ringAllReduceCost});
  table->push_back({"ring", Collective::kReduceScatter,
                    "ring reduce-scatter, pipelined in pieces; sends (n-1)/n of the input, the "
                    "bandwidth optimum (Patarasuk & Yuan 2009, NCCL's ring)",
                    buildRingReduceScatter, nullptr, ringReduceScatterCost});
  table->push_back({"ring", Collective::kAllGather,
                    "ring all-gather, pipelined in pieces; sends (n-1)/n of the output, the "
                    "bandwidth optimum (Patarasuk & Yuan 2009, NCCL's ring)",
                    buildRingAllGather, nullptr, ringAllGatherCost});
  table->push_back({"ring", Collective::kBroadcast,
                    "pipelined chain from the root around the ring, in pieces (NCCL's ring "
                    "broadcast); time near count / bandwidth for long messages",
                    buildRingBroadcast, nullptr, ringBroadcastCost});
}

}  // namespace braid
