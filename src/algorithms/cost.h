// The machine as an algorithm's closed-form cost sees it (Fabric), and the terms those costs are
// written in (CostModel, Pipe): the alpha-beta-gamma model of Thakur, Rabenseifner & Gropp,
// "Optimization of collective communication operations in MPICH" (IJHPCA 2005), extended with
// the layout: a round is as slow as its slowest message, a message between hosts goes at the
// NIC's bandwidth divided among the flows of its host that cross at the same time, and each
// piece (the communicator's chunk) pays the per-step overhead. Each algorithm's file gives its
// closed form beside its builders (AlgorithmInfo::cost); the tuning part fills a Fabric from a
// communicator, a calibration file or a topology, and compares the forms (tuning/cost_model.h).
// Times are microseconds, sizes bytes, bandwidths GB/s (1e9 bytes/s).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace braid {

// One kind of hop: a fixed latency and a bandwidth, one direction.
struct LinkCost {
  double latency_us = 0;  // from posting a message to its first byte arriving
  double bw_gbs = 0;      // GB/s (1e9 bytes/s)
};

struct Fabric {
  // Host of each rank, hosts numbered 0, 1, ... by first appearance in rank order.
  std::vector<int> hostOf;
  // The communicator's ring (CollArgs::ring): ring[i] is the rank at position i; empty means
  // rank order. topo::commRing(hostOf, {}) is what a communicator uses.
  std::vector<int> ring;
  // Between two ranks of one host: shared memory (a copy through the FIFO), or on a GPU
  // system the ring path (NVLink, PCIe). Each rank has one such send port and one receive
  // port: its transfers to (from) peers of its host share intra.bw_gbs.
  LinkCost intra;
  // Between hosts: one NIC's bandwidth and the network latency. A host's nicsPerHost NICs
  // carry all its ranks' traffic to other hosts: concurrent flows share them.
  LinkCost inter;
  int nicsPerHost = 1;
  // Local work per rank: reduction (bytes of output per second) and copy throughput.
  double reduce_gbs = 8;
  double copy_gbs = 8;
  // Fixed cost of one step (posting it, its flag, waking the peer), microseconds.
  double step_overhead_us = 0.5;
  // Per message between hosts, the time its sender's NIC (the network proxy: system calls,
  // framing) is busy besides the bytes, microseconds: messages to other hosts leave at most
  // one per inter_step_overhead_us + bytes / bw (the receiving NIC is held as long). Its
  // latency is in inter.latency_us.
  double inter_step_overhead_us = 0;
  // Per message to a rank of the same host, the sender's work besides step_overhead_us:
  // waking a receiver that sleeps (a futex system call, and on a host with fewer cores than
  // ranks the switch to the woken rank), microseconds. braid-tune measures it with a fan-out.
  double intra_send_overhead_us = 0;
  // Who moves a rank's data within a host and reduces it. true: the rank's one progress
  // thread (shared memory: it copies into the peer's FIFO and reduces out of its own), so
  // those copies and reductions take turns with its other steps. false: a GPU kernel whose
  // warps copy and reduce alongside each other (NCCL's model, and braid-sim's for GPU
  // systems): only the steps' fixed costs take turns.
  bool engine_moves_data = true;
  // Within a host, calls whose data per rank (what it sends plus what it receives) fits in
  // cache_bytes (a core's L2) move at intra_cache_bw_gbs instead of intra.bw_gbs: shared
  // memory copies run at cache speed until the data spills. 0: no such distinction.
  double intra_cache_bw_gbs = 0;
  size_t cache_bytes = 0;
  // This fabric for a call that touches `bytesPerRank` bytes on each rank: within cache_bytes,
  // intra.bw_gbs becomes intra_cache_bw_gbs and host_bw_gbs scales by the same factor.
  Fabric forCall(size_t bytesPerRank) const;
  // The copy bandwidth of a host's memory system shared by all its ranks' transfers, GB/s (a
  // host with fewer cores than ranks, or one memory bus); 0 means no such limit.
  double host_bw_gbs = 0;
  // Pieces one connection holds (BRAID_BUFFSIZE / chunk: a sender runs at most this far
  // ahead of its receiver); 0 means unbounded.
  int fifo_slots = 0;
  // Pipelining grain in bytes (the communicator's chunk size): messages are cut into pieces
  // of this size, as CollArgs::pieceElems does.
  size_t chunk_bytes = 128 * 1024;
  // NVLink SHARP (NCCL's NVLS; algorithms/device_schedule.h): every host's ranks (a host is an
  // NVLink domain: one machine's NVSwitches, or an MNNVL rack's switch trays) sit on switches
  // that reduce (multimem.ld_reduce) and multicast (multimem.st). nvls_efficiency is the share
  // of intra.bw_gbs that multimem traffic reaches (a hardware figure: topo_fabric.cc gives its
  // source); a pipelining piece is nvls_channels x nvls_chunk_bytes (NCCL_NVLS_NCHANNELS,
  // NCCL_NVLS_CHUNKSIZE).
  bool nvls = false;
  double nvls_efficiency = 1;
  int nvls_channels = 16;
  size_t nvls_chunk_bytes = 128 * 1024;

  int nranks() const { return static_cast<int>(hostOf.size()); }
  int nhosts() const;
  int ranksPerHost() const;  // largest number of ranks on one host
  // A one-line description, for logs and braid-sim's header.
  std::string describe() const;
};

// A fabric of `hosts` hosts with `ranksPerHost` ranks each, ranks numbered host by host.
Fabric uniformFabric(int hosts, int ranksPerHost, LinkCost intra, LinkCost inter);

// ceil(log_radix(n)): the rounds of a radix-ary doubling over n ranks (0 for n <= 1).
inline int ceilLog(int n, int radix) {
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

// A Fabric as one call's closed form reads it: n ranks on H hosts of at most L, the ring order,
// and the round shapes built from them (crossing, pieceTime, chain, ...).
struct CostModel {
  const Fabric& f;
  int n, H, L;
  double chunk;
  std::vector<int> pos, ring;  // ring position of each rank, rank at each position
  bool inPlace = false;        // the call's in-place form (CollArgs::inPlace)

  explicit CostModel(const Fabric& fab)
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
  const CostModel& m;
  double fill = 0, busy[2] = {0, 0}, tail = 0;  // busy: within a host, across hosts
  explicit Pipe(const CostModel& model) : m(model) {}
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

// The largest power of two <= n (n >= 1).
inline int pow2Below(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// Recursive doubling and halving run over rank numbers (XOR partners): ranks beyond the largest
// power of two fold into it first and are served last, two more rounds (recursive_doubling.cc,
// rhd.cc).
inline void foldRounds(const CostModel& m, double bytes, Pipe* pipe) {
  const int p2 = pow2Below(m.n);
  if (p2 == m.n) return;
  const Crossing c = m.addCrossing(p2);
  pipe->round(bytes, c, true).round(bytes, c, false);
}

}  // namespace braid
