// Double binary tree (Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth
// broadcast, reduction and scan", Parallel Computing 2009; the trees NCCL 2.4 builds in
// src/graph/trees.cc, ncclGetBtree / ncclGetDtree).
//
// One binary tree caps a reduction or broadcast at half the link bandwidth, because its
// inner nodes send (or receive) twice what the leaves do and the leaves' outgoing links sit
// idle. Two trees fix that: the second is the first mirrored (even n) or shifted by one
// (odd n), so nearly every rank is an inner node in one tree and a leaf in the other. Each
// tree carries half of the data, so every rank sends and receives about the vector's size
// per direction, and each half is cut into pieces of about pieceElems that flow through
// the tree one behind the other.
//
// Tree 0 on labels 0..n-1 (NCCL's ncclGetBtree): label 0 is the root and has one child,
// the largest power of two below n; a label v whose lowest set bit is b has children
// v - b/2 and, if it exists, the first of v + b/2, v + b/4, ... that is below n. For 14:
/*      0---------------8
                 ______/ \______
                4               12
              /   \            /  \
            2       6       10     \
           / \     / \     /  \     \
          1   3   5   7   9   11    13      */
// Tree 1 is tree 0 on labels n-1-v (even n, root n-1) or (v-1) mod n (odd n, root 1).
// All-reduce uses NCCL's labels (label = rank). Reduce and broadcast start at label 0 =
// root, and in tree 1 swap the labels of root and tree 1's root, so both trees hang from
// the root; the swapped rank was a leaf of tree 0, so the two trees stay complementary.
//
// Messages between two ranks of both trees share one connection and must be posted in the
// same order at both ends. Each step gets a time in an ideal pipeline (piece k leaves a
// node of depth d going up at k + H - d, going down at k + H + 1 + d, H a bound on the
// depth) and every rank posts its steps in (time, tree, piece) order: both ends of a link
// compute the same order, every step's inputs come from earlier times, so no order of
// completions can deadlock, and the trees' pieces interleave on a shared link the way
// they flow.
#include <algorithm>
#include <tuple>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// NCCL's ncclGetBtree on labels 0..n-1: parent and up to two children, -1 for none.
void btree(int n, int v, int* up, int* down0, int* down1) {
  int bit = 1;
  while (bit < n && !(bit & v)) bit <<= 1;
  *down0 = -1;
  if (v == 0) {
    *up = -1;
    *down1 = n > 1 ? bit >> 1 : -1;
    return;
  }
  *up = (v ^ bit) | (bit << 1);
  if (*up >= n) *up = v ^ bit;
  int low = bit >> 1;
  if (low > 0) *down0 = v - low;
  while (low > 0 && v + low >= n) low >>= 1;
  *down1 = low > 0 ? v + low : -1;
}

// Tree t (0 or 1) of NCCL's double binary tree (ncclGetDtree) on labels.
void dtree(int n, int t, int v, int* up, int* down0, int* down1) {
  if (t == 0) {
    btree(n, v, up, down0, down1);
    return;
  }
  const bool shift = n % 2 == 1;
  btree(n, shift ? (v - 1 + n) % n : n - 1 - v, up, down0, down1);
  for (int* x : {up, down0, down1})
    if (*x >= 0) *x = shift ? (*x + 1) % n : n - 1 - *x;
}

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

// The two trees over ranks: labels relative to the root, plus, when reroot is set, tree
// 1's labels of the root and of tree 1's own root swapped, so that both trees hang from
// the root.
class DoubleTree {
 public:
  DoubleTree(int n, int root, bool reroot)
      : n_(n), root_(root), root1_(n % 2 == 1 ? 1 : n - 1), reroot_(reroot) {}

  struct Node {
    int parent = -1;
    int kids[2] = {-1, -1};
    int nkids = 0;
    int depth = 0;
    int parentDepth = -1;
  };

  Node node(int t, int rank) const {
    Node nd;
    const int v = label(t, rank);
    int up, d0, d1;
    dtree(n_, t, v, &up, &d0, &d1);
    nd.parent = up < 0 ? -1 : rankOf(t, up);
    for (int d : {d0, d1})
      if (d >= 0) nd.kids[nd.nkids++] = rankOf(t, d);
    nd.depth = depthOf(t, v);
    nd.parentDepth = up < 0 ? -1 : nd.depth - 1;
    return nd;
  }

 private:
  int swap1(int t, int v) const {
    if (t != 1 || !reroot_) return v;
    return v == 0 ? root1_ : v == root1_ ? 0 : v;
  }
  int label(int t, int rank) const { return swap1(t, (rank - root_ + n_) % n_); }
  int rankOf(int t, int v) const { return (swap1(t, v) + root_) % n_; }
  int depthOf(int t, int v) const {
    int d = 0, up, d0, d1;
    for (dtree(n_, t, v, &up, &d0, &d1); up >= 0; dtree(n_, t, up, &up, &d0, &d1)) ++d;
    return d;
  }

  int n_, root_, root1_;
  bool reroot_;
};

// What a rank does for one piece of one tree, in the order it is posted.
enum class Event : uint8_t { kRecvKid0, kRecvKid1, kSendUp, kRecvDown, kSendDown, kCopy };

struct Posting {
  int64_t time;
  int tree;
  size_t piece;
  Event event;
  bool operator<(const Posting& o) const {
    return std::tie(time, tree, piece, event) < std::tie(o.time, o.tree, o.piece, o.event);
  }
};

// Piece k of tree t's half of the vector: [begin, begin + len).
struct Halves {
  size_t count, pieces;
  void piece(int t, size_t k, size_t* begin, size_t* len) const {
    const size_t hb = partStart(count, 2, t), he = partStart(count, 2, t + 1);
    const size_t pb = partStart(he - hb, pieces, k), pe = partStart(he - hb, pieces, k + 1);
    *begin = hb + pb;
    *len = pe - pb;
  }
};

enum class Mode { kAllReduce, kReduce, kBroadcast };

// Builds one rank's schedule for the three tree collectives.
//   Up (all-reduce, reduce), per piece: receive-reduce the first child's partial sum onto
//   this rank's input, then the second child's onto that, then send the result to the
//   parent (a leaf sends its input). At the root the last of these reductions completes
//   the piece (and divides for AVG).
//   Down (all-reduce, broadcast), per piece: receive the piece from the parent into the
//   receive buffer (the root has it already), then send it to each child.
// All-reduce accumulates in the receive buffer, where the final value lands anyway; a
// non-root rank of a reduce has no receive buffer and accumulates in scratch.
void buildTree(const CollArgs& a, Mode mode, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t count = a.count;
  if (count == 0) return;
  if (n == 1) {
    out->add(makeStep(StepKind::kCopy, -1, {BufferId::kSend, 0}, {BufferId::kRecv, 0}, count));
    return;
  }
  const bool up = mode != Mode::kBroadcast, down = mode != Mode::kReduce;
  const DoubleTree trees(n, mode == Mode::kAllReduce ? 0 : a.root, mode != Mode::kAllReduce);
  const DoubleTree::Node nodes[2] = {trees.node(0, r), trees.node(1, r)};
  const Halves halves{count, piecesFor((count + 1) / 2, a.pieceElems)};
  const int64_t H = ceilLog2(n);  // no node is deeper

  // Where partial sums accumulate.
  const BufferId acc =
      (mode == Mode::kReduce && r != a.root) ? BufferId::kScratch : BufferId::kRecv;
  if (acc == BufferId::kScratch && (nodes[0].nkids > 0 || nodes[1].nkids > 0))
    out->scratchElems = count;

  std::vector<Posting> posts;
  for (int t = 0; t < 2; ++t) {
    const DoubleTree::Node& nd = nodes[t];
    for (size_t k = 0; k < halves.pieces; ++k) {
      const int64_t base = static_cast<int64_t>(k);
      if (up) {
        for (int c = 0; c < nd.nkids; ++c)
          posts.push_back(
              {base + H - (nd.depth + 1), t, k, c == 0 ? Event::kRecvKid0 : Event::kRecvKid1});
        if (nd.parent >= 0) posts.push_back({base + H - nd.depth, t, k, Event::kSendUp});
      }
      const int64_t downBase = up ? base + H + 1 : base;
      if (down) {
        if (nd.parent >= 0) posts.push_back({downBase + nd.parentDepth, t, k, Event::kRecvDown});
        if (nd.nkids > 0) posts.push_back({downBase + nd.depth, t, k, Event::kSendDown});
        if (mode == Mode::kBroadcast && nd.parent < 0)
          posts.push_back({downBase + nd.depth, t, k, Event::kCopy});
      }
    }
  }
  std::sort(posts.begin(), posts.end());

  // Per (tree, piece): the step that last wrote the piece's value, and the send up.
  std::vector<int32_t> lastWrite(2 * halves.pieces, -1), sentUp(2 * halves.pieces, -1);
  std::vector<int32_t> sentDown(2 * halves.pieces * 2, -1);
  for (const Posting& p : posts) {
    const DoubleTree::Node& nd = nodes[p.tree];
    const size_t at = static_cast<size_t>(p.tree) * halves.pieces + p.piece;
    size_t b, len;
    halves.piece(p.tree, p.piece, &b, &len);
    if (len == 0) continue;
    switch (p.event) {
      case Event::kRecvKid0:
      case Event::kRecvKid1: {
        const int c = p.event == Event::kRecvKid0 ? 0 : 1;
        // The first child's sum lands on this rank's input; the second's on that result.
        Step s = makeStep(StepKind::kRecvReduce, nd.kids[c], {c == 0 ? BufferId::kSend : acc, b},
                          {acc, b}, len);
        addDep(&s, lastWrite[at]);
        if (nd.parent < 0 && c == nd.nkids - 1 && a.op == braidAvg) s.divisor = n;
        lastWrite[at] = out->add(s);
        break;
      }
      case Event::kSendUp: {
        Step s = makeStep(StepKind::kSend, nd.parent, {nd.nkids > 0 ? acc : BufferId::kSend, b}, {},
                          len);
        addDep(&s, lastWrite[at]);
        sentUp[at] = out->add(s);
        break;
      }
      case Event::kRecvDown: {
        Step s = makeStep(StepKind::kRecv, nd.parent, {}, {BufferId::kRecv, b}, len);
        addDep(&s, sentUp[at]);  // the partial sum sent up may sit in the same elements
        lastWrite[at] = out->add(s);
        break;
      }
      case Event::kSendDown: {
        // A broadcast root sends its input; everyone else what it holds in recv.
        const bool fromSend = mode == Mode::kBroadcast && nd.parent < 0;
        for (int c = 0; c < nd.nkids; ++c) {
          Step s = makeStep(StepKind::kSend, nd.kids[c],
                            {fromSend ? BufferId::kSend : BufferId::kRecv, b}, {}, len);
          addDep(&s, lastWrite[at]);
          sentDown[2 * at + c] = out->add(s);
        }
        break;
      }
      case Event::kCopy: {
        // The broadcast root's own output, after the sends that read the same elements
        // when the call is in place.
        Step s = makeStep(StepKind::kCopy, -1, {BufferId::kSend, b}, {BufferId::kRecv, b}, len);
        addDep(&s, sentDown[2 * at]);
        addDep(&s, sentDown[2 * at + 1]);
        out->add(s);
        break;
      }
    }
  }
}

// The trees are built over the ring's positions (CollArgs::ring), so that consecutive
// positions, which share a host, form the trees' subtrees and few edges cross hosts.
void buildTreeAllReduceAt(const CollArgs& a, Schedule* out) { buildTree(a, Mode::kAllReduce, out); }
void buildTreeReduceAt(const CollArgs& a, Schedule* out) { buildTree(a, Mode::kReduce, out); }
void buildTreeBroadcastAt(const CollArgs& a, Schedule* out) { buildTree(a, Mode::kBroadcast, out); }
void buildTreeAllReduce(const CollArgs& a, Schedule* out) {
  buildOnRing(buildTreeAllReduceAt, a, out);
}
void buildTreeReduce(const CollArgs& a, Schedule* out) { buildOnRing(buildTreeReduceAt, a, out); }
void buildTreeBroadcast(const CollArgs& a, Schedule* out) {
  buildOnRing(buildTreeBroadcastAt, a, out);
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// Double binary tree over ring positions (Sanders, Speck & Träff 2009; tree.cc): each tree
// carries half the vector; a rank is inner in one tree (two children) and a leaf in the
// other. Per piece index a rank sends 4 pieces in all-reduce (up once in each tree, down to
// two children in one), 2 in broadcast and reduce. A piece's path from a leaf to the root
// crosses about log2(hosts) host boundaries of the tree's depth.
int treeDepthCost(const CostModel& m) { return std::max(1, ceilLog(m.n + 1, 2) - 1); }
Crossing treeCrossingCost(const CostModel& m) {
  Crossing c = m.anyCross(1);
  if (c.cross) c.fraction = std::min(1.0, ceilLog(m.H, 2) / static_cast<double>(treeDepthCost(m)));
  return c;
}
double treeAllReduceCost(const CostModel& m, double S) {
  const Crossing c = treeCrossingCost(m);
  const int d = treeDepthCost(m);
  // Per piece index: four transfers on a rank's port, or on its host's NICs across hosts
  // (the reductions of an inner node's two children run on their own queues).
  const double per = 4 * m.pieceService(S / 2, 1, false);
  return m.chain(S / 2, d, c, per, true) + m.chain(S / 2, d, c, 0, false);
}
double treeBroadcastCost(const CostModel& m, double S) {
  return m.chain(S / 2, treeDepthCost(m), treeCrossingCost(m), 2 * m.pieceService(S / 2, 2, false),
                 false);
}
double treeReduceCost(const CostModel& m, double S) {
  return m.chain(S / 2, treeDepthCost(m), treeCrossingCost(m), 2 * m.pieceService(S / 2, 1, true),
                 true);
}

}  // namespace

void appendTreeAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"tree", Collective::kAllReduce,
                    "double binary tree: each half of the vector is reduced up one of two "
                    "complementary trees and broadcast back down, pipelined in pieces "
                    "(Sanders, Speck & Traff 2009; NCCL 2.4)",
                    buildTreeAllReduce, nullptr, treeAllReduceCost});
  table->push_back({"tree", Collective::kBroadcast,
                    "double binary tree rooted at the root, each tree carrying half of the "
                    "vector, pipelined in pieces (Sanders, Speck & Traff 2009)",
                    buildTreeBroadcast, nullptr, treeBroadcastCost});
  table->push_back({"tree", Collective::kReduce,
                    "double binary tree rooted at the root, each tree reducing half of the "
                    "vector, pipelined in pieces (Sanders, Speck & Traff 2009)",
                    buildTreeReduce, nullptr, treeReduceCost});
}

}  // namespace braid
