// libFuzzer target for the hwloc XML loader (lstopo --of xml, v1/v2/v3): any input must load
// (and then route, ring, print and dump as NCCL XML that loads back) or be refused with
// braidInvalidArgument, never crash or hang.
// Build: meson with clang (tests/fuzz/meson.build adds it); run: ./fuzz_hwloc_xml CORPUS_DIR,
// seeding CORPUS_DIR with hwloc XML files (../shared/topologies/hwloc); scripts/fuzz.sh does both.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
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
  braid::topo::Paths paths = braid::topo::computePaths(sys);
  braid::topo::buildRings(sys, paths);
  braid::topo::buildHostTree(sys, paths);
  braid::topo::toJson(sys);
  braid::topo::toText(sys);
  std::string xml;
  if (braid::topo::dumpNcclTopoXml(sys, &xml) == braidSuccess) {
    braid::topo::System again;
    if (braid::topo::loadNcclTopoXmlString(xml, "fuzz-dump.xml", &again) != braidSuccess) {
      // A dump must always load back.
      fprintf(stderr, "dump does not load back: %s\n%s\n", braid::lastError(), xml.c_str());
      abort();
    }
  }
  return 0;
}
