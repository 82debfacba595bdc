// Where the topology tests find their fixtures: $BRAID_SHARED_DIR/topologies (default
// <source>/../shared, as in CI), and how they skip, saying so, when a user's clone has none.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "topology/topology.h"

namespace braid::topo::fixtures {

inline std::string sharedDir() {
  if (const char* env = std::getenv("BRAID_SHARED_DIR")) return env;
  return std::string(BRAID_SOURCE_DIR) + "/../shared";
}

inline std::string topoDir() { return sharedDir() + "/topologies"; }

// The NCCL topology and graph files.
inline std::string ncclDir() { return sharedDir() + "/topologies/nccl"; }

// The whole file, or "" when it cannot be read.
inline std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Whether hwloc did the counting (its "hwloc ... package(s)" note), so that counts only hwloc
// gives (packages, cores, PUs) can be checked.
inline bool hwlocCounted(const System& sys) {
  for (const auto& n : sys.notes)
    if (n.rfind("hwloc ", 0) == 0 && n.find("package(s)") != std::string::npos) return true;
  return false;
}

// hwloc's counts for the nvidiagpunumanodes fsroot (its *.output): a POWER9 node with 2
// packages, 8 cores, 32 PUs and CPUs on NUMA nodes 0 and 8. Shared by the tests that read the
// snapshot extracted and as its tarball.
inline void expectNvidiaGpuNumaNodesCounts(const System& sys) {
  EXPECT_EQ(sys.packages, 2);
  EXPECT_EQ(sys.cores, 8);
  EXPECT_EQ(sys.pus, 32);
  ASSERT_EQ(sys.cpus.size(), 2u);
  EXPECT_EQ(sys.cpus[0].numaid, 0);
  EXPECT_EQ(sys.cpus[1].numaid, 8);
}

}  // namespace braid::topo::fixtures

// Skips the test, naming the directory, when the fixture directory `dir` is absent.
#define REQUIRE_FIXTURE_DIR(dir)                                                      \
  do {                                                                                \
    if (!std::filesystem::is_directory(dir))                                          \
      GTEST_SKIP() << "topology fixtures not found at " << (dir)                      \
                   << " (set BRAID_SHARED_DIR to the directory holding topologies/)"; \
  } while (0)
