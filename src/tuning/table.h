// braid-tune's measured table as the selector reads it: for each collective and size measured
// on a job of the same rank count, the algorithm that was fastest. BRAID_TUNE_TABLE names the
// JSON file braid-tune --json wrote; when given it takes precedence over the cost model for the
// sizes it covers (NCCL's tuner plugins work the same way).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "braid/braid.h"

namespace braid::tuning {

struct MeasuredEntry {
  Collective coll = Collective::kAllReduce;
  size_t bytes = 0;  // nccl-tests' size column, as braid-tune writes it
  std::string best;  // the fastest algorithm measured
};

struct MeasuredTable {
  std::vector<MeasuredEntry> entries;
  // The best algorithm measured for coll at the size nearest `bytes` (by ratio), if one lies
  // within a factor of 2; nullptr otherwise.
  const MeasuredEntry* lookup(Collective coll, size_t bytes) const;
  // A compact one-line form ("allreduce 8 rhd;...") for sending to the other ranks, and back.
  std::string encode() const;
  static bool decode(const std::string& text, MeasuredTable* out);
};

// Reads braid-tune's JSON (an array of objects with "collective", "bytes", "ranks", "best"),
// keeping the rows measured on `nranks` ranks. Errors: braidSystemError when the file cannot
// be read; braidInvalidArgument naming the file and the problem (not JSON, not an array, a
// row without those fields, an unknown collective or algorithm); a table with no row for
// nranks is braidInvalidArgument too (it would silently do nothing).
braidResult_t loadMeasuredTable(const std::string& path, int nranks, MeasuredTable* out);

}  // namespace braid::tuning
