// Ring algorithms: every rank sends only to its right neighbour on the communicator's ring
// (CollArgs::ring; rank + 1 without one) and receives only from its left one, and long messages are
// cut into pieces of about pieceElems so that a piece travels on while the next one is still
// arriving. Bandwidth-optimal for all-reduce, reduce-scatter and all-gather; the pipelined chain
// that NCCL's ring broadcast uses. In the comments below r is a rank's position on the ring, r+1
// the next position, and "block b" of a reduce-scatter or all-gather the block of the rank at
// position b.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "algorithms/schedule.h"

namespace braid {

namespace {

// How many pieces a ring all-reduce step runs ahead of the next step (see
// buildRingAllReduce). 2 leaves one piece of slack for the hop to the neighbour while the
// piece being reduced is still in a core's cache when it is sent on. Measured on 2 ranks,
// 5 interleaved rounds (all_reduce_perf -M host, median): 16 MiB 1494 -> 1267 us, 256 MiB
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
  const int n = a.nranks, r = place.pos;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    addSelfCopy(count, 0, out);
    return;
  }
  const int right = place.right(), left = place.left();
  // The block of the rank at ring position b.
  auto block = [&](int b) { return static_cast<size_t>(place.rankAt(b)); };
  const size_t pieces = piecesFor(count, a.pieceElems);
  out->scratchElems = count * static_cast<size_t>(std::min(n - 2, 2));
  auto slot = [&](int s) { return BufRef{BufferId::kScratch, static_cast<size_t>(s % 2) * count}; };
  // Per piece: the recv-reduce and the send of the previous step.
  std::vector<int32_t> prevReduce(pieces, -1), prevSend(pieces, -1);
  std::vector<int32_t> curReduce(pieces, -1), curSend(pieces, -1);
  for (int s = 0; s < n - 1; ++s) {
    const bool last = s == n - 2;
    const size_t sb = block(r - s - 1), rb = block(r - s - 2);
    for (size_t p = 0; p < pieces; ++p) {
      const size_t off = partStart(count, pieces, p);
      const size_t len = partStart(count, pieces, p + 1) - off;
      curSend[p] = curReduce[p] = -1;
      if (len == 0) continue;
      BufRef src = s == 0 ? BufRef{BufferId::kSend, sb * count + off}
                          : BufRef{slot(s - 1).buf, slot(s - 1).offset + off};
      Step snd = makeStep(StepKind::kSend, right, src, {}, len);
      snd.deps[0] = prevReduce[p];  // the partial sum being forwarded
      curSend[p] = out->add(snd);
      BufRef dst =
          last ? BufRef{BufferId::kRecv, off} : BufRef{BufferId::kScratch, slot(s).offset + off};
      Step red =
          makeStep(StepKind::kRecvReduce, left, {BufferId::kSend, rb * count + off}, dst, len);
      if (!last) red.deps[0] = prevSend[p];  // that slot's previous content is still unsent
      red.divisor = (last && a.op == braidAvg) ? n : 1;
      curReduce[p] = out->add(red);
    }
    prevReduce.swap(curReduce);
    prevSend.swap(curSend);
  }
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
  const int n = a.nranks, r = place.pos;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    addSelfCopy(count, 0, out);
    return;
  }
  const int right = place.right(), left = place.left();
  // The block of the rank at ring position b.
  auto block = [&](int b) { return static_cast<size_t>(place.rankAt(b)); };
  const size_t pieces = piecesFor(count, a.pieceElems);
  std::vector<int32_t> prevRecv(pieces, -1);
  for (int s = 0; s < n - 1; ++s) {
    const size_t sb = block(r - s), rb = block(r - s - 1);
    for (size_t p = 0; p < pieces; ++p) {
      const size_t off = partStart(count, pieces, p);
      const size_t len = partStart(count, pieces, p + 1) - off;
      if (len == 0) continue;
      BufRef src =
          s == 0 ? BufRef{BufferId::kSend, off} : BufRef{BufferId::kRecv, sb * count + off};
      Step snd = makeStep(StepKind::kSend, right, src, {}, len);
      snd.deps[0] = prevRecv[p];
      const int32_t sent = out->add(snd);
      if (s == 0) {
        Step cp = makeStep(StepKind::kCopy, -1, {BufferId::kSend, off},
                           {BufferId::kRecv, static_cast<size_t>(a.rank) * count + off}, len);
        cp.deps[0] = sent;
        out->add(cp);
      }
      prevRecv[p] =
          out->add(makeStep(StepKind::kRecv, left, {}, {BufferId::kRecv, rb * count + off}, len));
    }
  }
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

}  // namespace

void appendRingAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"ring", Collective::kAllReduce,
                    "ring reduce-scatter then ring all-gather, chunked and pipelined; sends "
                    "2(n-1)/n of the vector, the bandwidth optimum (Patarasuk & Yuan 2009)",
                    buildRingAllReduce, nullptr});
  table->push_back({"ring", Collective::kReduceScatter,
                    "ring reduce-scatter, pipelined in pieces; sends (n-1)/n of the input, the "
                    "bandwidth optimum (Patarasuk & Yuan 2009, NCCL's ring)",
                    buildRingReduceScatter, nullptr});
  table->push_back({"ring", Collective::kAllGather,
                    "ring all-gather, pipelined in pieces; sends (n-1)/n of the output, the "
                    "bandwidth optimum (Patarasuk & Yuan 2009, NCCL's ring)",
                    buildRingAllGather, nullptr});
  table->push_back({"ring", Collective::kBroadcast,
                    "pipelined chain from the root around the ring, in pieces (NCCL's ring "
                    "broadcast); time near count / bandwidth for long messages",
                    buildRingBroadcast, nullptr});
}

}  // namespace braid
