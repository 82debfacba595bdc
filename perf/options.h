/// @file options.h
/// The perf binaries' command line: nccl-tests' flags (src/common.cu) plus Braid's -A
/// (algorithm), -J (JSON rows) and -M (host or device buffers). Every binary takes the same flags;
/// those that do not apply to its collective (-o without a reduction, -r without a root) are
/// ignored.
#ifndef BRAID_PERF_OPTIONS_H_
#define BRAID_PERF_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::perf {

struct Options {
  const char* prog = "perf";
  int nthreads = 1;
  size_t min_bytes = 32u << 20;  // nccl-tests' defaults
  size_t max_bytes = 32u << 20;
  size_t step_bytes = 1u << 20;
  size_t step_factor = 1;
  int iters = 20;
  int warmup_iters = 5;
  int agg_iters = 1;
  int check = 1;
  int average = 1;  // 0 rank 0, 1 mean, 2 min, 3 max over ranks
  int blocking = 0;
  int root = 0;                // the root of rooted collectives, unless all_roots
  bool all_roots = false;      // -r all (or -1, as nccl-tests): every rank in turn
  std::string algorithm;       // -A: "" or "auto" for the default rule, "list", or a name
  std::string json_path;       // -J: where to write one JSON object per row ("" for none)
  bool device_memory = false;  // -M device: the collectives' buffers are device memory
  bool shared_memory = false;  // -M shared: host buffers from braidMemAllocHost
  std::vector<braidDataType_t> types{braidFloat32};
  std::vector<braidRedOp_t> ops{braidSum};

  /// True when -A names an algorithm to force (not empty, "auto" or "list").
  bool forces_algorithm() const {
    return !algorithm.empty() && algorithm != "auto" && algorithm != "list";
  }
};

/// Parses argv into *o.
/// @return -1 to go on, else the exit status to return at once (0 after -h).
///         A bad flag prints a message naming it and exits with status 2.
int ParseOptions(int argc, char** argv, Options* o);

/// The benchmark sizes in bytes, -b to -e by -f or -i, as nccl-tests steps them (at most
/// kMaxSizes, which ParseOptions enforces).
std::vector<size_t> Sizes(const Options& o);
/// How many sizes the sweep has, counting no further than limit.
size_t SizeCount(const Options& o, size_t limit);

/// Prints "prog: msg (see prog -h)" and exits with status 2. Built with
/// BRAID_PERF_USAGE_THROWS (the flags' fuzz target), it throws UsageErrorThrown instead.
[[noreturn]] void UsageError(const Options& o, const std::string& msg);
#ifdef BRAID_PERF_USAGE_THROWS
struct UsageErrorThrown {
  std::string message;
};
#endif

/// The most sizes one sweep may have (-b to -e by -f or -i); more is refused at parse time
/// (-b 1 -e 1G -i 1 would be 2^30 rows).
constexpr size_t kMaxSizes = 1u << 16;

}  // namespace braid::perf

#endif  // BRAID_PERF_OPTIONS_H_
