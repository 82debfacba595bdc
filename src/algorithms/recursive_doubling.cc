// Recursive doubling (Thakur, Rabenseifner & Gropp, "Optimization of collective
// communication operations in MPICH", IJHPCA 2005; MPICH's
// MPIR_Allreduce_intra_recursive_doubling and MPIR_Allgather_intra_recursive_doubling).
// log2(n) rounds, in round i every rank exchanges with the rank whose number differs in
// bit i: few messages, so it is the choice for short vectors where latency dominates.
#include <algorithm>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

BufRef at(BufferId b, size_t offset) { return BufRef{b, offset}; }

// Recursive-doubling all-reduce (Thakur, Rabenseifner & Gropp 2005, section 4.4; MPICH's
// MPIR_Allreduce_intra_recursive_doubling).
//
// Let p2 be the largest power of two <= n and rem = n - p2.
//   Fold: of the first 2*rem ranks, each even rank sends its whole input to the odd rank
//   above it, which adds it to its own, and then sits out; the remaining p2 ranks are
//   renumbered 0..p2-1 (odd rank 2i+1 becomes i, rank j >= 2*rem becomes j - rem).
//   Rounds, mask = 1, 2, .. p2/2: exchange the whole current vector with the rank whose
//   new number differs in `mask`, and add what arrives. After log2(p2) rounds every rank
//   holds the full reduction; the last addition divides for AVG. The partners of a round
//   combine the same two values, and the operations commute exactly, so every rank ends
//   with the same bits (but for a zero's sign or a NaN's payload under MAX and MIN).
//   Unfold: each odd rank of the first 2*rem sends the result to the even rank below it.
// Cost: log2(p2) + 2 (if n is not a power of two) messages of the whole vector.
// Each round reads one buffer and writes another, so a rank can forward its vector and
// reduce the partner's at the same time without waiting for its own send to drain: the
// rounds alternate between the receive buffer and one scratch vector, the last round ending
// in the receive buffer. In place (and after a fold) the input sits in the receive buffer, so
// round 1 cannot write there: the rounds then start in scratch, and an odd number of them
// ends with a copy from scratch. Out of place the first round writes the receive buffer
// (2 ranks: one send and one receive-reduce of the whole vector, nothing else). Pieces of
// about pieceElems let a round start on the first piece while later ones are in flight.
void buildRecursiveDoublingAllReduce(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    out->add(makeStep(StepKind::kCopy, -1, at(BufferId::kSend, 0), at(BufferId::kRecv, 0), count));
    return;
  }
  int p2 = 1, rounds = 0;
  while (p2 * 2 <= n) {
    p2 *= 2;
    ++rounds;
  }
  const int rem = n - p2;
  const int newrank = r < 2 * rem ? (r % 2 == 0 ? -1 : r / 2) : r - rem;
  auto realRank = [&](int nr) { return nr < rem ? 2 * nr + 1 : nr + rem; };
  const size_t pieces = piecesFor(count, a.pieceElems);
  auto range = [&](size_t p, size_t* off, size_t* len) {
    *off = partStart(count, pieces, p);
    *len = partStart(count, pieces, p + 1) - *off;
  };

  if (newrank < 0) {
    // Folded away: hand the input to r+1, later take the result back. In place the result
    // overwrites the input, so each piece waits for its own send.
    std::vector<int32_t> sent(pieces, -1);
    for (size_t p = 0; p < pieces; ++p) {
      size_t off, len;
      range(p, &off, &len);
      if (len > 0)
        sent[p] = out->add(makeStep(StepKind::kSend, r + 1, at(BufferId::kSend, off), {}, len));
    }
    for (size_t p = 0; p < pieces; ++p) {
      size_t off, len;
      range(p, &off, &len);
      if (len == 0) continue;
      Step s = makeStep(StepKind::kRecv, r + 1, {}, at(BufferId::kRecv, off), len);
      addDep(&s, sent[p]);
      out->add(s);
    }
    return;
  }

  // Round i reads buffer X(i-1) and writes X(i): X(0) is the input (send, which in place is
  // recv; after a fold, recv). Then recv and scratch alternate so that X(rounds) is recv,
  // unless X(0) is recv: then X(1) is scratch, and X(rounds) too when rounds is odd.
  const bool inputInRecv = a.inPlace || r < 2 * rem;
  const int recvParity = inputInRecv ? 0 : rounds % 2;  // rounds i >= 1 of this parity: recv
  auto bufAfter = [&](int i) {
    if (i == 0) return inputInRecv ? BufferId::kRecv : BufferId::kSend;
    return i % 2 == recvParity ? BufferId::kRecv : BufferId::kScratch;
  };
  out->scratchElems = (rounds >= 2 || bufAfter(1) == BufferId::kScratch) ? count : 0;
  // Per piece: the step that wrote X(i-1) and the send that read it.
  std::vector<int32_t> wrote(pieces, -1), sent(pieces, -1);
  if (r < 2 * rem) {
    for (size_t p = 0; p < pieces; ++p) {
      size_t off, len;
      range(p, &off, &len);
      if (len > 0)
        wrote[p] = out->add(makeStep(StepKind::kRecvReduce, r - 1, at(BufferId::kSend, off),
                                     at(BufferId::kRecv, off), len));
    }
  }
  for (int i = 1; i <= rounds; ++i) {
    const int peer = realRank(newrank ^ (1 << (i - 1)));
    const BufferId from = bufAfter(i - 1), to = bufAfter(i);
    for (size_t p = 0; p < pieces; ++p) {
      size_t off, len;
      range(p, &off, &len);
      if (len == 0) continue;
      Step snd = makeStep(StepKind::kSend, peer, at(from, off), {}, len);
      addDep(&snd, wrote[p]);
      const int32_t thisSend = out->add(snd);
      Step red = makeStep(StepKind::kRecvReduce, peer, at(from, off), at(to, off), len);
      addDep(&red, wrote[p]);
      addDep(&red, sent[p]);  // `to` is X(i-2), which the previous round's send reads
      if (i == rounds && a.op == braidAvg) red.divisor = n;
      wrote[p] = out->add(red);
      sent[p] = thisSend;
    }
  }
  if (bufAfter(rounds) != BufferId::kRecv) {
    for (size_t p = 0; p < pieces; ++p) {
      size_t off, len;
      range(p, &off, &len);
      if (len == 0) continue;
      Step cp =
          makeStep(StepKind::kCopy, -1, at(BufferId::kScratch, off), at(BufferId::kRecv, off), len);
      addDep(&cp, wrote[p]);
      addDep(&cp, sent[p]);
      wrote[p] = out->add(cp);
    }
  }
  if (r < 2 * rem) {
    for (size_t p = 0; p < pieces; ++p) {
      size_t off, len;
      range(p, &off, &len);
      if (len == 0) continue;
      Step s = makeStep(StepKind::kSend, r - 1, at(BufferId::kRecv, off), {}, len);
      addDep(&s, wrote[p]);
      out->add(s);
    }
  }
}

// Recursive-doubling all-gather (Thakur, Rabenseifner & Gropp 2005, section 4.1; MPICH's
// MPIR_Allgather_intra_recursive_doubling, including its handling of non-power-of-two n).
//
// Block b of the receive buffer is rank b's input; rank r first copies its own into block
// r. In the round with mask = 1, 2, 4, ... a rank holds its "subtree", the blocks of the
// mask ranks that share its bits above mask (r rounded down to a multiple of mask, and on),
// and exchanges it with rank r ^ mask, which holds the neighbouring subtree; afterwards
// both hold the union. The data exchanged doubles every round; log2(n) rounds in all.
// When n is not a power of two, some partners r ^ mask do not exist. Then the other
// subtree [d, d + mask) is cut short at n, and only the first n - d ranks of this subtree
// found a partner. These "haves" pass the n - d blocks they received on to the others by
// recursive halving inside the subtree: with tmp = mask/2, mask/4, .., 1, a rank that has
// the blocks sends them to rank ^ tmp if that one lacks them. Every rank thus holds its
// whole (clipped) subtree after every round, and the next round proceeds as usual.
// Messages are contiguous runs of blocks, cut into pieces of about pieceElems. Receives are
// chained one message after the other, so that "the last receive so far is done" means
// every block received so far is in place: each send waits for that and for the copy of
// the rank's own block, while a forwarded run waits piece by piece for its own arrival.
void buildRecursiveDoublingAllGather(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    out->add(makeStep(StepKind::kCopy, -1, at(BufferId::kSend, 0), at(BufferId::kRecv, 0), count));
    return;
  }
  // Blocks [b0, b1) as elements [b0*count, b1*count), cut into pieces.
  auto split = [&](int b0, int b1, std::vector<std::pair<size_t, size_t>>* ps) {
    ps->clear();
    const size_t begin = static_cast<size_t>(b0) * count;
    const size_t elems = static_cast<size_t>(b1 - b0) * count;
    const size_t pieces = piecesFor(elems, a.pieceElems);
    for (size_t p = 0; p < pieces; ++p) {
      const size_t pb = partStart(elems, pieces, p), pe = partStart(elems, pieces, p + 1);
      if (pe > pb) ps->push_back({begin + pb, pe - pb});
    }
  };
  std::vector<std::pair<size_t, size_t>> ps;
  const size_t pieces = piecesFor(count, a.pieceElems);
  int32_t copied = -1;
  for (size_t p = 0; p < pieces; ++p) {
    const size_t pb = partStart(count, pieces, p), pe = partStart(count, pieces, p + 1);
    if (pe > pb)
      copied =
          out->add(makeStep(StepKind::kCopy, -1, at(BufferId::kSend, pb),
                            at(BufferId::kRecv, static_cast<size_t>(r) * count + pb), pe - pb));
  }
  int32_t lastRecv = -1;  // receives are chained: this one done means all done
  auto receive = [&](int peer, int b0, int b1, std::vector<int32_t>* steps) {
    split(b0, b1, &ps);
    steps->clear();
    for (const auto& [off, len] : ps) {
      Step s = makeStep(StepKind::kRecv, peer, {}, at(BufferId::kRecv, off), len);
      if (steps->empty()) addDep(&s, lastRecv);
      steps->push_back(out->add(s));
    }
    if (!steps->empty()) lastRecv = steps->back();
  };
  // Sends blocks [b0, b1); piece k waits for dep0, dep1 and pieceDeps[k] if given.
  auto send = [&](int peer, int b0, int b1, int32_t dep0, int32_t dep1,
                  const std::vector<int32_t>* pieceDeps) {
    split(b0, b1, &ps);
    for (size_t k = 0; k < ps.size(); ++k) {
      Step s = makeStep(StepKind::kSend, peer, at(BufferId::kRecv, ps[k].first), {}, ps[k].second);
      addDep(&s, dep0);
      addDep(&s, dep1);
      if (pieceDeps) addDep(&s, (*pieceDeps)[k]);
      out->add(s);
    }
  };

  std::vector<int32_t> got;
  for (int mask = 1; mask < n; mask <<= 1) {
    const int myRoot = r & ~(mask - 1), dst = r ^ mask, dstRoot = dst & ~(mask - 1);
    got.clear();
    if (dst < n) {
      // This rank's subtree: its own block and everything received so far.
      send(dst, myRoot, std::min(myRoot + mask, n), copied, lastRecv, nullptr);
      receive(dst, dstRoot, std::min(dstRoot + mask, n), &got);
    }
    if (dstRoot < n && dstRoot + mask > n) {
      // The other subtree is incomplete: the first `have` ranks of this subtree got its
      // blocks [dstRoot, n) above; halve them out to the rest.
      const int have = n - dstRoot;
      for (int tmp = mask >> 1; tmp > 0; tmp >>= 1) {
        const int d = r ^ tmp, treeRoot = r & ~(2 * tmp - 1);
        if (d > r && r < treeRoot + have && d >= treeRoot + have) {
          send(d, dstRoot, n, -1, -1, &got);
        } else if (d < r && d < treeRoot + have && r >= treeRoot + have) {
          receive(d, dstRoot, n, &got);
        }
      }
    }
  }
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
double rdAllReduceCost(const CostModel& m, double S) {
  Pipe p(m);
  foldRounds(m, S, &p);
  int rounds = 0;
  for (int d = 1; d < pow2Below(m.n); d *= 2, ++rounds) p.round(S, m.xorCrossing(d), true);
  // Rounds alternate between the output and scratch, ending in the output; where the input
  // is the output (in place, or a folded rank's) the first round writes scratch, so an odd
  // count ends with a copy (recursive_doubling.cc).
  if (rounds % 2 && (m.inPlace || pow2Below(m.n) != m.n)) p.fill += m.copy(S);
  return p.total();
}
double rdAllGatherCost(const CostModel& m, double b) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(b * d, m.xorCrossing(d), false);
  return p.total() + m.copy(b);
}

}  // namespace

void appendRecursiveDoublingAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"recursive_doubling", Collective::kAllReduce,
                    "recursive doubling: log2(n) rounds exchanging the whole vector with rank "
                    "^ 2^i, non-powers of two folded in first (MPICH; Thakur, Rabenseifner & "
                    "Gropp 2005); for short vectors",
                    buildRecursiveDoublingAllReduce, nullptr, rdAllReduceCost});
  table->push_back({"recursive_doubling", Collective::kAllGather,
                    "recursive doubling: log2(n) rounds exchanging doubling runs of blocks with "
                    "rank ^ 2^i, MPICH's missing-subtree handling for any n (Thakur, "
                    "Rabenseifner & Gropp 2005); for short vectors",
                    buildRecursiveDoublingAllGather, nullptr, rdAllGatherCost});
}

}  // namespace braid
