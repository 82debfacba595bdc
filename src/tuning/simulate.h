// The schedule simulator: plays every rank's schedule of one collective (the steps the
// executor would run, from the algorithm table) against a Fabric and predicts when the last
// rank finishes. Slower than the closed forms of cost_model.h but exact to the schedules:
// it sees pipelining across pieces, dependencies, and contention where steps share a port,
// a NIC or a rank's one progress engine (the executor's thread). Used to check the closed
// forms and by braid-sim --simulate at small rank counts.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/schedule.h"
#include "tuning/fabric.h"

namespace braid::tuning {

struct SimResult {
  bool ok = false;
  std::string error;   // why not ok: unsupported call, deadlock (no step can progress), ...
  double time_us = 0;  // when the last rank's last step finished
  // With calls > 1: the time per call when calls follow each other back to back (the run
  // over the calls), as
  // nccl-tests times them (rooted collectives overlap: the root starts the next call while
  // the last ranks still receive); with one call, time_us.
  double per_call_us = 0;
  size_t steps = 0;        // steps played, all ranks
  size_t messages = 0;     // sends matched with receives
  double net_bytes = 0;    // bytes that crossed hosts
  double intra_bytes = 0;  // bytes between ranks of one host
};

// Plays algo's schedules for every rank of the fabric, under the model described at the top
// of simulate.cc (eager sends into FIFOs of fabric.fifo_slots pieces; ports, NICs and each
// rank's progress engine taken first come, first served). `proto` gives the call (count,
// dtype, op, root; coll is algo's); its rank,
// nranks, hostOf (when the fabric has more than one host), ring and pieceElems are set from
// the fabric (pieceElems = chunk_bytes / elemSize, at least 1). All-to-all-v: every rank gets
// proto's count and displacement arrays, so they must describe an exchange that is the same
// from every rank's side (uniform blocks). Not ok, with the error, when the fabric is invalid
// or over maxRanks ranks, the algorithm does not support the call (its reason), a schedule is
// malformed (a peer or dependency out of range, a receive whose size differs from its send, a
// send nobody receives) or deadlocks ("deadlock: rank R waits at step S (recv from rank P)").
// `calls` plays the call that many times back to back (each rank starts the next once it
// finished the last, messages of a later call queue behind an earlier one's), for
// per_call_us.
SimResult simulateSchedules(const AlgorithmInfo& algo, const CollArgs& proto, size_t elemSize,
                            const Fabric& fabric, int maxRanks = 1024, int calls = 1);

}  // namespace braid::tuning
