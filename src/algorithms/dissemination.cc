// The dissemination barrier (Hensgen, Finkel & Manber, "Two algorithms for barrier
// synchronization", IJPP 1988): ceil(log2 n) rounds of empty messages.
#include <cstdint>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// Round k = 0, 1, ... while 2^k < n: rank r sends an empty message to r + 2^k and receives
// one from r - 2^k (mod n). Round k's send waits for round k-1's receive and send, hence for
// every earlier receive, so after round k rank r knows that ranks r - 2^(k+1) + 1 .. r have
// entered; after ceil(log2 n) rounds it knows all have. No rank leaves earlier, since a
// schedule ends only when all its steps have run. One rank needs no steps.
void buildDisseminationBarrier(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  int32_t prevSend = -1, prevRecv = -1;
  for (int64_t dist = 1; dist < n; dist *= 2) {
    const int to = static_cast<int>((r + dist) % n), from = static_cast<int>((r - dist + n) % n);
    Step s = sendStep(to, {BufferId::kSend, 0}, 0, prevRecv);
    s.deps[1] = prevSend;
    prevSend = out->add(s);
    prevRecv = out->add(recvStep(from, {BufferId::kRecv, 0}, 0));
  }
}

// Closed form (AlgorithmInfo::cost, in the terms of algorithms/cost.h): the rounds' latencies
// and step overheads.
double disseminationCost(const CostModel& m, double) {
  Pipe p(m);
  for (int d = 1; d < m.n; d *= 2) p.round(0, m.addCrossing(d), false);
  return p.total();
}

}  // namespace

void appendDisseminationAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"dissemination", Collective::kBarrier,
                    "ceil(log2 n) rounds of empty messages to rank + 2^k (Hensgen, Finkel & "
                    "Manber 1988)",
                    buildDisseminationBarrier, nullptr, disseminationCost});
}

}  // namespace braid
