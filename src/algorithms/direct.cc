// Direct (linear) gather and scatter: the root exchanges one message with every other rank
// (MPICH's MPIR_Gather_intra_linear / MPIR_Scatter_intra_linear; the "basic linear"
// algorithms of Open MPI's tuned component). n-1 messages at the root in one round, all in
// flight at once; the root's own block is a local copy.
#include <vector>

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
  Step s;
  if (a.rank != a.root) {
    s.kind = StepKind::kSend;
    s.peer = a.root;
    s.src = {BufferId::kSend, 0};
    s.count = c;
    out->add(s);
    return;
  }
  for (int j = 0; j < a.nranks; ++j) {
    s.kind = j == a.root ? StepKind::kCopy : StepKind::kRecv;
    s.peer = j == a.root ? -1 : j;
    s.dst = {BufferId::kRecv, static_cast<size_t>(j) * c};
    s.count = c;
    out->add(s);
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
  Step s;
  if (a.rank != a.root) {
    s.kind = StepKind::kRecv;
    s.peer = a.root;
    s.dst = {BufferId::kRecv, 0};
    s.count = c;
    out->add(s);
    return;
  }
  for (int j = 0; j < a.nranks; ++j) {
    s.kind = j == a.root ? StepKind::kCopy : StepKind::kSend;
    s.peer = j == a.root ? -1 : j;
    s.src = {BufferId::kSend, static_cast<size_t>(j) * c};
    s.count = c;
    out->add(s);
  }
}

}  // namespace

void appendDirectAlgorithms(std::vector<AlgorithmInfo>* table) {
  table->push_back({"direct", Collective::kGather,
                    "every rank sends its block straight to the root, one round of n-1 "
                    "messages (MPICH linear gather)",
                    buildDirectGather, nullptr});
  table->push_back({"direct", Collective::kScatter,
                    "the root sends each rank its block directly, one round of n-1 messages "
                    "(MPICH linear scatter)",
                    buildDirectScatter, nullptr});
}

}  // namespace braid
