// Pairwise-exchange all-to-all and all-to-all-v (R. Thakur, R. Rabenseifner, W. Gropp,
// "Optimization of collective communication operations in MPICH", IJHPCA 19(1), 2005;
// MPICH's MPIR_Alltoall_intra_pairwise, here with per-peer counts for all-to-all-v too).
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// The rank's own block is a local copy; then, for steps k = 1 .. n-1, rank r sends its block
// for rank (r + k) mod n to that rank and receives rank (r - k) mod n's block for it. Each
// step's send waits for the previous step's receive, as MPI_Sendrecv would, so every rank
// has one message in and one out at a time and no link carries two exchanges at once: the
// point of the pairwise order for large blocks. A zero-count block is skipped on both
// sides (sender and receiver see the same count), so it costs no message.
void buildPairwise(const CollArgs& a, const size_t* sendCounts, const size_t* sendDispls,
                   const size_t* recvCounts, const size_t* recvDispls, Schedule* out) {
  const int n = a.nranks, r = a.rank;
  if (recvCounts[r] > 0) {
    Step s;
    s.kind = StepKind::kCopy;
    s.src = {BufferId::kSend, sendDispls[r]};
    s.dst = {BufferId::kRecv, recvDispls[r]};
    s.count = recvCounts[r];
    out->add(s);
  }
  int32_t prevRecv = -1;
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    if (sendCounts[to] > 0) {
      Step s;
      s.kind = StepKind::kSend;
      s.peer = to;
      s.src = {BufferId::kSend, sendDispls[to]};
      s.count = sendCounts[to];
      s.deps[0] = prevRecv;
      out->add(s);
    }
    if (recvCounts[from] > 0) {
      Step s;
      s.kind = StepKind::kRecv;
      s.peer = from;
      s.dst = {BufferId::kRecv, recvDispls[from]};
      s.count = recvCounts[from];
      prevRecv = out->add(s);
    }
  }
}

void buildPairwiseAllToAll(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  if (a.count == 0) return;
  std::vector<size_t> counts(a.nranks, a.count), displs(a.nranks);
  for (int j = 0; j < a.nranks; ++j) displs[j] = static_cast<size_t>(j) * a.count;
  buildPairwise(a, counts.data(), displs.data(), counts.data(), displs.data(), out);
}

void buildPairwiseAllToAllv(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  buildPairwise(a, a.sendCounts, a.sendDispls, a.recvCounts, a.recvDispls, out);
}

const char* supportsAllToAllv(const CollArgs& a) {
  if (!a.sendCounts || !a.sendDispls || !a.recvCounts || !a.recvDispls)
    return "all-to-all-v needs this rank's send and receive counts and displacements";
  return nullptr;
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// Pairwise exchange: n-1 rounds of one block; on a uniform layout L-1 of them stay on the
// host and n-L cross it with all L local ranks sending at once.
double pairwiseCost(const CostModel& m, double b) {
  const int crossRounds = m.H > 1 ? m.n - m.L : 0;
  return Pipe(m)
             .round(b, Crossing{}, false, m.n - 1 - crossRounds)
             .round(b, m.anyCross(m.L), false, crossRounds)
             .total() +
         m.copy(b);
}

}  // namespace

void appendPairwiseAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"pairwise", Collective::kAllToAll,
                    "n-1 steps, step k sends to rank + k and receives from rank - k, one "
                    "exchange at a time (Thakur, Rabenseifner & Gropp 2005)",
                    buildPairwiseAllToAll, nullptr, pairwiseCost});
  table->push_back({"pairwise", Collective::kAllToAllv,
                    "n-1 steps, step k sends to rank + k and receives from rank - k, zero "
                    "counts skipped (Thakur, Rabenseifner & Gropp 2005)",
                    buildPairwiseAllToAllv, supportsAllToAllv, pairwiseCost});
}

}  // namespace braid
