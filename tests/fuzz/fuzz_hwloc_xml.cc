// libFuzzer target for the hwloc XML loader (lstopo --of xml, v1/v2/v3): any input must load
// (and then route, ring, print and dump as NCCL XML that loads back) or be refused with
// braidInvalidArgument, never crash or hang.
// Build: meson with clang (tests/fuzz/meson.build adds it); run: ./fuzz_hwloc_xml CORPUS_DIR,
// seeding CORPUS_DIR with hwloc XML files (../shared/topologies/hwloc); scripts/fuzz.sh does both.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz_loaded_system.h"
#include "topology/topology.h"

// Refusals are the common case here: keep them off stderr.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRAID_DEBUG", "NONE", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  braid::topo::System sys;
  if (braid::topo::loadHwlocXmlString(text, "fuzz-hwloc.xml", &sys) != braidSuccess) return 0;
  fuzzLoadedSystem(sys, true);
  return 0;
}
