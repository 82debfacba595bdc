// Device schedules: NCCL's GPU-kernel algorithms that Braid's host executor has no step kind
// for, written as schedules of phases so the cost model can price them from what they move.
//   NVLS      NVLink SHARP all-reduce within one NVLink domain (a host's NVSwitches, or an
//             MNNVL rack's NVLink switch trays): each rank asks the switches for the sum of
//             its 1/n of every piece (multimem.ld_reduce: the switch reads that shard from
//             every GPU and reduces it in the switch), then stores the sum once to a
//             multicast address (multimem.st: the switch writes it to every GPU). Also
//             reduce-scatter (the first half) and all-gather (the second).
//   NVLSTree  NVLS within each domain, and between domains a tree over the network on each
//             rank's reduced shard (NCCL 2.18+ on NVLS systems of more than one node).
//   PAT       Parallel Aggregated Trees (NCCL 2.23+): all-gather and reduce-scatter with one
//             rank per node in ceil(log2 n) rounds of aggregated messages, each rank sending
//             and receiving (n-1)/n of the data as a ring does, but with log n latency.
// A phase is what every rank moves through one resource for the whole call: bytes out (tx)
// and in (rx) on its NVLink to the switches or its share of its node's NICs, or bytes its
// GPU reduces. Phases run pipelined over pieces (NVLS: nvls_channels x nvls_chunk_bytes of
// the vector; PAT: the fabric's chunk), so the time is
//   fill  = sum over phases of rounds x (latency_us + one piece's transfer): a piece is
//           stored and forwarded at every round (a tree's hop), plus
//   busy  = the busiest resource's time over all pieces but the first,
// T = fill + busy x (P-1)/P, P the pieces. Sources: NCCL's release notes (2.17 NVLS, 2.18
// NVLSTree, 2.23 PAT) and its environment documentation (NCCL_NVLS_ENABLE,
// NCCL_NVLS_NCHANNELS, NCCL_NVLS_CHUNKSIZE, NCCL_PAT_ENABLE); docs/nvls-mnnvl-pat.md.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

// Where a phase's time goes: a rank's NVLink to the switches (or peers), its share of the
// node's NICs, its GPU's reduction.
enum class PhaseKind : uint8_t { kNvlink, kNetwork, kReduce };
const char* phaseKindName(PhaseKind k);  // "nvlink", "network", "reduce"

struct Phase {
  PhaseKind kind = PhaseKind::kNvlink;
  const char* what = "";  // one line, for braid-sim
  double tx = 0, rx = 0;  // bytes per rank out of / into the resource (reduce: tx reduced)
  double gbs = 0;         // the resource's bandwidth per rank and direction, GB/s
  double latency_us = 0;  // one piece's fixed cost per round of the phase
  int rounds = 1;         // rounds a piece takes through it (a tree's hops up and down)
  // Bytes per rank of one piece through the phase, when it pipelines at its own grain (the
  // network transport's steps); 0: max(tx, rx) / DeviceSchedule::pieces.
  double piece = 0;
};
struct DeviceSchedule {
  std::vector<Phase> phases;
  double pieces = 1;  // pipelining pieces of the call
};

// Where a call's time goes, microseconds: each resource's busy time over the call, latency =
// total minus the busiest resource (latencies, pipeline fill, waits), and the total.
struct TimeSplit {
  double nvlink_us = 0, network_us = 0, reduce_us = 0, latency_us = 0, total_us = 0;
};
// The time of a device schedule (formula at the top) and where it goes.
TimeSplit deviceScheduleTime(const DeviceSchedule& s);

// One NCCL device algorithm for one collective.
struct DeviceAlgorithm {
  const char* name;  // NCCL's name, lower case: "nvls", "nvlstree", "pat"
  Collective coll;
  const char* description;
  // nullptr when the algorithm can run on the fabric, else why not.
  const char* (*supports)(const Fabric& f);
  // The schedule of a call of `bytes` (nccl-tests' size column) on f.
  void (*build)(const Fabric& f, double bytes, DeviceSchedule* out);
};
const std::vector<DeviceAlgorithm>& deviceAlgorithms();

}  // namespace braid
