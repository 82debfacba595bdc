/// @file report.h
/// What global rank 0 prints: nccl-tests' table (src/common.cu and src/util.cu), one row per
/// size with out-of-place then in-place columns, and with -J the same run as nccl-tests' JSON
/// document (version 2).
///
/// Columns: size (bytes), count (elements), type, redop, root, then per placement time
/// (microseconds per call; "cputime" with -C), algbw and busbw (GB/s = 1e9 bytes/s) and
/// #wrong (N/A without -c); -I 1 adds i_min, i_max, i_p99 (microseconds) and i_cv% after
/// each placement, -S 1 a local-time stamp at the end of the row.
///
/// The JSON document, written as the run goes (one object; booleans are the strings "true"
/// and "false", as nccl-tests writes them; a NaN is the string "nan"):
/// @code
///   {"version": 2, "start_time": "2026-12-05 13:40:02", "args": [...], "env": [...],
///    "nccl_version": <braidGetVersion>,
///    "config": {"nthreads": 2, "ngpus": 1, "minimum_bytes": 8, "maximum_bytes": 1024,
///               "step_factor": 2 (or "step_bytes"), "warmup_iters": 5, "iterations": 20,
///               "aggregated_iterations": 1, "validation": 1, "graph": 0,
///               "blocking_collectives": "false", "per_iter_timing": "false",
///               "parallel_init": "false",
///               "devices": [{"rank": 0, "group": 0, "pid": 4242, "hostname": "h0",
///                            "device": 0, "device_hex": "cpu", "device_info": "host"}, ...]},
///    "results": [{"size": 1024, "count": 256, "type": "float", "redop": "sum",
///                 "root": "    -1",
///                 "out_of_place": {"time": 12.5, "alg_bw": 0.08, "bus_bw": 0.08, "nwrong": 0},
///                 "out_of_place_per_iter": {...},   (-I 1: min_us, max_us, avg_us, p50_us,
///                                                    p95_us, p99_us, stdev_us, cv_pct,
///                                                    times_us, per_process_max_times_us)
///                 "in_place": {...} or null, "in_place_per_iter": {...},
///                 "actual_iterations": 20, "experiment_name": ""}, ...],
///    "out_of_bounds": {"count": 0, "okay": "true"},
///    "average_bus_bandwidth": {"bandwidth": 0.08, "okay": "unchecked"},
///    "errors": [], "end_time": "2026-12-05 13:40:03"}
/// @endcode
/// "time" is "cpu_time" with -C; "nwrong" is null without -c; "in_place" is null for the
/// collectives without an in-place form (all-to-all, all-to-all-v, send/recv);
/// per_process_max_times_us (one row per process) only with several processes.
#ifndef BRAID_PERF_REPORT_H_
#define BRAID_PERF_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "options.h"

namespace braid::perf {

/// One placement's measurement.
struct Measurement {
  double seconds = 0;  ///< per call, reduced over ranks as -a says (-C: the issuing loop only)
  double algbw = 0;    ///< GB/s
  double busbw = 0;    ///< GB/s
  int64_t wrong = -1;  ///< wrong elements summed over ranks; -1 when not checked
  /// -I 1: each iteration's seconds per call, the largest over all ranks; else empty.
  std::vector<double> iter_seconds;
  /// -I 1 with several processes: per process, each iteration's largest over its ranks.
  std::vector<std::vector<double>> process_iter_seconds;
};

/// Summary of per-iteration times (seconds), as nccl-tests' computeIterStats: p50 is the
/// element n/2 of the sorted times, p95 and p99 nearest-rank percentiles, stdev the
/// population standard deviation, cv_pct = 100 stdev / avg.
struct IterStats {
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0, cv_pct = 0;
};
/// @param seconds at least one time
IterStats ComputeIterStats(const std::vector<double>& seconds);

/// One rank's line of "# Using devices".
struct DeviceRecord {
  int rank = 0;
  int pid = 0;
  std::string hostname;
  int device = 0;
};

/// -M 1: what the memory report prints, in bytes (RSS figures are the largest over processes).
struct MemoryFigures {
  int64_t init_rss = 0;        ///< resident memory the communicator's creation added
  int64_t buffers_rss = 0;     ///< resident memory the benchmark's buffers added
  int64_t collective_rss = 0;  ///< resident memory the sweep added after that
  int64_t peak_rss = 0;        ///< the process's peak resident set (VmHWM)
  int64_t buffer_bytes = 0;    ///< bytes Braid's perf harness allocated per rank, the most
  int64_t device_bytes = 0;    ///< of which device memory (-B device)
};

/// This process's resident set in bytes (/proc/self/statm), or -1 if it cannot be read.
int64_t ResidentBytes();
/// This process's peak resident set in bytes (VmHWM in /proc/self/status), or -1.
int64_t PeakResidentBytes();
/// "512 B", "1.50 KB", "64.0 MB", "2 GB": 1024-based, 2 decimals below 10, 1 below 100.
std::string MemoryString(double bytes);

/// -J's file: nccl-tests' JSON document, opened like nccl-tests' (fopen "wx": an existing
/// file is never overwritten; FILE.0, FILE.1, ... are tried instead) and written by global
/// rank 0 as the run goes. Whatever stage the run stops at, the destructor leaves one valid
/// JSON object.
class JsonDocument {
 public:
  /// @param opened  out: the name actually created
  /// @param error   out: why none could be (permissions, a missing folder)
  /// @return nullptr after setting *error
  static std::unique_ptr<JsonDocument> Create(const std::string& path, std::string* opened,
                                              std::string* error);
  ~JsonDocument();
  JsonDocument(const JsonDocument&) = delete;
  JsonDocument& operator=(const JsonDocument&) = delete;

  /// version, start_time, args, env (BRAID_UNIQUE_ID's secret withheld), nccl_version.
  void Begin(const std::vector<std::string>& args);
  void Config(const Options& o, const std::vector<DeviceRecord>& devices);
  void BeginResults();
  /// One finished result object (its JSON text).
  void Row(const std::string& object);
  void EndResults(int errors, double avg_busbw);
  /// errors (last_error unless empty) and end_time; closes the object.
  void Finish(const std::string& last_error);

 private:
  explicit JsonDocument(FILE* f) : f_(f) {}
  FILE* f_;
  enum class Stage { kNone, kBegun, kResults, kEnded, kFinished } stage_ = Stage::kNone;
  bool any_row_ = false;
};

class Report {
 public:
  /// json: where the JSON document goes (nullptr: none); the caller keeps it.
  Report(const Collective& coll, const Options& o, int nranks, JsonDocument* json);

  /// The "#  Rank ..." lines, and the JSON config with them.
  void PrintDevices(const std::vector<DeviceRecord>& devices) const;
  void PrintHeader() const;
  void BeginRow(size_t bytes, size_t count, braidDataType_t dtype, braidRedOp_t op, int root);
  void AddResult(const Measurement& m);
  /// The in-place columns of a collective without an in-place form.
  void AddNotApplicable();
  void EndRow();
  /// Out of bounds values, average bus bandwidth, "Collective test concluded".
  void PrintFooter(int errors, double avg_busbw) const;
  /// -M 1: "# Host memory usage" and what the figures are.
  void PrintMemory(const MemoryFigures& m) const;

 private:
  const Collective& coll_;
  const Options& o_;
  const int nranks_;
  JsonDocument* const json_;
  std::string row_;  // the JSON object being built
  int results_ = 0;
};

/// What process 0 prints before the ranks start: the collective, the sweep's settings in
/// nccl-tests' words ("# nThread 1 nGpus 1 minBytes ..."), a line for each setting that
/// changes how the table reads (-A, -z, -I, -p 1, -T, -R) and FlagNotes' lines.
void PrintRunHeader(const Collective& coll, const Options& o);

/// "%7.2f"-style time as nccl-tests prints it: two decimals below 100 us, one below 10 ms.
std::string TimeString(double usec);

}  // namespace braid::perf

#endif  // BRAID_PERF_REPORT_H_
