// The machine as the cost model sees it: where each rank runs and what a transfer between
// two ranks costs. Built from a communicator's layout and a calibration file, or from a
// topology model replicated over hosts (braid-sim). Read by the analytic cost model
// (cost_model.h) and by the schedule simulator (simulate.h).
#pragma once

#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "braid/braid.h"

namespace braid::tuning {

// LinkCost, Fabric and uniformFabric live with the closed forms that read them
// (algorithms/cost.h); the tuning part fills them and names them here.
using braid::Fabric;
using braid::LinkCost;
using braid::uniformFabric;

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
