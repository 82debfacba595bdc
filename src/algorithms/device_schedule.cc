// NVLS, NVLSTree and PAT as device schedules (device_schedule.h), and their time.
#include "algorithms/device_schedule.h"

#include <algorithm>
#include <cmath>

namespace braid {

const char* phaseKindName(PhaseKind k) {
  switch (k) {
    case PhaseKind::kNvlink:
      return "nvlink";
    case PhaseKind::kNetwork:
      return "network";
    case PhaseKind::kReduce:
      return "reduce";
  }
  return "?";
}

TimeSplit deviceScheduleTime(const DeviceSchedule& s) {
  // busy[kind][direction]: a resource's time over the whole call.
  double busy[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  double fill = 0;
  const double pieces = std::max(1.0, s.pieces);
  for (const Phase& p : s.phases) {
    const double perUs = p.gbs * 1e3;  // bytes per microsecond
    const int k = static_cast<int>(p.kind);
    busy[k][0] += p.tx / perUs;
    busy[k][1] += p.rx / perUs;
    const double most = std::max(p.tx, p.rx);
    const double piece = p.piece > 0 ? std::min(p.piece, most) : most / pieces;
    fill += p.rounds * (p.latency_us + piece / perUs);
  }
  TimeSplit t;
  t.nvlink_us = std::max(busy[0][0], busy[0][1]);
  t.network_us = std::max(busy[1][0], busy[1][1]);
  t.reduce_us = std::max(busy[2][0], busy[2][1]);
  const double most = std::max({t.nvlink_us, t.network_us, t.reduce_us});
  t.total_us = fill + most * (pieces - 1) / pieces;
  t.latency_us = t.total_us - most;
  return t;
}

namespace {

// The NVLS piece: every channel moves one chunk at a time.
double nvlsPieces(const Fabric& f, double bytes) {
  const double piece = static_cast<double>(std::max(1, f.nvls_channels)) *
                       static_cast<double>(std::max<size_t>(f.nvls_chunk_bytes, 1));
  return std::max(1.0, std::ceil(bytes / piece));
}
double nvlsGbs(const Fabric& f) { return f.intra.bw_gbs * f.nvls_efficiency; }
// One hop to the switches and the kernel's step.
double nvlinkHopUs(const Fabric& f) { return f.intra.latency_us + f.step_overhead_us; }
// A rank's share of its node's NICs (flows of all L ranks at once).
double nicShareGbs(const Fabric& f) {
  const int L = std::max(1, f.ranksPerHost());
  return f.inter.bw_gbs * std::min(1.0, static_cast<double>(f.nicsPerHost) / L);
}
double netHopUs(const Fabric& f) {
  return f.inter.latency_us + f.inter_step_overhead_us + f.step_overhead_us;
}

// The switches reduce rank r's shard of every rank's vector: r's NVLink carries the whole
// vector out (its part of every shard) and its reduced shard in.
Phase ldReduce(const Fabric& f, double bytes, int ranks) {
  Phase p;
  p.kind = PhaseKind::kNvlink;
  p.what = "reduce-scatter in the NVSwitches (multimem.ld_reduce)";
  p.tx = bytes;
  p.rx = bytes / ranks;
  p.gbs = nvlsGbs(f);
  p.latency_us = 2 * nvlinkHopUs(f);  // the request out, the sum back
  return p;
}
// Rank r stores its shard once; the switches write it to every rank.
Phase multicast(const Fabric& f, double bytes, int ranks) {
  Phase p;
  p.kind = PhaseKind::kNvlink;
  p.what = "all-gather by NVSwitch multicast (multimem.st)";
  p.tx = bytes / ranks;
  p.rx = bytes;
  p.gbs = nvlsGbs(f);
  p.latency_us = nvlinkHopUs(f);
  return p;
}

const char* nvlsSupports(const Fabric& f) {
  if (!f.nvls) return "no NVLink SHARP: GPUs of compute capability 9.0+ on NVSwitches";
  if (f.nranks() < 2) return "one rank";
  if (f.nhosts() > 1) return "more than one NVLink domain (NVLSTree spans them)";
  return nullptr;
}
const char* nvlsTreeSupports(const Fabric& f) {
  if (!f.nvls) return "no NVLink SHARP: GPUs of compute capability 9.0+ on NVSwitches";
  if (f.nhosts() < 2) return "one NVLink domain (NVLS)";
  return nullptr;
}
const char* patSupports(const Fabric& f) {
  if (f.engine_moves_data) return "a GPU kernel algorithm (PAT): this fabric has no GPUs";
  if (f.nranks() < 2) return "one rank";
  if (f.ranksPerHost() != 1) return "PAT runs with one rank per node";
  return nullptr;
}

void nvlsAllReduce(const Fabric& f, double bytes, DeviceSchedule* out) {
  const int n = f.nranks();
  out->phases = {ldReduce(f, bytes, n), multicast(f, bytes, n)};
  out->pieces = nvlsPieces(f, bytes);
}
void nvlsReduceScatter(const Fabric& f, double bytes, DeviceSchedule* out) {
  out->phases = {ldReduce(f, bytes, f.nranks())};
  out->pieces = nvlsPieces(f, bytes);
}
void nvlsAllGather(const Fabric& f, double bytes, DeviceSchedule* out) {
  out->phases = {multicast(f, bytes, f.nranks())};
  out->pieces = nvlsPieces(f, bytes);
}

// NVLSTree: NVLS within each domain of L ranks down to a shard of bytes / L per rank, a
// double binary tree between the H domains on each shard (each rank with its share of the
// node's NICs), NVLS multicast back. In a double binary tree a node is interior in one tree
// and a leaf in the other: it sends and receives twice its data (half a vector per tree to
// and from two children and a parent); with two nodes each tree is one edge, once the data.
void nvlsTreeAllReduce(const Fabric& f, double bytes, DeviceSchedule* out) {
  const int L = std::max(1, f.ranksPerHost()), H = f.nhosts();
  Phase net;
  net.kind = PhaseKind::kNetwork;
  net.what = "double binary tree between NVLink domains on each rank's shard";
  net.tx = net.rx = (H == 2 ? 1.0 : 2.0) * bytes / L;
  net.gbs = nicShareGbs(f);
  net.latency_us = netHopUs(f);
  net.rounds = 2 * ceilLog(H, 2);  // up the tree and down
  // The network transport moves the fabric's chunk per rank a step (NCCL: 512 KiB steps on
  // each of 8 channels), stored and forwarded at each hop of the tree.
  net.piece = static_cast<double>(f.chunk_bytes);
  out->phases = {ldReduce(f, bytes, L), net, multicast(f, bytes, L)};
  out->pieces = nvlsPieces(f, bytes);
}

// PAT with one rank per node: ceil(log2 n) rounds, (n-1)/n of the data out and in per rank
// (every block but its own), aggregated so that a round's messages to one peer are one.
// Pieces are the fabric's chunk.
Phase patRounds(const Fabric& f, double bytes) {
  const int n = f.nranks();
  Phase p;
  p.kind = PhaseKind::kNetwork;
  p.what = "aggregated tree rounds between nodes";
  p.tx = p.rx = bytes * (n - 1) / n;
  p.gbs = nicShareGbs(f);
  // Round k carries 2^k blocks, so a piece's rounds together move it once: the rounds add
  // their latencies, not a transfer each (one round of ceil(log2 n) hops' latency).
  p.latency_us = ceilLog(n, 2) * netHopUs(f);
  return p;
}
double patPieces(const Fabric& f, double bytes) {
  return std::max(1.0, std::ceil(bytes / static_cast<double>(std::max<size_t>(f.chunk_bytes, 1))));
}
void patAllGather(const Fabric& f, double bytes, DeviceSchedule* out) {
  out->phases = {patRounds(f, bytes)};
  out->pieces = patPieces(f, bytes);
}
void patReduceScatter(const Fabric& f, double bytes, DeviceSchedule* out) {
  Phase red;
  red.kind = PhaseKind::kReduce;
  red.what = "the GPU reduces each received block";
  red.tx = bytes * (f.nranks() - 1) / f.nranks();
  red.gbs = f.reduce_gbs;
  out->phases = {patRounds(f, bytes), red};
  out->pieces = patPieces(f, bytes);
}

}  // namespace

const std::vector<DeviceAlgorithm>& deviceAlgorithms() {
  static const std::vector<DeviceAlgorithm> table = {
      {"nvls", Collective::kAllReduce,
       "NVLink SHARP: reduce-scatter in the NVSwitches, all-gather by multicast (NCCL 2.17)",
       nvlsSupports, nvlsAllReduce},
      {"nvlstree", Collective::kAllReduce,
       "NVLS within each NVLink domain, a double binary tree between domains (NCCL 2.18)",
       nvlsTreeSupports, nvlsTreeAllReduce},
      {"nvls", Collective::kReduceScatter, "NVLink SHARP: the NVSwitches reduce each shard",
       nvlsSupports, nvlsReduceScatter},
      {"nvls", Collective::kAllGather, "NVLink SHARP: each shard stored once, multicast",
       nvlsSupports, nvlsAllGather},
      {"pat", Collective::kAllGather,
       "Parallel Aggregated Trees, one rank per node: log2 n rounds (NCCL 2.23)", patSupports,
       patAllGather},
      {"pat", Collective::kReduceScatter,
       "Parallel Aggregated Trees, one rank per node: log2 n rounds (NCCL 2.23)", patSupports,
       patReduceScatter},
  };
  return table;
}

}  // namespace braid
