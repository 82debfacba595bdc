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

// Cases for one rank count: every algorithm row x dtype x op x count x placement x root, with
// the full dtype x op cross at counts {0, 1, nranks-1, 4097} and a rotating sample of dtypes
// and ops at 1M+3 (and only for collectives whose buffers do not grow with nranks).
// `sampled` keeps a smaller subset (for ranks as processes).
std::vector<Case> matrixCases(int nranks, bool sampled);

// Runs one case on this rank; returns "" or what went wrong (first bad element). With a
// stream, the call is queued on it and checked after braidStreamSynchronize.
std::string runCase(const Case& c, braidComm_t comm, int rank, int nranks,
                    braidStream_t stream = nullptr);

}  // namespace braid::test
