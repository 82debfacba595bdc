/// @file options.h
/// The perf binaries' command line: every flag of nccl-tests' binaries (NVIDIA/nccl-tests
/// src/common.cu, short and long forms, with its meaning), plus Braid's -A (algorithm) and
/// -B (host, shared or device buffers). Every binary takes the same flags; those that do not
/// apply to its collective (-o without a reduction, -r without a root) are ignored, and those
/// that ask for something a host build has no counterpart of (CUDA graphs, CTA policies,
/// device-side kernels) are accepted and named once in a '#' line of the output (FlagNotes).
/// Integers are read as nccl-tests reads them (strtol base 0: 16, 0x10 and 020 are the same).
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
  int run_cycles = 1;      // -N: sweeps over the sizes, each printed; 0 repeats until killed
  int check = 1;           // -c: validated calls per size and placement (0: none)
  int average = 1;         // -a: 0 rank 0, 1 mean, 2 min, 3 max over ranks
  int blocking = 0;        // -z: 1 wait and barrier after each call, 2 wait only
  int root = 0;            // the root of rooted collectives, unless all_roots
  bool all_roots = false;  // -r all (or -1, as nccl-tests): every rank in turn
  int parallel_init = 0;   // -p: recorded; Braid's thread ranks always init concurrently
  int stream_null = 0;     // -y: with -B device, the legacy default CUDA stream (one thread)
  int timeout_sec = 0;     // -T: braidConfig_t.timeoutSec of the communicator; 0: BRAID_TIMEOUT
  int cuda_graph = 0;      // -G: accepted; Braid captures no CUDA graph (FlagNotes)
  bool report_cputime = false;     // -C: time the issuing loop only, not the wait for the stream
  bool report_timestamps = false;  // -S: a local-time stamp at the end of each row
  int local_register = 0;          // -R: 1 braidCommRegister the buffers; 2 the same (no windows)
  int cta_policy = -1;             // -x: accepted, -1 unset; no CTAs on a host (FlagNotes)
  int device_impl = 0;             // -D: accepted (needs -R 2, as nccl-tests); no device API
  int device_cta_count = 16;       // -V: accepted, 1..128; no device API
  bool memory_report = false;      // -M: the process's RSS and Braid's buffers after the footer
  int unalign = 0;                 // -u: buffers start this many elements past their allocation
  bool per_iter_timing = false;    // -I: each iteration timed; min/max/p99/cv% columns
  std::string algorithm;           // -A: "" or "auto" for the default rule, "list", or a name
  std::string json_path;           // -J: nccl-tests' version-2 JSON document ("" for none)
  std::string trace_dir;           // -X: the flight recorder's dumps go there at the end
  bool device_memory = false;      // -B device: the collectives' buffers are device memory
  bool shared_memory = false;      // -B shared: host buffers from braidMemAllocHost
  std::string given;               // the short letters of the flags given, in order
  std::vector<braidDataType_t> types{braidFloat32};
  std::vector<braidRedOp_t> ops{braidSum};

  /// True when flag c (its short letter) was on the command line.
  bool was_given(char c) const { return given.find(c) != std::string::npos; }
  /// True when -A names an algorithm to force (not empty, "auto" or "list").
  bool forces_algorithm() const {
    return !algorithm.empty() && algorithm != "auto" && algorithm != "list";
  }
};

/// Parses argv into *o.
/// @return -1 to go on, else the exit status to return at once (0 after -h).
///         A bad flag prints a message naming it and exits with status 2.
int ParseOptions(int argc, char** argv, Options* o);

/// One '#' line for each flag given that asks for something this run has no counterpart of
/// (-G: CUDA graphs, -x: a CTA policy, -D/-V: device-side kernels, -R 2: symmetric windows,
/// -y 1 on host buffers, -p 0), or that reads differently on a host (-C 1 on host buffers),
/// saying what runs instead; rank 0 prints them once.
std::vector<std::string> FlagNotes(const Options& o);

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
/// The most iterations -I 1 keeps the times of (-n with -I 1), and the most elements -u
/// shifts the buffers by.
constexpr int kMaxTimedIters = 1 << 20;
constexpr int kMaxUnalign = 1 << 20;

}  // namespace braid::perf

#endif  // BRAID_PERF_OPTIONS_H_
