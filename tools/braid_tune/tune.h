// braid-tune's parts, one file each: the measured sweep (sweep.cc: every algorithm of each
// collective and size, timed in interleaved rounds), the calibration (calibrate.cc: the cost
// model's link figures for BRAID_TUNE_FILE), the results (results.cc: the summary lines, the
// JSON table for BRAID_TUNE_TABLE, the plot) and the command line (braid_tune.cc). They run
// over the public API (braid/braid.h) and the perf binaries' harness (perf/: nccl-tests'
// flags, the launch, the call shapes).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "perf/common.h"
#include "perf/launch.h"
#include "perf/options.h"

namespace braid::perf::tune {

struct Tuned {
  const char* name;  // braidListAlgorithms' collective name
  CollCounts (*counts)(size_t count, int nranks);
  braidResult_t (*run)(const void* send, void* recv, const CollCounts& c, braidDataType_t t,
                       braidComm_t comm);
};

// The collectives braid-tune measures: all-reduce, all-gather, reduce-scatter, broadcast,
// reduce and all-to-all, in that order (calibrate() times the first three).
inline constexpr int kNumTuned = 6;
extern const Tuned kTuned[kNumTuned];

struct Cell {
  std::string algo;
  double measured_us = -1, predicted_us = -1;  // -1: cannot run this call
};
struct Row {
  const char* collective;
  size_t bytes = 0, count = 0;
  std::vector<Cell> cells;
  std::string chosen, best;
  double regret = 0;
};

struct Flags {
  std::vector<const Tuned*> colls;
  std::string json, png;
  int rounds = 5;  // --rounds
};

// Ends the job (Abort) after "braid-tune: WHAT: " and comm's last error, unless rc is success.
void check(braidResult_t rc, const char* what, braidComm_t comm, const Launch& l);

// The time of one call of t forced to `algo`, the slowest rank's mean over iters calls after
// `warmup` more, in us (every rank calls it).
double timeCall(braidComm_t comm, const Tuned& t, const char* algo, const void* send, void* recv,
                const CollCounts& c, braidDataType_t dtype, int iters, int warmup, const Launch& l);

// One rank's sweep over f.colls and o's sizes (sweep.cc); rank 0 prints each row and fills
// *rows.
void tuneRank(const Options& o, const Flags& f, const Launch& l, int thread,
              std::vector<Row>* rows);

// braid-tune --calibrate FILE on one rank (calibrate.cc); rank 0 writes FILE.
int calibrate(const Options& o, const Launch& l, int thread, const std::string& path);

// Rank 0's closing lines (results.cc): per collective, the sizes whose regret is at most 1.10,
// and per algorithm the median distance of its predictions from its measurements.
void printSummary(const Flags& f, const std::vector<Row>& rows);
// The table as JSON (--json, the BRAID_TUNE_TABLE format); false after a message if it
// cannot be written.
bool writeJson(const std::string& path, const std::vector<Row>& rows, int nranks);
// The plot (--png) through gnuplot, its script and data beside it; false after a message if
// they cannot be written or gnuplot fails.
bool writePlot(const std::string& png, const std::vector<Row>& rows);

}  // namespace braid::perf::tune
