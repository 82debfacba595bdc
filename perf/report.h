/// @file report.h
/// What global rank 0 prints: nccl-tests' table (src/common.cu's Reporter), one row per
/// size with out-of-place then in-place columns, and with -J the same rows as JSON Lines.
///
/// A JSON row (one object per line, written when the row is complete):
/// @code
///   {"collective": "allgather", "binary": "all_gather_perf", "algorithm": "ring",
///    "size": 1048576, "count": 87381, "type": "float", "redop": "none", "root": -1,
///    "nranks": 3,
///    "out_of_place": {"time_us": 812.5, "algbw": 1.29, "busbw": 0.86, "wrong": 0},
///    "in_place": {"time_us": 790.1, "algbw": 1.33, "busbw": 0.88, "wrong": 0}}
/// @endcode
/// size is bytes (the table's size column), count elements (its count column), time_us
/// microseconds per call, algbw and busbw GB/s (1e9 bytes/s). algorithm is the -A name or
/// "auto". wrong is null without validation (-c 0); in_place is null for collectives that
/// have no in-place form (all-to-all, all-to-all-v, send/recv).
#ifndef BRAID_PERF_REPORT_H_
#define BRAID_PERF_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "common.h"
#include "options.h"

namespace braid::perf {

/// One placement's measurement.
struct Measurement {
  double seconds = 0;  ///< per call, reduced over ranks as -a says
  double algbw = 0;    ///< GB/s
  double busbw = 0;    ///< GB/s
  int64_t wrong = -1;  ///< wrong elements summed over ranks; -1 when not checked
};

class Report {
 public:
  /// json: where JSON rows go (nullptr: none); the caller keeps it open.
  Report(const Collective& coll, const Options& o, int nranks, FILE* json);

  void PrintHeader() const;
  void BeginRow(size_t bytes, size_t count, braidDataType_t dtype, braidRedOp_t op, int root);
  void AddResult(const Measurement& m);
  /// The in-place columns of a collective without an in-place form.
  void AddNotApplicable();
  void EndRow();

 private:
  const Collective& coll_;
  const Options& o_;
  const int nranks_;
  FILE* const json_;
  std::string row_;  // the JSON object being built
  int results_ = 0;
};

/// "%7.2f"-style time as nccl-tests prints it: two decimals below 100 us, one below 10 ms.
std::string TimeString(double usec);

}  // namespace braid::perf

#endif  // BRAID_PERF_REPORT_H_
