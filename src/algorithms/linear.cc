// Linear all-gather: every rank sends its block straight to every other rank and receives
// theirs, one round of n-1 messages each way, all in flight at once (the all-to-all pattern
// of MPICH's and Open MPI's linear exchanges, applied to one block per rank). One round
// where the ring takes n-1 and Bruck ceil(log2 n): the latency optimum for 2-3 ranks, while
// a rank's port carries the same (n-1)/n of the output as the ring's.
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// Rank r sends its send buffer to r+1, r+2, ..., r+n-1 (mod n), receives rank j's block into
// receive block j from r-1, r-2, ..., and copies its own input into block r (a no-op in
// place, where send = recv + r * count).
void buildLinearAllGather(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  if (a.count == 0) return;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  const BufRef send{BufferId::kSend, 0};
  for (int d = 1; d < n; ++d) out->add(sendStep((r + d) % n, send, c));
  for (int d = 1; d < n; ++d) {
    const int from = (r - d + n) % n;
    out->add(recvStep(from, {BufferId::kRecv, static_cast<size_t>(from) * c}, c));
  }
  out->add(copyStep(send, {BufferId::kRecv, static_cast<size_t>(r) * c}, c));
}

// Closed form (AlgorithmInfo::cost, in the terms of algorithms/cost.h): one latency; a rank's
// port serialises its blocks to its host's other ranks, its host's NICs the blocks of all L
// local ranks to the n-L ranks elsewhere; then the local copy.
double linearAllGatherCost(const CostModel& m, double b) {
  const double local = (m.L - 1) * b / m.bytesPerUs(Crossing{});
  const double remote =
      m.H > 1 ? m.L * (m.n - m.L) * b / (m.f.inter.bw_gbs * m.f.nicsPerHost * 1e3) : 0;
  const double lat = m.H > 1 ? m.f.inter.latency_us : m.f.intra.latency_us;
  return lat + (m.n - 1) * (m.f.step_overhead_us + m.f.intra_send_overhead_us) +
         std::max(local, remote) + m.copy(b);
}

}  // namespace

void appendLinearAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"linear", Collective::kAllGather,
                    "every rank sends its block straight to every other rank, one round of n-1 "
                    "messages; the latency optimum for 2-3 ranks",
                    buildLinearAllGather, nullptr, linearAllGatherCost});
}

}  // namespace braid
