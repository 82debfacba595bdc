// The executor's plan (compilePlan): which receive-reduces write the call's final output.
// Plan::finalOutput marks a receive-reduce into the receive buffer that no later step reads
// (its output may then go to memory with streaming stores). Recursive doubling on 2 ranks out
// of place reduces straight into the receive buffer, once per piece, and nothing reads it
// again; in place it reduces into scratch and copies. The ring's reduce-scatter phase of an
// all-reduce is read back by its all-gather; a ring reduce-scatter's last step is the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "algorithms/schedule.h"
#include "core/executor.h"

namespace braid {
namespace {

// Rank 0's plan of `algo` on n ranks (1000 elements in pieces of 100): its steps' kinds,
// how many are final outputs, the last round's receive-reduces that are, and its scratch.
struct PlanShape {
  std::vector<StepKind> kinds;
  int finals = 0;
  size_t scratchElems = 0;
  size_t count(StepKind k) const { return std::count(kinds.begin(), kinds.end(), k); }
};
PlanShape planShape(const char* algo, Collective coll, bool inPlace, int n = 2) {
  const AlgorithmInfo* row = findAlgorithm(coll, algo);
  EXPECT_NE(row, nullptr) << algo;
  CollArgs a;
  a.coll = coll;
  a.count = 1000;
  a.nranks = n;
  a.pieceElems = 100;
  a.inPlace = inPlace;
  Plan plan;
  row->build(a, &plan.schedule);
  plan.inPlace = inPlace;
  compilePlan(&plan, 4);
  PlanShape shape;
  shape.scratchElems = plan.schedule.scratchElems;
  for (size_t i = 0; i < plan.schedule.steps.size(); ++i) {
    shape.kinds.push_back(plan.schedule.steps[i].kind);
    shape.finals += plan.finalOutput[i];
  }
  return shape;
}

TEST(Plan, FinalOutputsAreTheReceiveReducesNothingReadsAgain) {
  // 2 ranks, out of place: one round straight into the receive buffer, no scratch, no copy.
  PlanShape rd = planShape("recursive_doubling", Collective::kAllReduce, false);
  EXPECT_EQ(rd.count(StepKind::kCopy), 0u);
  EXPECT_EQ(rd.count(StepKind::kRecvReduce), 10u);
  EXPECT_EQ(rd.finals, 10);
  EXPECT_EQ(rd.scratchElems, 0u);
  // In place: into scratch, then a copy per piece; nothing final.
  rd = planShape("recursive_doubling", Collective::kAllReduce, true);
  EXPECT_EQ(rd.count(StepKind::kCopy), 10u);
  EXPECT_EQ(rd.finals, 0);
  EXPECT_EQ(rd.scratchElems, 1000u);
  // 8 ranks, out of place: rounds 1 and 3 write the receive buffer, round 2 scratch; round
  // 2's sends read round 1's output, so only round 3's pieces are final.
  rd = planShape("recursive_doubling", Collective::kAllReduce, false, 8);
  EXPECT_EQ(rd.count(StepKind::kCopy), 0u);
  EXPECT_EQ(rd.count(StepKind::kRecvReduce), 30u);
  EXPECT_EQ(rd.finals, 10);
  EXPECT_EQ(planShape("ring", Collective::kAllReduce, false).finals, 0);
  EXPECT_EQ(planShape("ring", Collective::kAllReduce, false, 4).finals, 0);
  // A binomial reduce's root: with one child its receive-reduce is the output; with more, each
  // later child's is reduced into the receive buffer in place, which stays on plain stores.
  EXPECT_EQ(planShape("binomial", Collective::kReduce, false).finals, 10);
  EXPECT_EQ(planShape("binomial", Collective::kReduce, false, 4).finals, 0);
  // A ring reduce-scatter's last step on each piece is the output: one receive-reduce in
  // n - 1 per piece (2 ranks: all of them).
  for (int n : {2, 4}) {
    const PlanShape rs = planShape("ring", Collective::kReduceScatter, false, n);
    ASSERT_GT(rs.count(StepKind::kRecvReduce), 0u);
    EXPECT_EQ(static_cast<size_t>(rs.finals), rs.count(StepKind::kRecvReduce) / (n - 1)) << n;
  }
}

}  // namespace
}  // namespace braid
