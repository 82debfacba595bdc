// The verifier on rings: a 1024-rank ring all-reduce verified in seconds (256 ranks in a
// sanitized build, test_scale.h: ASan+UBSan took 15.6 s for 1024), and the rows that follow
// CollArgs::ring (ring and tree) on rings that are not rank order.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"
#include "algorithms/verifier.h"
#include "test_scale.h"
#include "verifier_cases.h"

namespace braid {
namespace {

using verifier_cases::kOnePiece;
using verifier_cases::reducing;
using verifier_cases::rooted;

TEST(Verifier, LargeRingIsFast) {
  const AlgorithmInfo* ring = findAlgorithm(Collective::kAllReduce, "ring");
  ASSERT_NE(ring, nullptr);
  auto args = [](int) {
    CollArgs a;
    a.coll = Collective::kAllReduce;
    a.count = 1024;
    a.op = braidAvg;
    a.pieceElems = 1;
    return a;
  };
  const int nranks = test::reducedSizes() ? 256 : 1024;
  const auto start = std::chrono::steady_clock::now();
  VerifyResult r = verifySchedules(*ring, nranks, args, true);
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.ok) << r.message;
  std::printf("ring all-reduce, %d ranks, 1024 elements, in place: %.2f s\n", nranks, sec);
}

// ---- Rings that are not rank order ----------------------------------------------------
// Every row that follows CollArgs::ring (ring and tree), for rings that are not rank order
// (reversed, hosts interleaved as round-robin placement gives, seeded shuffles), at 1..9
// ranks x count {1, 7, 1003} x pieceElems {3, one piece} x in place x op {SUM, AVG} x every
// root: the result is the collective's, whatever the ring.
TEST(RingOrder, RingAndTreeRowsFollowAnyRing) {
  std::vector<const AlgorithmInfo*> rows;
  for (const AlgorithmInfo& a : algorithms())
    if (std::string(a.name) == "ring" || std::string(a.name) == "tree") rows.push_back(&a);
  ASSERT_EQ(rows.size(), 7u);
  std::vector<std::vector<int>> rings;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int n = 1; n <= 9; ++n) {
    std::vector<int> rev(n), split, shuffled(n);
    for (int i = 0; i < n; ++i) rev[i] = n - 1 - i;
    for (int i = 0; i < n; i += 2) split.push_back(i);  // even ranks, then odd ones
    for (int i = 1; i < n; i += 2) split.push_back(i);
    for (int i = 0; i < n; ++i) shuffled[i] = i;
    for (int i = n - 1; i > 0; --i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(shuffled[i], shuffled[(seed >> 33) % (i + 1)]);
    }
    rings.push_back(rev);
    rings.push_back(split);
    rings.push_back(shuffled);
  }
  size_t cases = 0;
  for (const std::vector<int>& ring : rings) {
    const int n = static_cast<int>(ring.size());
    for (const AlgorithmInfo* algo : rows)
      for (size_t count : {size_t{1}, size_t{7}, size_t{1003}})
        for (size_t piece : {size_t{3}, kOnePiece})
          for (bool inPlace : {false, true})
            for (int root = 0; root < (rooted(algo->coll) ? n : 1); ++root)
              for (braidRedOp_t op : {braidSum, braidAvg}) {
                if (op == braidAvg && !reducing(algo->coll)) continue;
                auto args = [&](int r) {
                  CollArgs a;
                  a.coll = algo->coll;
                  a.count = count;
                  a.op = op;
                  a.root = root;
                  a.rank = r;
                  a.nranks = n;
                  a.pieceElems = piece;
                  a.ring = ring.data();
                  return a;
                };
                VerifyResult res = verifySchedules(*algo, n, args, inPlace);
                ++cases;
                ASSERT_TRUE(res.ok)
                    << algo->name << " " << collectiveName(algo->coll) << " n=" << n
                    << " count=" << count << " root=" << root << ": " << res.message;
              }
  }
  std::printf("ring and tree rows over %zu rings: %zu cases\n", rings.size(), cases);
}

// A ring changes who talks to whom: rank order 0 1 2 3 as 0 2 1 3 makes rank 0 send to 2.
TEST(RingOrder, RingNeighboursComeFromTheRing) {
  const int ring[] = {0, 2, 1, 3};
  CollArgs a;
  a.coll = Collective::kAllReduce;
  a.count = 4;
  a.nranks = 4;
  a.ring = ring;
  Schedule s;
  findAlgorithm(Collective::kAllReduce, "ring")->build(a, &s);
  for (const Step& st : s.steps) {
    if (st.kind == StepKind::kSend) {
      EXPECT_EQ(st.peer, 2);
    }
    if (st.kind == StepKind::kRecv || st.kind == StepKind::kRecvReduce) {
      EXPECT_EQ(st.peer, 3);
    }
  }
}

}  // namespace
}  // namespace braid
