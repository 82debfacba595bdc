// Where the topology tests find their fixtures: $BRAID_SHARED_DIR/topologies (default
// <source>/../shared, as in CI), and how they skip, saying so, when a user's clone has none.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace braid::topo::fixtures {

inline std::string sharedDir() {
  if (const char* env = std::getenv("BRAID_SHARED_DIR")) return env;
  return std::string(BRAID_SOURCE_DIR) + "/../shared";
}

inline std::string topoDir() { return sharedDir() + "/topologies"; }

// The whole file, or "" when it cannot be read.
inline std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace braid::topo::fixtures

// Skips the test, naming the directory, when the fixture directory `dir` is absent.
#define REQUIRE_FIXTURE_DIR(dir)                                                      \
  do {                                                                                \
    if (!std::filesystem::is_directory(dir))                                          \
      GTEST_SKIP() << "topology fixtures not found at " << (dir)                      \
                   << " (set BRAID_SHARED_DIR to the directory holding topologies/)"; \
  } while (0)
