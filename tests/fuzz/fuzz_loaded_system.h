// What both topology fuzz targets do with a system their loader accepted: route it, build its
// rings (and, with hostTree, the host tree), print it, and dump it as NCCL XML, which must
// load back (abort with the dump and the loader's message if it does not).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "topology/topology.h"

inline void fuzzLoadedSystem(braid::topo::System& sys, bool hostTree) {
  braid::topo::Paths paths = braid::topo::computePaths(sys);
  braid::topo::buildRings(sys, paths);
  if (hostTree) {
    braid::topo::buildHostTree(sys, paths);
    braid::topo::toText(sys);
  }
  braid::topo::toJson(sys);
  std::string xml;
  if (braid::topo::dumpNcclTopoXml(sys, &xml) == braidSuccess) {
    braid::topo::System again;
    if (braid::topo::loadNcclTopoXmlString(xml, "fuzz-dump.xml", &again) != braidSuccess) {
      fprintf(stderr, "dump does not load back: %s\n%s\n", braid::lastError(), xml.c_str());
      abort();
    }
  }
}
