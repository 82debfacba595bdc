// libFuzzer target for the perf binaries' flags (perf/options.cc ParseOptions): the input is
// an argument vector (arguments separated by NUL bytes). Any vector must parse, or be refused
// with a message (UsageError, built to throw here instead of exiting), never crash, hang or
// ask for unbounded memory; one that parses must give a sweep of 1..kMaxSizes increasing
// sizes from -b to -e, at least one datatype and op, and a thread count of at least 1.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "options.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRAID_DEBUG", "NONE", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"all_reduce_perf"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  if (!current.empty() && args.size() < 64) args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  braid::perf::Options o;
  try {
    if (braid::perf::ParseOptions(static_cast<int>(args.size()), argv.data(), &o) >= 0)
      return 0;  // -h
  } catch (const braid::perf::UsageErrorThrown& e) {
    if (e.message.empty()) __builtin_trap();
    return 0;
  }
  if (o.nthreads < 1 || o.types.empty() || o.ops.empty() || o.min_bytes > o.max_bytes)
    __builtin_trap();
  const std::vector<size_t> sizes = braid::perf::Sizes(o);
  if (sizes.empty() || sizes.size() > braid::perf::kMaxSizes || sizes.front() != o.min_bytes)
    __builtin_trap();
  for (size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1] || sizes[i] > o.max_bytes) __builtin_trap();
  return 0;
}
