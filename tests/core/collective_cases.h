// The generated test matrix: cases built from the algorithm table (never hand-picked), run
// through the public API with the algorithm forced, checked against closed forms.
#pragma once

#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "braid/braid.h"

namespace braid::test {

struct Case {
  const AlgorithmInfo* algo;
  braidDataType_t dtype;
  braidRedOp_t op;  // reducing collectives only
  size_t count;
  bool inPlace;
  int root;
  std::string describe(int nranks) const;
};

// Which rows of the matrix a run takes.
enum class Rows {
  // Every dtype x op at counts {0, 1, nranks-1, 4097}, and a rotating dtype and op at 1M+3
  // (per rank block where buffers grow with nranks).
  kEvery,
  // The same 1M+3 row, and 4 dtypes (1, 2, 4 and 8 bytes) x 3 ops at the four counts: the
  // variant runs in a release build (they add a path or a transport, not a reduction), and
  // 'matrix' under ASan+UBSan.
  kTypes,
  // 3 dtypes x 3 ops at counts 1 and 4097: ranks as processes, the variants in sanitizer
  // builds, every run under TSan, and above 8 ranks where sizes are reduced.
  kSampled,
  // A share of kEvery's rows: a base of one row per algorithm row of the table (count 4097,
  // float32, sum where it reduces, each placement and root), and of the other rows those whose
  // position among them is `index` modulo `of` (a RowShare). Every algorithm x collective runs
  // on every run, and `of` successive shares run every row. The sanitizer builds take share K
  // of 16 with K from the commit hash (scripts/sanitize.sh), so commits cover the whole matrix.
  kShare,
  // The same base, and a share of kSampled's other rows (the variants and the largest rank
  // counts in the sanitizer builds, every run under TSan).
  kSampledShare,
};

// Which share of the rows Rows::kShare and kSampledShare take: index 0 .. of - 1.
struct RowShare {
  unsigned index = 0;
  unsigned of = 1;
};
// "K/N" (0 <= K < N <= 1024) as a share; false when it does not parse.
bool parseRowShare(const char* text, RowShare* share);

// Cases for one rank count: every algorithm row x dtype x op x count x placement x root, the
// dtypes, ops and counts as `rows` says (`share` for the two share rows).
std::vector<Case> matrixCases(int nranks, Rows rows, RowShare share = {});

// Runs one case on this rank; returns "" or what went wrong (first bad element). With a
// stream, the call is queued on it and checked after braidStreamSynchronize.
std::string runCase(const Case& c, braidComm_t comm, int rank, int nranks,
                    braidStream_t stream = nullptr);

}  // namespace braid::test
