// The machine as the cost model sees it: where each rank runs and what a transfer between
// two ranks costs. Built from a communicator's layout and a calibration file, or from a
// topology model replicated over hosts (braid-sim). Read by the analytic cost model
// (cost_model.h) and by the schedule simulator (simulate.h).
#pragma once

#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::tuning {

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

  int nranks() const { return static_cast<int>(hostOf.size()); }
  int nhosts() const;
  int ranksPerHost() const;  // largest number of ranks on one host
  // A one-line description, for logs and braid-sim's header.
  std::string describe() const;
};

// A fabric of `hosts` hosts with `ranksPerHost` ranks each, ranks numbered host by host.
Fabric uniformFabric(int hosts, int ranksPerHost, LinkCost intra, LinkCost inter);

}  // namespace braid::tuning

namespace braid::tuning {

// braid-tune --calibrate's file: "key = value" lines ('#' starts a comment), keys
// intra_latency_us, intra_bw_gbs, intra_send_overhead_us, inter_latency_us, inter_bw_gbs,
// inter_step_overhead_us, nics_per_host, reduce_gbs, copy_gbs, step_overhead_us,
// intra_cache_bw_gbs, cache_bytes, host_bw_gbs; keys it does not give keep f's values.
// Errors: braidInvalidArgument naming the file, the line and the problem (unknown key; a
// value that is not a finite number >= 0, or > 0 for the bandwidths other than
// intra_cache_bw_gbs and host_bw_gbs, where 0 means none); braidSystemError when it cannot
// be read.
braidResult_t loadCalibration(const std::string& path, Fabric* f);
// The same from text (name stands for the file in messages).
braidResult_t parseCalibration(const std::string& text, const std::string& name, Fabric* f);
// The figures of f as a calibration file's text.
std::string formatCalibration(const Fabric& f);

}  // namespace braid::tuning
