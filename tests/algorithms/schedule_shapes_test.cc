// What defines an algorithm beyond meeting its collective's meaning (which the verifier sweep
// checks for every row): its rounds, messages and peers, pinned per algorithm.
#include <gtest/gtest.h>

#include <set>

#include "algorithms/schedule.h"

namespace braid {
namespace {

// Linear all-gather: one round. Rank r sends its whole send buffer once to every other rank
// and receives rank j's block once into receive block j, with no step waiting on another;
// then copies its own block into place.
TEST(ScheduleShapes, LinearAllGatherIsOneRoundOfNMinusOneMessagesEachWay) {
  const AlgorithmInfo* a = findAlgorithm(Collective::kAllGather, "linear");
  ASSERT_NE(a, nullptr);
  for (int n = 1; n <= 6; ++n)
    for (int r = 0; r < n; ++r) {
      CollArgs args;
      args.coll = Collective::kAllGather;
      args.count = 7;
      args.rank = r;
      args.nranks = n;
      Schedule s;
      a->build(args, &s);
      std::set<int> to, from;
      int copies = 0;
      for (const Step& st : s.steps) {
        for (int d : st.deps) EXPECT_EQ(d, -1) << "n " << n << " rank " << r;
        EXPECT_EQ(st.count, 7u);
        switch (st.kind) {
          case StepKind::kSend:
            EXPECT_EQ(st.src.buf, BufferId::kSend);
            EXPECT_EQ(st.src.offset, 0u);
            to.insert(st.peer);
            break;
          case StepKind::kRecv:
            EXPECT_EQ(st.dst.buf, BufferId::kRecv);
            EXPECT_EQ(st.dst.offset, 7u * st.peer);
            from.insert(st.peer);
            break;
          case StepKind::kCopy:
            EXPECT_EQ(st.dst.offset, 7u * r);
            ++copies;
            break;
          default:
            ADD_FAILURE() << "unexpected " << stepKindName(st.kind);
        }
      }
      EXPECT_EQ(s.steps.size(), static_cast<size_t>(2 * (n - 1) + 1)) << "n " << n;
      EXPECT_EQ(to.size(), static_cast<size_t>(n - 1));
      EXPECT_EQ(from.size(), static_cast<size_t>(n - 1));
      EXPECT_EQ(to.count(r) + from.count(r), 0u);
      EXPECT_EQ(copies, 1);
      EXPECT_EQ(s.scratchElems, 0u);
    }
}

}  // namespace
}  // namespace braid
