// braid-sim's model building and its --what-if comparison (what_if.cc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "braid/braid_model.h"

namespace braid_sim {

struct Dtype {
  const char* name;
  braidDataType_t type;
  size_t size;
};

// Reads topoFile and builds *model with config: 0, or the exit status after saying why (1 a
// file or model that fails, 2 the flags' fault).
int makeModel(const std::string& topoFile, const braidModelConfig& config, braidModel_t* model);

// Checks that the largest size up to maxBytes (nccl-tests' size column) is a call the model
// prices (at most 2^48 bytes on all ranks) for each collective: 0, or 2 after a message
// naming -e.
int checkSizes(braidModel_t model, const std::vector<const char*>& colls, const Dtype& dtype,
               size_t minBytes, size_t maxBytes);

// --what-if SPEC (braid-sim --help): `algo=A,B` compares two algorithm sets on `model`,
// `topo=FILE` the job on topoFile with the same job on FILE. Prints, per collective and size,
// each side's pick, time, busbw and where its time goes, and B's time over A's; both sides at
// the same size (each side's count per rank derived from its own ranks). Returns the exit
// status (2 for a spec that names no algorithm of a collective, names NVLS under --nvls off,
// or an unreadable FILE).
int runWhatIf(braidModel_t model, const std::string& spec, const std::string& topoFile,
              const braidModelConfig& config, const std::vector<const char*>& colls,
              const Dtype& dtype, size_t minBytes, size_t maxBytes, size_t factor);

}  // namespace braid_sim
