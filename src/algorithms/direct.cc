// Direct (linear) gather and scatter: the root exchanges one message with every other rank
// (MPICH's MPIR_Gather_intra_linear / MPIR_Scatter_intra_linear; the "basic linear"
// algorithms of Open MPI's tuned component). n-1 messages at the root in one round, all in
// flight at once; the root's own block is a local copy.
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"

namespace braid {

namespace {

// Gather: every other rank sends its count elements to the root, which receives rank j's
// into receive block j; the root copies its own send buffer into block root (a no-op in
// place, where send = recv + root * count).
void buildDirectGather(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  if (a.count == 0) return;
  const size_t c = a.count;
  const BufRef send{BufferId::kSend, 0};
  if (a.rank != a.root) {
    out->add(sendStep(a.root, send, c));
    return;
  }
  for (int j = 0; j < a.nranks; ++j) {
    const BufRef block{BufferId::kRecv, static_cast<size_t>(j) * c};
    out->add(j == a.root ? copyStep(send, block, c) : recvStep(j, block, c));
  }
}

// Scatter: the root sends send block j to rank j, which receives it into its receive
// buffer; the root copies block root into its own receive buffer (a no-op in place, where
// recv = send + root * count).
void buildDirectScatter(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  if (a.count == 0) return;
  const size_t c = a.count;
  const BufRef recv{BufferId::kRecv, 0};
  if (a.rank != a.root) {
    out->add(recvStep(a.root, recv, c));
    return;
  }
  for (int j = 0; j < a.nranks; ++j) {
    const BufRef block{BufferId::kSend, static_cast<size_t>(j) * c};
    out->add(j == a.root ? copyStep(block, recv, c) : sendStep(j, block, c));
  }
}

// Closed forms (AlgorithmInfo::cost, in the terms of algorithms/cost.h).
// Gather and scatter straight to and from the root: the root's port serialises the blocks of
// its host, its host's NICs those of the others.
double directCost(const CostModel& m, double b) {
  const double local = (m.L - 1) * b / m.bytesPerUs(Crossing{});
  const double remote = m.H > 1 ? (m.n - m.L) * b / (m.f.inter.bw_gbs * m.f.nicsPerHost * 1e3) : 0;
  const double lat = m.H > 1 ? m.f.inter.latency_us : m.f.intra.latency_us;
  return lat + (m.n - 1) * m.f.step_overhead_us + local + remote + m.copy(b);
}

}  // namespace

void appendDirectAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"direct", Collective::kGather,
                    "every rank sends its block straight to the root, one round of n-1 "
                    "messages (MPICH linear gather)",
                    buildDirectGather, nullptr, directCost});
  table->push_back({"direct", Collective::kScatter,
                    "the root sends each rank its block directly, one round of n-1 messages "
                    "(MPICH linear scatter)",
                    buildDirectScatter, nullptr, directCost});
}

}  // namespace braid
