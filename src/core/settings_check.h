// Init's check of this process's settings (issue 38): a value that would fail on some layout
// fails init on every layout, not only where a transport or rank 0 first uses it.
#pragma once

#include <string>

#include "braid/braid.h"
#include "tuning/fabric.h"
#include "tuning/table.h"

namespace braid {

// Checks config()'s settings for a communicator of nranks, whatever transport the job uses
// and whichever rank this is: the socket interface (BRAID_SOCKET_IFNAME / NCCL_SOCKET_IFNAME
// must match an up IPv4 interface here), the transport (BRAID_TRANSPORT=ucx needs a build
// with UCX), the algorithm names (BRAID_ALGO must parse, NCCL_ALGO may name only Braid's or
// NCCL's algorithms), the ring (BRAID_RING / NCCL_RINGS must hold every rank once), the files
// (BRAID_TUNE_FILE and BRAID_TUNE_TABLE must load; BRAID_TOPO_DUMP_FILE's folder must be
// writable) and the numbers that read but lie out of range (configOutOfRange: sizes, counts,
// seconds). BRAID_TOPO_FILE is loaded, and so checked, by init itself on every rank.
// *calibrated (preset with the default figures) and *table receive the tuning files' contents.
// Errors: braidInvalidArgument naming the variable as the user set it, the value and why.
braidResult_t checkSettings(int nranks, tuning::Fabric* calibrated, tuning::MeasuredTable* table);

// The last error (a loader's, about the file a setting names) recorded again after the
// variable as the user set it and its value, `VAR="value": ...`, unless it names the variable
// already; returns braidInvalidArgument.
braidResult_t settingFailed(const std::string& setting, const std::string& value);

}  // namespace braid
