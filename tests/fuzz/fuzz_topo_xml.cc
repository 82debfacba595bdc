// libFuzzer target for the NCCL topology XML loader: any input must load (and then route,
// print and dump) or be refused with braidInvalidArgument, never crash or hang.
// Build: meson with clang (tests/fuzz/meson.build adds it); run: ./fuzz_topo_xml CORPUS_DIR,
// seeding CORPUS_DIR with ../shared/topologies/nccl/*.xml.
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
  if (braid::topo::loadNcclTopoXmlString(text, "fuzz.xml", &sys) != braidSuccess) return 0;
  fuzzLoadedSystem(sys, false);
  return 0;
}
