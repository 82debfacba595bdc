// Closed forms of the algorithms' schedules (see each row's builder in src/algorithms for
// the rounds), in the alpha-beta-gamma model of Thakur, Rabenseifner & Gropp, "Optimization
// of collective communication operations in MPICH" (IJHPCA 2005), extended with the layout:
// a round is as slow as its slowest message, a message between hosts goes at the NIC's
// bandwidth divided among the flows of its host that cross at the same time, and each piece
// (the communicator's chunk) pays the per-step overhead.
#include "tuning/cost_model.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "base/config.h"
#include "base/error.h"
#include "tuning/simulate.h"

namespace braid::tuning {

size_t callBytes(Collective coll, size_t count, size_t elemSize, int nranks) {
  const size_t b = count * elemSize;
  switch (coll) {
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
    case Collective::kGather:
    case Collective::kScatter:
      return b * static_cast<size_t>(nranks);
    default:
      return b;
  }
}

namespace {

int ceilLog(int n, int radix) {
  int k = 0;
  for (long long span = 1; span < n; span *= radix) ++k;
  return k;
}

// Whether a round crosses hosts and how many of one host's ranks then share its NICs.
struct Crossing {
  bool cross = false;
  int flows = 1;
  // Share of a piece's hops that cross: 1 when every rank's partner is across (recursive
  // doubling's far rounds); on a ring, the crossing edges over n, since a piece travels all
  // the way round.
  double fraction = 0;
};

struct Model {
  const Fabric& f;
  int n, H, L;
  double chunk;
  std::vector<int> pos, ring;  // ring position of each rank, rank at each position
  bool inPlace = false;        // the call's in-place form (CollArgs::inPlace)

  explicit Model(const Fabric& fab)
      : f(fab),
        n(fab.nranks()),
        H(fab.nhosts()),
        L(fab.ranksPerHost()),
        chunk(static_cast<double>(std::max<size_t>(fab.chunk_bytes, 1))) {
    ring = fab.ring;
    if (static_cast<int>(ring.size()) != n) {
      ring.resize(n);
      for (int i = 0; i < n; ++i) ring[i] = i;
    }
    pos.assign(n, 0);
    for (int i = 0; i < n; ++i) pos[ring[i]] = i;
  }

  // Every rank r sending to partner(r): does any pair cross hosts, and at most how many
  // ranks of one host send across at once.
  Crossing crossing(const std::function<int(int)>& partner) const {
    Crossing c;
    if (H <= 1) return c;
    std::vector<int> per(H, 0);
    for (int r = 0; r < n; ++r) {
      const int p = partner(r);
      if (p < 0 || p >= n || f.hostOf[p] == f.hostOf[r]) continue;
      c.cross = true;
      c.fraction = 1;
      c.flows = std::max(c.flows, ++per[f.hostOf[r]]);
    }
    return c;
  }
  Crossing ringCrossing() const {
    Crossing c = crossing([&](int r) { return ring[(pos[r] + 1) % n]; });
    int edges = 0;
    for (int r = 0; r < n; ++r) edges += f.hostOf[r] != f.hostOf[ring[(pos[r] + 1) % n]];
    c.fraction = static_cast<double>(edges) / n;
    return c;
  }
  // Rank order partners at distance d: r XOR d, or r + d (mod n).
  Crossing xorCrossing(int d) const {
    return crossing([&](int r) { return (r ^ d) < n ? (r ^ d) : -1; });
  }
  Crossing addCrossing(int d) const {
    return crossing([&](int r) { return (r + d) % n; });
  }
  // A round on whose slowest message between hosts `flows` flows per host share the NICs.
  const LinkCost& link(const Crossing& c) const { return c.cross ? f.inter : f.intra; }
  double bytesPerUs(const Crossing& c) const {
    if (!c.cross) return f.intra.bw_gbs * 1e3;
    const double share = std::min(1.0, static_cast<double>(f.nicsPerHost) / std::max(c.flows, 1));
    return std::min(f.inter.bw_gbs * share, f.intra.bw_gbs) * 1e3;
  }
  // One piece of `bytes` in a round: its transfer and step overhead, and with `reduce` its
  // reduction (the receive queue of a connection runs one step at a time).
  double pieceTime(double bytes, const Crossing& c, bool reduce) const {
    double t = f.step_overhead_us + bytes / bytesPerUs(c);
    if (reduce) t += bytes / (f.reduce_gbs * 1e3);
    return t;
  }
  // A pipelined chain (or tree) `hops` deep carrying `bytes` in pieces: the first piece
  // goes down the whole depth (crossing hosts on c.fraction of the hops), then one piece per
  // `perPiece` (the busiest rank's service time for one piece index).
  double chain(double bytes, int hops, const Crossing& c, double perPiece, bool reduce) const {
    if (hops <= 0) return 0;
    const double pieces = std::max(1.0, std::ceil(bytes / chunk));
    const double q = bytes / pieces, o = f.step_overhead_us;
    const double red = reduce ? q / (f.reduce_gbs * 1e3) : 0;
    const double fr = c.cross ? c.fraction : 0;
    const double hop = (1 - fr) * (f.intra.latency_us + q / bytesPerUs(Crossing{})) +
                       fr * (f.inter.latency_us + q / bytesPerUs(c)) + o + red;
    return hops * hop + (pieces - 1) * perPiece;
  }
  // One piece's transfer on the slower of a rank's port and (across hosts) its host's NICs
  // shared by `flows`, plus the step overhead.
  double pieceService(double bytes, int flows, bool reduce) const {
    const double pieces = std::max(1.0, std::ceil(bytes / chunk));
    const double q = bytes / pieces;
    double x = q / bytesPerUs(Crossing{}) + f.intra_send_overhead_us;
    if (H > 1) x = std::max(x, q / bytesPerUs(anyCross(flows)) + f.inter_step_overhead_us);
    return x + f.step_overhead_us + (reduce ? q / (f.reduce_gbs * 1e3) : 0);
  }
  double copy(double bytes) const { return bytes / (f.copy_gbs * 1e3) + f.step_overhead_us; }
  Crossing anyCross(int flows) const {
    Crossing c;
    c.cross = H > 1;
    c.fraction = c.cross ? 1 : 0;
    c.flows = c.cross ? std::max(1, flows) : 1;
    return c;
  }
};

// Rounds in which every rank sends `bytes` (cut into pieces of the chunk) to a partner and
// receives as much, as the simulator plays them (simulate.cc). Steps carry their pieces'
// dependencies, not the round's, so piece k of a round may start once piece k of the round
// before has arrived: rounds overlap. Two bounds, and the time is the larger:
//   fill: one piece through every round: per round its latency, transfer, step overhead and
//     reduction, along the hops it takes (on a ring, crossing hosts for `fraction` of them);
//   busy: the busiest resource (a rank's shared-memory port, or its host's NICs) serving
//     every piece of every round that uses it (a queue takes transfer + overhead per piece,
//     or overhead + reduction if that is longer), then the last round's latency.
// With one piece per round and one host this is the plain sum of rounds.
struct Pipe {
  const Model& m;
  double fill = 0, busy[2] = {0, 0}, tail = 0;  // busy: within a host, across hosts
  explicit Pipe(const Model& model) : m(model) {}
  Pipe& round(double bytes, const Crossing& c, bool reduce, int times = 1) {
    if (times <= 0) return *this;
    const double pieces = std::max(1.0, std::ceil(bytes / m.chunk));
    const double q = bytes / pieces, o = m.f.step_overhead_us;
    const double red = reduce ? q / (m.f.reduce_gbs * 1e3) : 0;
    const double xi = q / m.bytesPerUs(Crossing{}), xc = q / m.bytesPerUs(c);
    const double f = c.cross ? c.fraction : 0;
    fill +=
        times * ((1 - f) * (m.f.intra.latency_us + xi) + f * (m.f.inter.latency_us + xc) + o + red);
    const double x = c.cross ? xc + m.f.inter_step_overhead_us : xi + m.f.intra_send_overhead_us;
    busy[c.cross ? 1 : 0] += times * pieces * std::max(x + o, o + red);
    tail = m.link(c).latency_us + o + red;
    return *this;
  }
  double total() const { return std::max(fill, std::max(busy[0], busy[1]) + tail); }
};

using Formula = double (*)(const Model& m, double b);  // b: count * elemSize

double ringAllReduce(const Model& m, double S) {
  const Crossing c = m.ringCrossing();
  return Pipe(m).round(S / m.n, c, true, m.n - 1).round(S / m.n, c, false, m.n - 1).total();
}
double ringReduceScatter(const Model& m, double b) {
  return Pipe(m).round(b, m.ringCrossing(), true, m.n - 1).total();
}
double ringAllGather(const Model& m, double b) {
  return Pipe(m).round(b, m.ringCrossing(), false, m.n - 1).total();  // the copy overlaps
}
double ringBroadcast(const Model& m, double S) {  // the root's copy overlaps the sends
  const Crossing c = m.ringCrossing();
  return m.chain(S, m.n - 1, c, m.pieceService(S, c.flows, false), false);
}

// Double binary tree over ring positions (Sanders, Speck & Träff 2009; tree.cc): each tree
// carries half the vector; a rank is inner in one tree (two children) and a leaf in the
// other. Per piece index a rank sends 4 pieces in all-reduce (up once in each tree, down to
// two children in one), 2 in broadcast and reduce. A piece's path from a leaf to the root
// crosses about log2(hosts) host boundaries of the tree's depth.
int treeDepth(const Model& m) { return std::max(1, ceilLog(m.n + 1, 2) - 1); }
Crossing treeCrossing(const Model& m) {
  Crossing c = m.anyCross(1);
  if (c.cross) c.fraction = std::min(1.0, ceilLog(m.H, 2) / static_cast<double>(treeDepth(m)));
  return c;
}
double treeAllReduce(const Model& m, double S) {
  const Crossing c = treeCrossing(m);
  const int d = treeDepth(m);
  // Per piece index: four transfers on a rank's port, or on its host's NICs across hosts
  // (the reductions of an inner node's two children run on their own queues).
  const double per = 4 * m.pieceService(S / 2, 1, false);
  return m.chain(S / 2, d, c, per, true) + m.chain(S / 2, d, c, 0, false);
}
double treeBroadcast(const Model& m, double S) {
  return m.chain(S / 2, treeDepth(m), treeCrossing(m), 2 * m.pieceService(S / 2, 2, false), false);
}
double treeReduce(const Model& m, double S) {
  return m.chain(S / 2, treeDepth(m), treeCrossing(m), 2 * m.pieceService(S / 2, 1, true), true);
}

// Recursive doubling and halving over rank numbers (XOR partners); ranks beyond the largest
// power of two fold into it first and are served last (two more rounds).
int pow2Below(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
void foldRounds(const Model& m, double bytes, Pipe* pipe) {
  const int p2 = pow2Below(m.n);
  if (p2 == m.n) return;
  const Crossing c = m.addCrossing(p2);
  Pipe& p = *pipe;
  p.round(bytes, c, true).round(bytes, c, false);
}
double rdAllReduce(const Model& m, double S) {
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
double rdAllGather(const Model& m, double b) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(b * d, m.xorCrossing(d), false);
  return p.total() + m.copy(b);
}
// Rabenseifner: reduce-scatter by recursive halving from the nearest partner out (mask 1, 2,
// ..), then all-gather by recursive doubling back (rhd.cc): the far rounds carry the least.
double rhdAllReduce(const Model& m, double S) {
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
double rhdReduceScatter(const Model& m, double b) {
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

// Binomial and k-nomial trees rooted at rank 0 (the root's place does not change the cost
// on a uniform layout; binomial.cc): from the largest level down, every rank holding the data
// (a multiple of level x radix) serves its radix-1 children at level distances, one after
// the other from one port.
double knomial(const Model& m, double S, int radix, bool reduce) {
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
double binomialBroadcast(const Model& m, double S) { return knomial(m, S, 2, false); }
double binomialReduce(const Model& m, double S) { return knomial(m, S, 2, true); }
double knomialBroadcast(const Model& m, double S) { return knomial(m, S, 4, false); }
double knomialReduce(const Model& m, double S) { return knomial(m, S, 4, true); }

// van de Geijn: binomial scatter of n blocks, then ring all-gather of the blocks.
double scatterAllGather(const Model& m, double S) {
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

// Bruck: ceil(log2 n) rounds to r - 2^k, doubling the blocks carried, then a local rotation.
double bruckAllGather(const Model& m, double b) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(b * std::min(d, m.n - d), m.addCrossing(m.n - d), false);
  return p.total() + m.copy(b * m.n);
}
double bruckAllToAll(const Model& m, double b) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(b * m.n / 2, m.addCrossing(d), false);
  return p.total() + 2 * m.copy(b * m.n);
}
// Pairwise exchange: n-1 rounds of one block; on a uniform layout L-1 of them stay on the
// host and n-L cross it with all L local ranks sending at once.
double pairwise(const Model& m, double b) {
  const int crossRounds = m.H > 1 ? m.n - m.L : 0;
  return Pipe(m)
             .round(b, Crossing{}, false, m.n - 1 - crossRounds)
             .round(b, m.anyCross(m.L), false, crossRounds)
             .total() +
         m.copy(b);
}
// Gather and scatter straight to and from the root: the root's port serialises the blocks of
// its host, its host's NICs those of the others.
double direct(const Model& m, double b) {
  const double local = (m.L - 1) * b / m.bytesPerUs(Crossing{});
  const double remote = m.H > 1 ? (m.n - m.L) * b / (m.f.inter.bw_gbs * m.f.nicsPerHost * 1e3) : 0;
  const double lat = m.H > 1 ? m.f.inter.latency_us : m.f.intra.latency_us;
  return lat + (m.n - 1) * m.f.step_overhead_us + local + remote + m.copy(b);
}
double dissemination(const Model& m, double) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(0, m.addCrossing(d), false);
  return p.total();
}

// Two-level algorithms (hierarchical.cc): phases within hosts (L ranks) and across them (H
// hosts, all L local ranks at once, each with its own flow through the host's NICs).
double hierAllReduce(const Model& m, double S) {
  if (m.H <= 1 || m.L <= 1) return ringAllReduce(m, S);
  const Crossing in{}, out = m.anyCross(m.L);
  const double shard = S / m.L, piece = shard / m.H;
  return Pipe(m)
      .round(shard, in, true, m.L - 1)
      .round(piece, out, true, m.H - 1)
      .round(piece, out, false, m.H - 1)
      .round(shard, in, false, m.L - 1)
      .total();
}
double hierReduceScatter(const Model& m, double b) {
  if (m.H <= 1 || m.L <= 1) return ringReduceScatter(m, b);
  return Pipe(m)
      .round(b * m.H, Crossing{}, true, m.L - 1)
      .round(b, m.anyCross(m.L), true, m.H - 1)
      .total();
}
double hierAllGather(const Model& m, double b) {
  if (m.H <= 1 || m.L <= 1) return ringAllGather(m, b);
  return m.copy(b) + Pipe(m)
                         .round(b, m.anyCross(m.L), false, m.H - 1)
                         .round(b * m.H, Crossing{}, false, m.L - 1)
                         .total();
}
// Rooted: a chain across hosts from the root's host, then a chain within each host, pipelined
// together; a host's leader forwards each piece twice (the next host, its own chain).
double hierRooted(const Model& m, double S, bool reduce) {
  if (m.H <= 1 || m.L <= 1)
    return m.chain(S, m.n - 1, m.anyCross(1), m.pieceService(S, 1, reduce), reduce);
  // The leader's two sends go out on different resources (NIC, port): the slower one paces.
  const double per = m.pieceService(S, 1, reduce);
  return m.chain(S, m.H - 1, m.anyCross(1), per, reduce) +
         m.chain(S, m.L - 1, Crossing{}, 0, reduce);
}
double hierBroadcast(const Model& m, double S) { return hierRooted(m, S, false); }
double hierReduce(const Model& m, double S) { return hierRooted(m, S, true); }
double hierAllToAll(const Model& m, double b) {
  if (m.H <= 1 || m.L <= 1) return pairwise(m, b);
  return Pipe(m)
      .round(b * m.H, Crossing{}, false, m.L - 1)
      .round(b * m.L, m.anyCross(m.L), false, m.H - 1)
      .round(b * m.H, Crossing{}, false, m.L - 1)
      .total();
}

struct Row {
  const char* name;
  Collective coll;
  Formula formula;
};
const Row kRows[] = {
    {"ring", Collective::kAllReduce, ringAllReduce},
    {"ring", Collective::kReduceScatter, ringReduceScatter},
    {"ring", Collective::kAllGather, ringAllGather},
    {"ring", Collective::kBroadcast, ringBroadcast},
    {"tree", Collective::kAllReduce, treeAllReduce},
    {"tree", Collective::kBroadcast, treeBroadcast},
    {"tree", Collective::kReduce, treeReduce},
    {"recursive_doubling", Collective::kAllReduce, rdAllReduce},
    {"recursive_doubling", Collective::kAllGather, rdAllGather},
    {"rhd", Collective::kAllReduce, rhdAllReduce},
    {"rhd", Collective::kReduceScatter, rhdReduceScatter},
    {"binomial", Collective::kBroadcast, binomialBroadcast},
    {"binomial", Collective::kReduce, binomialReduce},
    {"knomial", Collective::kBroadcast, knomialBroadcast},
    {"knomial", Collective::kReduce, knomialReduce},
    {"scatter_allgather", Collective::kBroadcast, scatterAllGather},
    {"bruck", Collective::kAllGather, bruckAllGather},
    {"bruck", Collective::kAllToAll, bruckAllToAll},
    {"pairwise", Collective::kAllToAll, pairwise},
    {"pairwise", Collective::kAllToAllv, pairwise},
    {"direct", Collective::kGather, direct},
    {"direct", Collective::kScatter, direct},
    {"dissemination", Collective::kBarrier, dissemination},
    {"hierarchical", Collective::kAllReduce, hierAllReduce},
    {"hierarchical", Collective::kReduceScatter, hierReduceScatter},
    {"hierarchical", Collective::kAllGather, hierAllGather},
    {"hierarchical", Collective::kBroadcast, hierBroadcast},
    {"hierarchical", Collective::kReduce, hierReduce},
    {"hierarchical", Collective::kAllToAll, hierAllToAll},
};

}  // namespace

double predictUs(const AlgorithmInfo& algo, Collective coll, size_t count, size_t elemSize,
                 const Fabric& fabric, bool inPlace) {
  if (fabric.nranks() <= 1)
    return fabric.step_overhead_us + count * elemSize / (fabric.copy_gbs * 1e3);
  Model m(fabric);
  m.inPlace = inPlace;
  for (const Row& row : kRows)
    if (row.coll == coll && !strcmp(row.name, algo.name))
      return row.formula(m, static_cast<double>(count) * elemSize);
  return -1;
}

namespace {
std::atomic<uint64_t> computedPredictions{0};

// What a simulated prediction depends on, as a key: the call and every figure of the fabric.
std::string predictionKey(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                          const Fabric& f) {
  std::string key = std::string(algo.name) + "/" + collectiveName(args.coll) + "/" +
                    std::to_string(args.count * elemSize) + "/" + std::to_string(elemSize) + "/" +
                    std::to_string(args.root) + "/" + std::to_string(f.chunk_bytes) + "/" +
                    std::to_string(f.fifo_slots) + "/" + std::to_string(f.nicsPerHost) + "/" +
                    formatCalibration(f) + (args.inPlace ? "/in place/" : "/");
  for (int h : f.hostOf) key += std::to_string(h) + ",";
  key += "/";
  for (int r : f.ring) key += std::to_string(r) + ",";
  return key;
}
}  // namespace

uint64_t predictionsComputed() { return computedPredictions.load(std::memory_order_relaxed); }

double predictCallUs(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                     const Fabric& whole) {
  // Simulated predictions are kept for the process: every rank of a communicator asks the
  // same question when it compiles a plan (and threads of one process share the answer), and
  // calls of other dtypes and ops of the same size cost the same. Thread ranks ask at the same
  // moment: the first plays the simulation and the others wait for its answer rather than play
  // it too (ASan+UBSan build, 2 cores: EdgeCases.AvgAtOddRankCountsEveryAlgorithm, up to 28
  // thread ranks, 31.7 s to 3.8).
  static std::mutex memoMu;
  static std::unordered_map<std::string, std::shared_future<double>> memo;
  if (whole.nranks() > kSimulateRanks) {
    computedPredictions.fetch_add(1, std::memory_order_relaxed);
    return predictCallUsUncached(algo, args, elemSize, whole);
  }
  std::string key = predictionKey(algo, args, elemSize, whole);
  std::promise<double> mine;
  std::shared_future<double> answer;
  bool play = false;  // this thread plays the simulation; the others wait for its answer
  {
    std::lock_guard<std::mutex> lock(memoMu);
    auto it = memo.find(key);
    if (it != memo.end()) {
      answer = it->second;
    } else {
      if (memo.size() >= 4096) memo.clear();
      answer = mine.get_future().share();
      memo.emplace(key, answer);
      play = true;
    }
  }
  if (!play) return answer.get();
  computedPredictions.fetch_add(1, std::memory_order_relaxed);
  try {
    const double us = predictCallUsUncached(algo, args, elemSize, whole);
    mine.set_value(us);
    return us;
  } catch (...) {
    // The waiters see the same failure; later calls ask again.
    mine.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(memoMu);
    memo.erase(key);
    throw;
  }
}

double predictCallUsUncached(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                             const Fabric& whole) {
  // What each rank sends and receives: the call's size plus its own vector or block.
  const Fabric fabric = whole.forCall(callBytes(args.coll, args.count, elemSize, whole.nranks()) +
                                      args.count * elemSize);
  // The simulator plays every step: only where the steps are few enough to be cheap (a
  // bound on the pieces every rank moves, n ranks x pieces of the whole call x log n).
  const double pieces =
      static_cast<double>(callBytes(args.coll, args.count, elemSize, fabric.nranks())) /
          std::max<size_t>(fabric.chunk_bytes, 1) +
      fabric.nranks();
  // Calls back to back, as nccl-tests (20 by default) and training loops issue them: the time
  // per call once they follow each other (a rooted call's root starts the next while others
  // finish). As many as the step budget allows, 3 to 20.
  const double steps = pieces * fabric.nranks() * 8;
  const int calls = static_cast<int>(std::clamp(kSimulateSteps / std::max(steps, 1.0), 1.0, 20.0));
  if (fabric.nranks() <= kSimulateRanks && args.coll != Collective::kAllToAllv && args.count > 0 &&
      calls >= 3) {
    try {
      const SimResult r = simulateSchedules(algo, args, elemSize, fabric, kSimulateRanks, calls);
      if (r.ok) return r.per_call_us;
    } catch (const std::bad_alloc&) {
      // Too large to play after all: the closed form answers.
    }
  }
  return predictUs(algo, args.coll, args.count, elemSize, fabric, args.inPlace);
}

size_t choosePieceBytes(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                        const Fabric& fabric) {
  const size_t chunk = std::max(fabric.chunk_bytes, elemSize) / elemSize * elemSize;
  const int n = fabric.nranks();
  // A call of more than kPieceChoiceChunks chunks per rank is pipelined deeply at the
  // chunk already, and its smaller pieces would be costly to simulate: it keeps the chunk.
  if (args.coll == Collective::kAllToAllv || args.coll == Collective::kBarrier || args.count == 0 ||
      n <= 1 || chunk / 2 < kMinPieceBytes ||
      callBytes(args.coll, args.count, elemSize, n) / static_cast<size_t>(n) >
          kPieceChoiceChunks * chunk)
    return chunk;
  CollArgs a = args;  // as rankCandidates sees the call
  a.nranks = n;
  a.hostOf = fabric.nhosts() > 1 ? fabric.hostOf.data() : nullptr;
  a.ring = fabric.ring.empty() ? nullptr : fabric.ring.data();
  Fabric f = fabric;
  f.chunk_bytes = chunk;
  size_t best = chunk;
  double bestUs = predictCallUs(algo, a, elemSize, f);
  for (size_t piece = chunk / 2; piece >= kMinPieceBytes && piece >= chunk / 8; piece /= 2) {
    f.chunk_bytes = piece / elemSize * elemSize;
    const double us = predictCallUs(algo, a, elemSize, f);
    if (us >= 0 && us * (1 + kTie) < bestUs) {
      best = f.chunk_bytes;
      bestUs = us;
    }
  }
  return best;
}

std::vector<Candidate> rankCandidates(const CollArgs& args, size_t elemSize, const Fabric& fabric,
                                      int* best) {
  std::vector<Candidate> out;
  *best = -1;
  CollArgs a = args;
  a.nranks = fabric.nranks();
  a.hostOf = fabric.nhosts() > 1 ? fabric.hostOf.data() : nullptr;
  a.ring = fabric.ring.empty() ? nullptr : fabric.ring.data();
  for (const AlgorithmInfo& algo : algorithms()) {
    if (algo.coll != args.coll) continue;
    Candidate c;
    c.algo = &algo;
    c.unsupported = unsupportedReason(algo, a);
    c.predicted_us = c.unsupported ? -1 : predictCallUs(algo, a, elemSize, fabric);
    if (c.predicted_us < 0 && !c.unsupported)
      c.unsupported = "the cost model has no formula for it";
    out.push_back(c);
    const int i = static_cast<int>(out.size()) - 1;
    if (!c.unsupported && (*best < 0 || c.predicted_us < out[*best].predicted_us)) *best = i;
  }
  // A tie (within kTie) goes to the algorithm listed first: where the host's memory system
  // binds (host_bw_gbs), every algorithm moving the same bytes is predicted alike, and which
  // is faster is decided by what the model does not see (caches, the scheduler of an
  // oversubscribed host), so the table's order of preference decides, not rounding.
  if (*best >= 0)
    for (size_t i = 0; i < out.size(); ++i)
      if (!out[i].unsupported && out[i].predicted_us <= out[*best].predicted_us * (1 + kTie)) {
        *best = static_cast<int>(i);
        break;
      }
  return out;
}

std::string AlgoSpec::forced(Collective coll, size_t bytes) const {
  for (const AlgoRule& r : rules) {
    if (bytes < r.lo || bytes >= r.hi) continue;
    if (r.coll == static_cast<int>(coll)) return r.algo;
    if (r.coll < 0 && findAlgorithm(coll, r.algo)) return r.algo;
  }
  return "";
}

namespace {
std::string trimmed(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, std::min(s.size(), s.find_first_not_of(ws)));
  const size_t last = s.find_last_not_of(ws);
  s.erase(last == std::string::npos ? 0 : last + 1);
  return s;
}
// The distinct algorithm names of coll (-1: of every collective), for messages.
std::string algorithmNames(int coll) {
  std::vector<std::string> names;
  for (const AlgorithmInfo& a : algorithms())
    if ((coll < 0 || static_cast<int>(a.coll) == coll) &&
        std::find(names.begin(), names.end(), a.name) == names.end())
      names.push_back(a.name);
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

braidResult_t parseAlgoSpec(const std::string& text, AlgoSpec* out) {
  out->text = text;
  out->rules.clear();
  int coll = -1;  // the collective of the last "coll:" item; -1 before any
  if (trimmed(text).empty()) return braidSuccess;  // unset: the selector decides
  size_t at = 0;
  for (int number = 1; at <= text.size(); ++number) {
    size_t end = text.find_first_of(";,", at);
    if (end == std::string::npos) end = text.size();
    std::string item = trimmed(text.substr(at, end - at));
    at = end + 1;
    if (item.empty())
      return fail(braidInvalidArgument,
                  "BRAID_ALGO=%s: item %d is empty (two separators in a row, or one at an end)",
                  text.c_str(), number);
    AlgoRule rule;
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      const std::string name = trimmed(item.substr(0, colon));
      coll = -1;
      for (int c = 0; c < kNumCollectives; ++c)
        if (!strcasecmp(name.c_str(), collectiveName(static_cast<Collective>(c)))) coll = c;
      if (coll < 0)
        return fail(braidInvalidArgument,
                    "BRAID_ALGO=%s: \"%s\" names no collective (allreduce, reducescatter, "
                    "allgather, broadcast, reduce, alltoall, alltoallv, gather, scatter, barrier)",
                    text.c_str(), name.c_str());
      item = trimmed(item.substr(colon + 1));
    }
    const size_t atSign = item.find('@');
    rule.coll = coll;
    rule.algo = trimmed(item.substr(0, atSign));
    if (atSign != std::string::npos) {
      const std::string range = trimmed(item.substr(atSign + 1));
      const size_t dash = range.find('-');
      const std::string lo = trimmed(range.substr(0, dash));
      const std::string hi = dash == std::string::npos ? "" : trimmed(range.substr(dash + 1));
      if (dash == std::string::npos || (!lo.empty() && !parseByteSize(lo, &rule.lo)) ||
          (!hi.empty() && !parseByteSize(hi, &rule.hi)))
        return fail(braidInvalidArgument,
                    "BRAID_ALGO=%s: \"@%s\" is not a byte range LO-HI (for example @0-64K, "
                    "@64K-, @1M-16M)",
                    text.c_str(), range.c_str());
      if (rule.lo >= rule.hi)
        return fail(braidInvalidArgument, "BRAID_ALGO=%s: the range \"@%s\" is empty", text.c_str(),
                    range.c_str());
    }
    bool known = false;
    for (const AlgorithmInfo& a : algorithms())
      if (!strcasecmp(a.name, rule.algo.c_str()) &&
          (coll < 0 || static_cast<int>(a.coll) == coll)) {
        known = true;
        rule.algo = a.name;
      }
    if (!known) {
      if (coll < 0)
        return fail(braidInvalidArgument,
                    "BRAID_ALGO=%s: no collective has an algorithm \"%s\" (known: %s)",
                    text.c_str(), rule.algo.c_str(), algorithmNames(-1).c_str());
      return fail(braidInvalidArgument, "BRAID_ALGO=%s: %s has no algorithm \"%s\" (known: %s)",
                  text.c_str(), collectiveName(static_cast<Collective>(coll)), rule.algo.c_str(),
                  algorithmNames(coll).c_str());
    }
    out->rules.push_back(rule);
  }
  return braidSuccess;
}

}  // namespace braid::tuning

namespace braid::tuning {
double busBwFactor(Collective coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Collective::kAllReduce:
      return 2 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
      return (n - 1) / n;
    case Collective::kBarrier:
      return 0;
    default:
      return 1;
  }
}
}  // namespace braid::tuning
