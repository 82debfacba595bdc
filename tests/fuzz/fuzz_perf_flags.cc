// libFuzzer target for the perf binaries' flags (perf/options.cc ParseOptions): the input is
// an argument vector (arguments separated by NUL bytes). Any vector must parse, or be refused
// with a message (UsageError, built to throw here instead of exiting), never crash, hang or
// ask for unbounded memory; one that parses must give a sweep of 1..kMaxSizes increasing
// sizes from -b to -e, at least one datatype and op, a thread count of at least 1, every
// nccl-tests flag within the range it means something in (-z 0..2, -a 0..3, -R 0..2, -x -1..2,
// -V 1..128, -u 0..kMaxUnalign, -I's iterations at most kMaxTimedIters, -D only with -R 2), and
// FlagNotes lines that start with '#'.
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
  if (o.run_cycles < 0 || o.blocking < 0 || o.blocking > 2 || o.average < 0 || o.average > 3 ||
      o.local_register < 0 || o.local_register > 2 || o.cta_policy < -1 || o.cta_policy > 2 ||
      o.device_cta_count < 1 || o.device_cta_count > 128 || o.unalign < 0 ||
      o.unalign > braid::perf::kMaxUnalign || o.timeout_sec < 0 || o.cuda_graph < 0 ||
      (o.per_iter_timing && o.iters > braid::perf::kMaxTimedIters) ||
      (o.device_impl > 0 && o.local_register != 2) || (o.device_memory && o.shared_memory))
    __builtin_trap();
  for (const std::string& note : braid::perf::FlagNotes(o))
    if (note.empty() || note[0] != '#') __builtin_trap();
  const std::vector<size_t> sizes = braid::perf::Sizes(o);
  if (sizes.empty() || sizes.size() > braid::perf::kMaxSizes || sizes.front() != o.min_bytes)
    __builtin_trap();
  for (size_t i = 1; i < sizes.size(); ++i)
    if (sizes[i] <= sizes[i - 1] || sizes[i] > o.max_bytes) __builtin_trap();
  return 0;
}
