// What the sources of topology_detect_test share: where the hwloc XML fixtures are, the skip
// when a fixture directory is missing, and a look through a model's notes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "topology/topology.h"
#include "topology_fixtures.h"

namespace braid::topo::fixtures {

inline std::string hwlocDir() { return sharedDir() + "/topologies/hwloc"; }

inline bool exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

// Whether one of the model's notes contains `part`.
inline bool hasNote(const System& sys, const std::string& part) {
  for (auto& n : sys.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace braid::topo::fixtures

// Skips the test, naming the directory, when the fixture directory `dir` is missing.
#define REQUIRE_DIR(dir)                                              \
  do {                                                                \
    if (!braid::topo::fixtures::exists(dir))                          \
      GTEST_SKIP() << "fixture directory " << (dir) << " is missing"; \
  } while (0)
