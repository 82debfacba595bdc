// Recursive halving and doubling (Rabenseifner's algorithm; Thakur, Rabenseifner & Gropp,
// "Optimization of collective communication operations in MPICH", IJHPCA 2005; MPICH's
// MPIR_Allreduce_intra_reduce_scatter_allgather and
// MPIR_Reduce_scatter_intra_recursive_halving). log2(n) rounds like recursive doubling,
// but each round moves half of what the previous one did, so a rank sends about the
// vector's size in all: latency of a tree, bandwidth close to a ring's.
#include <algorithm>
#include <iterator>
#include <optional>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// One message: its pieces in increasing element order (so also in step order), each
// [begin, end) in the vector's element numbering, with the step that moves it.
struct Piece {
  size_t begin, end;
  int32_t step;
};
using Message = std::vector<Piece>;

// The pieces of elements [begin, end): cut at `cut` if it falls inside, then each part into
// pieces of at most pieceElems. Both ends of a message compute the same pieces.
std::vector<std::pair<size_t, size_t>> split(size_t begin, size_t end, size_t pieceElems,
                                             std::optional<size_t> cut = std::nullopt) {
  std::vector<std::pair<size_t, size_t>> out;
  auto part = [&](size_t b, size_t e) {
    const size_t pieces = piecesFor(e - b, pieceElems);
    for (size_t p = 0; p < pieces; ++p) {
      const size_t pb = b + partStart(e - b, pieces, p), pe = b + partStart(e - b, pieces, p + 1);
      if (pe > pb) out.push_back({pb, pe});
    }
  };
  if (cut && *cut > begin && *cut < end) {
    part(begin, *cut);
    part(*cut, end);
  } else if (end > begin) {
    part(begin, end);
  }
  return out;
}

// The last step of `m` that touches [begin, end), or -1. The message's steps share one
// queue, so that step done means every earlier piece of the message is done too.
int32_t lastTouching(const Message& m, size_t begin, size_t end) {
  if (m.empty() || begin >= end || end <= m.front().begin || begin >= m.back().end) return -1;
  auto it = std::lower_bound(m.begin(), m.end(), end,
                             [](const Piece& p, size_t e) { return p.begin < e; });
  return std::prev(it)->step;
}

struct Layout {
  int p2 = 1, rounds = 0, rem = 0, newrank = -1;
  int realRank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

// Fold of non-power-of-two rank counts, as MPICH does: of the first 2*rem ranks the even
// ones hand their input to the odd one above and sit out; the p2 others are renumbered.
Layout layout(int n, int r) {
  Layout l;
  while (l.p2 * 2 <= n) {
    l.p2 *= 2;
    ++l.rounds;
  }
  l.rem = n - l.p2;
  l.newrank = r < 2 * l.rem ? (r % 2 == 0 ? -1 : r / 2) : r - l.rem;
  return l;
}

// Rabenseifner's all-reduce (Thakur, Rabenseifner & Gropp 2005, section 4.4; MPICH's
// MPIR_Allreduce_intra_reduce_scatter_allgather).
//
// Let p2 be the largest power of two <= n and rem = n - p2.
//   Fold: of the first 2*rem ranks, each even rank sends its whole input to the odd rank
//   above it, which adds it to its own; the even ranks then sit out, and the p2 others are
//   renumbered 0..p2-1.
//   The vector is cut into p2 blocks (partStart, so any count works, even count < p2).
//   Reduce-scatter by recursive halving, mask = 1, 2, .., p2/2: the rank and its partner
//   (new number ^ mask) hold the same run of blocks; the one whose bit is 0 keeps the
//   lower half and sends the upper half, the other the reverse, and each adds the half it
//   receives onto the half it keeps. After log2(p2) rounds each rank holds one block,
//   fully reduced (the last addition divides for AVG).
//   All-gather by recursive doubling, the same rounds backwards (mask = p2/2 .. 1): send
//   the run held so far to the partner and receive its run, the half given away in the
//   matching halving round, into place.
//   Unfold: each odd rank of the first 2*rem sends the result to the even rank below it.
// A rank sends 2(p2-1)/p2 of the vector (plus the fold), in 2 log2(p2) rounds. Everything
// is done in the receive buffer: the halves kept and sent in a round never overlap. Each
// message is cut into pieces of about pieceElems; a piece waits for the last piece of the
// previous round that wrote any of its elements (pieces of one message share a queue).
// An all-gather send waits for the previous all-gather send over its old part (which
// waited for everything before) and the previous receive over its new part, so no step
// needs more than two dependencies.
void buildRhdAllReduce(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    out->add(makeStep(StepKind::kCopy, -1, {BufferId::kSend, 0}, {BufferId::kRecv, 0}, count));
    return;
  }
  const Layout l = layout(n, r);
  const size_t pe = a.pieceElems;
  auto block = [&](int b) { return partStart(count, static_cast<size_t>(l.p2), b); };

  // Sends elements [begin, end) of `buf`; piece deps from the messages in `after`.
  auto sendRun = [&](int peer, BufferId buf, size_t begin, size_t end,
                     std::initializer_list<const Message*> after) {
    Message m;
    for (auto [pb, pe2] : split(begin, end, pe)) {
      Step s = makeStep(StepKind::kSend, peer, {buf, pb}, {}, pe2 - pb);
      for (const Message* x : after) addDep(&s, lastTouching(*x, pb, pe2));
      m.push_back({pb, pe2, out->add(s)});
    }
    return m;
  };

  if (l.newrank < 0) {
    const Message folded = sendRun(r + 1, BufferId::kSend, 0, count, {});
    for (auto [pb, pe2] : split(0, count, pe)) {
      Step s = makeStep(StepKind::kRecv, r + 1, {}, {BufferId::kRecv, pb}, pe2 - pb);
      addDep(&s, lastTouching(folded, pb, pe2));  // in place, the input may still be unsent
      out->add(s);
    }
    return;
  }

  Message wrote;  // the last round's reductions, over the blocks this rank still keeps
  if (r < 2 * l.rem) {
    for (auto [pb, pe2] : split(0, count, pe))
      wrote.push_back({pb, pe2,
                       out->add(makeStep(StepKind::kRecvReduce, r - 1, {BufferId::kSend, pb},
                                         {BufferId::kRecv, pb}, pe2 - pb))});
  }
  BufferId input = r < 2 * l.rem ? BufferId::kRecv : BufferId::kSend;

  // Reduce-scatter by recursive halving.
  std::vector<Message> given(l.rounds);  // per round: the send of the half given away
  int lo = 0, hi = l.p2;
  for (int i = 0; i < l.rounds; ++i) {
    const int mask = 1 << i, peer = l.realRank(l.newrank ^ mask), mid = (lo + hi) / 2;
    const bool lower = (l.newrank & mask) == 0;
    const int keepLo = lower ? lo : mid, keepHi = lower ? mid : hi;
    const int giveLo = lower ? mid : lo, giveHi = lower ? hi : mid;
    given[i] = sendRun(peer, input, block(giveLo), block(giveHi), {&wrote});
    Message reduced;
    for (auto [pb, pe2] : split(block(keepLo), block(keepHi), pe)) {
      Step s = makeStep(StepKind::kRecvReduce, peer, {input, pb}, {BufferId::kRecv, pb}, pe2 - pb);
      addDep(&s, lastTouching(wrote, pb, pe2));
      if (i == l.rounds - 1 && a.op == braidAvg) s.divisor = n;
      reduced.push_back({pb, pe2, out->add(s)});
    }
    wrote = std::move(reduced);
    input = BufferId::kRecv;
    lo = keepLo;
    hi = keepHi;
  }

  // All-gather by recursive doubling, the halving rounds backwards.
  Message lastSend, lastRecv;
  for (int i = l.rounds - 1, mask = l.p2 / 2; mask > 0; --i, mask >>= 1) {
    const int peer = l.realRank(l.newrank ^ mask), len = hi - lo;
    const bool lower = (l.newrank & mask) == 0;
    const int otherLo = lower ? hi : lo - len, otherHi = lower ? hi + len : lo;
    // This run was written by the last reduction (first round) or reached this rank by
    // the previous send's run and the previous receive.
    lastSend = i == l.rounds - 1
                   ? sendRun(peer, BufferId::kRecv, block(lo), block(hi), {&wrote})
                   : sendRun(peer, BufferId::kRecv, block(lo), block(hi), {&lastSend, &lastRecv});
    Message got;
    for (auto [pb, pe2] : split(block(otherLo), block(otherHi), pe)) {
      Step s = makeStep(StepKind::kRecv, peer, {}, {BufferId::kRecv, pb}, pe2 - pb);
      addDep(&s, lastTouching(given[i], pb, pe2));  // the halving round's send of this half
      got.push_back({pb, pe2, out->add(s)});
    }
    lastRecv = std::move(got);
    lo = std::min(lo, otherLo);
    hi = std::max(hi, otherHi);
  }

  if (r < 2 * l.rem) sendRun(r - 1, BufferId::kRecv, 0, count, {&lastSend, &lastRecv});
}

// Reduce-scatter by recursive halving (Thakur, Rabenseifner & Gropp 2005, section 4.3;
// MPICH's MPIR_Reduce_scatter_intra_recursive_halving).
//
// Block b (send[b*count .. (b+1)*count)) belongs to rank b.
//   Fold: with p2 the largest power of two <= n and rem = n - p2, each even rank of the
//   first 2*rem sends its whole input to the odd rank above it, which adds it to its own
//   (in scratch); the p2 remaining ranks are renumbered, new rank i < rem standing for
//   blocks 2i and 2i+1, new rank i >= rem for block i + rem.
//   Halving, mask = p2/2 .. 1: the rank and its partner (new number ^ mask) hold partial
//   sums of the same run of new blocks; the one whose bit is 0 keeps the lower half and
//   sends the upper, the other the reverse; each adds what it receives onto what it keeps.
//   Going from the high bit down leaves new rank i with exactly its own new block.
//   The last round reduces straight into the receive buffer (dividing for AVG); a rank
//   that stands for two blocks reduces its even partner's block into scratch and sends it
//   to that rank, which receives it into its receive buffer.
// A rank sends (p2-1)/p2 of the input (plus the fold) in log2(p2) rounds. Partial sums
// live in scratch at their element offsets in the input, since the receive buffer holds
// only one block (and in place it is part of the input, which is read until the end).
void buildRhdReduceScatter(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    out->add(makeStep(StepKind::kCopy, -1, {BufferId::kSend, 0}, {BufferId::kRecv, 0}, count));
    return;
  }
  const Layout l = layout(n, r);
  const size_t pe = a.pieceElems;
  const size_t total = count * static_cast<size_t>(n);
  const size_t own = count * static_cast<size_t>(r);  // where this rank's block starts
  // First element of new block j (blocks 2j and 2j+1 for j < rem, else block j + rem).
  auto start = [&](int j) { return count * static_cast<size_t>(j < l.rem ? 2 * j : j + l.rem); };
  // In the last round the message to new rank j < rem is cut between its two blocks.
  auto lastCut = [&](int j) -> std::optional<size_t> {
    if (j >= l.rem) return std::nullopt;
    return count * static_cast<size_t>(2 * j + 1);
  };

  auto sendRun = [&](int peer, BufferId buf, size_t base, size_t begin, size_t end,
                     std::optional<size_t> cut, const Message& after) {
    Message m;
    for (auto [pb, pe2] : split(begin, end, pe, cut)) {
      Step s = makeStep(StepKind::kSend, peer, {buf, pb - base}, {}, pe2 - pb);
      addDep(&s, lastTouching(after, pb, pe2));
      m.push_back({pb, pe2, out->add(s)});
    }
    return m;
  };

  if (l.newrank < 0) {
    const Message folded = sendRun(r + 1, BufferId::kSend, 0, 0, total, std::nullopt, {});
    for (auto [pb, pe2] : split(own, own + count, pe)) {
      Step s = makeStep(StepKind::kRecv, r + 1, {}, {BufferId::kRecv, pb - own}, pe2 - pb);
      addDep(&s, lastTouching(folded, pb, pe2));  // in place, the input may still be unsent
      out->add(s);
    }
    return;
  }

  // Scratch holds partial sums at their input offsets minus `base`: the whole vector after
  // a fold, else the half kept in the first round.
  Message wrote;
  size_t base = 0;
  BufferId input = BufferId::kSend;
  if (r < 2 * l.rem) {
    out->scratchElems = total;
    for (auto [pb, pe2] : split(0, total, pe))
      wrote.push_back({pb, pe2,
                       out->add(makeStep(StepKind::kRecvReduce, r - 1, {BufferId::kSend, pb},
                                         {BufferId::kScratch, pb}, pe2 - pb))});
    input = BufferId::kScratch;
  } else if (l.rounds > 1) {
    const int half = l.p2 / 2, lo = l.newrank & half ? half : 0;
    base = start(lo);
    out->scratchElems = start(lo + half) - base;
  }
  size_t inputBase = 0;  // the send buffer, and scratch after a fold, start at element 0

  int lo = 0, hi = l.p2;
  for (int mask = l.p2 / 2; mask > 0; mask >>= 1) {
    const int peer = l.realRank(l.newrank ^ mask), mid = lo + mask;
    const bool lower = (l.newrank & mask) == 0, last = mask == 1;
    const int keepLo = lower ? lo : mid, keepHi = lower ? mid : hi;
    const int giveLo = lower ? mid : lo, giveHi = lower ? hi : mid;
    sendRun(peer, input, inputBase, start(giveLo), start(giveHi),
            last ? lastCut(l.newrank ^ mask) : std::nullopt, wrote);
    Message reduced;
    for (auto [pb, pe2] :
         split(start(keepLo), start(keepHi), pe, last ? lastCut(l.newrank) : std::nullopt)) {
      // The final sums go to the receive buffer, or for a folded partner's block to
      // scratch, from where they are sent on.
      const bool mine = last && pb >= own && pb < own + count;
      const BufRef dst =
          mine ? BufRef{BufferId::kRecv, pb - own} : BufRef{BufferId::kScratch, pb - base};
      Step s = makeStep(StepKind::kRecvReduce, peer, {input, pb - inputBase}, dst, pe2 - pb);
      addDep(&s, lastTouching(wrote, pb, pe2));
      if (last && a.op == braidAvg) s.divisor = n;
      reduced.push_back({pb, pe2, out->add(s)});
    }
    wrote = std::move(reduced);
    if (input == BufferId::kSend) {
      input = BufferId::kScratch;
      inputBase = base;
    }
    lo = keepLo;
    hi = keepHi;
  }

  if (r < 2 * l.rem) sendRun(r - 1, BufferId::kScratch, 0, own - count, own, std::nullopt, wrote);
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// Rabenseifner: reduce-scatter by recursive halving from the nearest partner out (mask 1, 2,
// ..), then all-gather by recursive doubling back (rhd.cc): the far rounds carry the least.
double rhdAllReduceCost(const CostModel& m, double S) {
  Pipe p(m);
  foldRounds(m, S, &p);
  const int p2 = pow2Below(m.n);
  double bytes = S;
  for (int d = 1; d < p2; d *= 2) {
    bytes /= 2;
    p.round(bytes, m.xorCrossing(d), true);
  }
  for (int d = p2 / 2; d >= 1; d /= 2) {
    p.round(bytes, m.xorCrossing(d), false);
    bytes *= 2;
  }
  return p.total();
}
double rhdReduceScatterCost(const CostModel& m, double b) {
  const int p2 = pow2Below(m.n);
  double bytes = b * m.n;
  Pipe p(m);
  if (p2 != m.n) p.round(bytes, m.addCrossing(p2), true).round(b, m.addCrossing(p2), false);
  for (int d = p2 / 2; d >= 1; d /= 2) {
    bytes /= 2;
    p.round(bytes, m.xorCrossing(d), true);
  }
  return p.total();
}

}  // namespace

void appendRhdAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"rhd", Collective::kAllReduce,
                    "Rabenseifner: recursive-halving reduce-scatter then recursive-doubling "
                    "all-gather, non-powers of two folded in first (MPICH; Thakur, "
                    "Rabenseifner & Gropp 2005)",
                    buildRhdAllReduce, nullptr, rhdAllReduceCost});
  table->push_back({"rhd", Collective::kReduceScatter,
                    "recursive halving, non-powers of two folded in first (MPICH; Thakur, "
                    "Rabenseifner & Gropp 2005)",
                    buildRhdReduceScatter, nullptr, rhdReduceScatterCost});
}

}  // namespace braid
