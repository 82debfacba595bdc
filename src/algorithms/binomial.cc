// Tree collectives rooted at any rank: binomial (radix 2) and k-nomial (radix 4) broadcast
// and reduce.
#include <algorithm>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

constexpr int kKnomialRadix = 4;

// One rank's place in the k-nomial tree over ranks relabelled relative to the root
// (vrank = (rank - root) mod n, so the root is vrank 0).
struct TreeNode {
  int parent = -1;            // vrank; -1 at the root
  std::vector<int> children;  // vranks, largest subtree first
};

// vrank's parent clears vrank's lowest nonzero base-`radix` digit; its children add one
// nonzero digit below that one. Radix 2 gives the binomial tree.
TreeNode knomialNode(int vrank, int n, int radix) {
  TreeNode t;
  int64_t span = 1;
  while (span < n) {
    const int64_t digit = (vrank / span) % radix;
    if (digit != 0) {
      t.parent = static_cast<int>(vrank - digit * span);
      break;
    }
    span *= radix;
  }
  for (int64_t level = span / radix; level >= 1; level /= radix)
    for (int64_t m = 1; m < radix; ++m)
      if (vrank + m * level < n) t.children.push_back(static_cast<int>(vrank + m * level));
  return t;
}

// Pieces of about pieceElems elements, so a rank forwards piece p while piece p+1 arrives.
size_t pieceCount(const CollArgs& a) {
  return std::max<size_t>(1, (a.count + a.pieceElems - 1) / a.pieceElems);
}

// k-nomial tree broadcast (binomial at radix 2: the MPICH/Open MPI short-message broadcast,
// after Bruck & Ho's and Barnett et al.'s analyses; k-nomial as in UCC's knomial bcast).
//
// Ranks are relabelled so the root is vrank 0. Step by step, per piece of the vector:
//   1. The root copies its send buffer into its receive buffer (a no-op in place).
//   2. Every other rank receives the piece from its parent into its receive buffer.
//   3. It then forwards the piece to each child, largest subtree first, so the deepest
//      branch starts earliest. The root sends straight from its send buffer.
// Depth is ceil(log_radix n); pieces pipeline down the tree, so a large vector costs about
// one vector time per level's fan-out rather than per level.
void buildTreeBroadcast(const CollArgs& a, int radix, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks;
  if (a.count == 0) return;
  const BufRef rootSrc{BufferId::kSend, 0}, all{BufferId::kRecv, 0};
  if (n == 1) {
    out->add(copyStep(rootSrc, all, a.count));
    return;
  }
  const int vrank = (a.rank - a.root + n) % n;
  auto phys = [&](int v) { return (v + a.root) % n; };
  const TreeNode node = knomialNode(vrank, n, radix);
  if (vrank == 0) out->add(copyStep(rootSrc, all, a.count));
  const size_t pieces = pieceCount(a);
  for (size_t p = 0; p < pieces; ++p) {
    const size_t b = partStart(a.count, pieces, p), len = partStart(a.count, pieces, p + 1) - b;
    int32_t got = -1;
    if (vrank != 0) got = out->add(recvStep(phys(node.parent), {BufferId::kRecv, b}, len));
    const BufRef src{vrank == 0 ? BufferId::kSend : BufferId::kRecv, b};
    for (int child : node.children) out->add(sendStep(phys(child), src, len, got));
  }
}

// k-nomial tree reduce (binomial at radix 2: MPICH's MPIR_Reduce_intra_binomial, the
// reverse of the broadcast tree; Rabenseifner's survey calls it the "binomial reduce").
//
// Ranks are relabelled so the root is vrank 0. Per piece of the vector:
//   1. Each rank combines its children's partial results, smallest subtree first (they
//      finish first), into an accumulator: the root's receive buffer on the root, scratch
//      elsewhere (the receive buffer may be null off root). The first combination reads the
//      rank's own send buffer, later ones the accumulator.
//   2. A non-root rank then sends the accumulator (a leaf: its send buffer) to its parent.
// For AVG the root's last combination of each piece divides by nranks, exactly once.
void buildTreeReduce(const CollArgs& a, int radix, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks;
  if (a.count == 0) return;
  const int divisor = a.op == braidAvg ? n : 1;
  if (n == 1) {
    Step copy = copyStep({BufferId::kSend, 0}, {BufferId::kRecv, 0}, a.count);
    copy.divisor = divisor;
    out->add(copy);
    return;
  }
  const int vrank = (a.rank - a.root + n) % n;
  auto phys = [&](int v) { return (v + a.root) % n; };
  TreeNode node = knomialNode(vrank, n, radix);
  std::reverse(node.children.begin(), node.children.end());
  const BufferId acc = vrank == 0 ? BufferId::kRecv : BufferId::kScratch;
  if (vrank != 0 && !node.children.empty()) out->scratchElems = a.count;
  const size_t pieces = pieceCount(a);
  for (size_t p = 0; p < pieces; ++p) {
    const size_t b = partStart(a.count, pieces, p), len = partStart(a.count, pieces, p + 1) - b;
    int32_t last = -1;
    for (size_t i = 0; i < node.children.size(); ++i) {
      Step s;
      s.kind = StepKind::kRecvReduce;
      s.peer = phys(node.children[i]);
      s.src = {last < 0 ? BufferId::kSend : acc, b};
      s.dst = {acc, b};
      s.count = len;
      s.deps[0] = last;
      if (vrank == 0 && i + 1 == node.children.size()) s.divisor = divisor;
      last = out->add(s);
    }
    if (vrank != 0)
      out->add(sendStep(phys(node.parent), {last < 0 ? BufferId::kSend : acc, b}, len, last));
  }
}

void buildBinomialBroadcast(const CollArgs& a, Schedule* out) { buildTreeBroadcast(a, 2, out); }
void buildBinomialReduce(const CollArgs& a, Schedule* out) { buildTreeReduce(a, 2, out); }
void buildKnomialBroadcast(const CollArgs& a, Schedule* out) {
  buildTreeBroadcast(a, kKnomialRadix, out);
}
void buildKnomialReduce(const CollArgs& a, Schedule* out) {
  buildTreeReduce(a, kKnomialRadix, out);
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// Binomial and k-nomial trees rooted at rank 0 (the root's place does not change the cost
// on a uniform layout; binomial.cc): from the largest level down, every rank holding the data
// (a multiple of level x radix) serves its radix-1 children at level distances, one after
// the other from one port.
double knomialCost(const CostModel& m, double S, int radix, bool reduce) {
  Pipe p(m);
  int top = 1;
  while (static_cast<long long>(top) * radix < m.n) top *= radix;
  for (int lev = top; lev >= 1; lev /= radix) {
    const Crossing c =
        m.crossing([&](int r) { return r % (lev * radix) == 0 && r + lev < m.n ? r + lev : -1; });
    const int children = std::min(radix - 1, (m.n - 1) / lev);
    p.round(S, c, reduce, children);
    p.fill -= (children - 1) * m.link(c).latency_us;  // the children's latencies overlap
  }
  return p.total();
}
double binomialBroadcastCost(const CostModel& m, double S) { return knomialCost(m, S, 2, false); }
double binomialReduceCost(const CostModel& m, double S) { return knomialCost(m, S, 2, true); }
double knomialBroadcastCost(const CostModel& m, double S) { return knomialCost(m, S, 4, false); }
double knomialReduceCost(const CostModel& m, double S) { return knomialCost(m, S, 4, true); }

}  // namespace

void appendBinomialAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"binomial", Collective::kBroadcast,
                    "binomial tree from the root, pieces pipelined down log2(n) levels (MPICH "
                    "binomial bcast; Barnett et al. 1994)",
                    buildBinomialBroadcast, nullptr, binomialBroadcastCost});
  table->push_back({"binomial", Collective::kReduce,
                    "binomial tree into the root, smallest subtree first, pieces pipelined "
                    "(MPICH binomial reduce; Rabenseifner 2004)",
                    buildBinomialReduce, nullptr, binomialReduceCost});
  table->push_back({"knomial", Collective::kBroadcast,
                    "radix-4 k-nomial tree from the root, log4(n) levels, pieces pipelined "
                    "(UCC knomial bcast)",
                    buildKnomialBroadcast, nullptr, knomialBroadcastCost});
  table->push_back({"knomial", Collective::kReduce,
                    "radix-4 k-nomial tree into the root, log4(n) levels, pieces pipelined "
                    "(UCC knomial reduce)",
                    buildKnomialReduce, nullptr, knomialReduceCost});
}

}  // namespace braid
