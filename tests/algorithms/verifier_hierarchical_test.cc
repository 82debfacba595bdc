// The verifier on the hierarchical rows over layouts of several hosts (CollArgs::hostOf), their
// refusal of uneven layouts, and the default rule that picks them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
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

// ---- Hierarchical rows over host layouts ----------------------------------------------
//
// The sweep (verifier_sweep_test.cc) runs every row with hostOf null (one host). The hierarchical
// rows also read CollArgs::hostOf, so they are verified here over layouts of several hosts:
// contiguous and interleaved ranks, one host, one rank per host.

struct HostLayout {
  const char* name;
  std::vector<int> hostOf;  // empty: hostOf null
  int nranks;
};

std::vector<HostLayout> hostLayouts() {
  return {
      {"2 hosts x 2", {0, 0, 1, 1}, 4},
      {"2 hosts x 3", {0, 0, 0, 1, 1, 1}, 6},
      {"3 hosts x 2", {0, 0, 1, 1, 2, 2}, 6},
      {"4 hosts x 4", {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, 16},
      {"interleaved 2 x 2", {0, 1, 0, 1}, 4},
      {"interleaved 3 x 3", {0, 1, 2, 0, 1, 2, 0, 1, 2}, 9},
      {"scrambled 3 x 2", {0, 1, 1, 0, 2, 2}, 6},
      {"scrambled 2 x 4", {0, 0, 1, 0, 1, 1, 0, 1}, 8},
      {"1 host (hostOf null)", {}, 5},
      {"1 host (explicit)", {0, 0, 0, 0}, 4},
      {"5 hosts x 1", {0, 1, 2, 3, 4}, 5},
      {"2 hosts x 1", {0, 1}, 2},
  };
}

std::vector<const AlgorithmInfo*> hierarchicalRows() {
  std::vector<const AlgorithmInfo*> rows;
  for (const AlgorithmInfo& a : algorithms())
    if (std::string(a.name) == "hierarchical") rows.push_back(&a);
  return rows;
}

TEST(Hierarchical, EveryCollectiveHasARow) {
  for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather,
                       Collective::kBroadcast, Collective::kReduce, Collective::kAllToAll})
    EXPECT_NE(findAlgorithm(c, "hierarchical"), nullptr) << collectiveName(c);
}

// Every hierarchical row x layout x count {0, 1, 7, 1003} x pieceElems {3, 64, one piece}
// x placement x op {SUM, AVG} (reducing) x every root (rooted; three under a sanitizer);
// then two 64-rank layouts (one under a sanitizer).
TEST(Hierarchical, VerifiesOnHostLayouts) {
  struct Job {
    const AlgorithmInfo* algo;
    const HostLayout* layout;
    size_t count, piece;
    bool inPlace;
    int root;
    braidRedOp_t op;
  };
  const std::vector<HostLayout> layouts = hostLayouts();
  // Two larger layouts, 64 ranks, at fewer counts and roots: 8 hosts x 8 by blocks and
  // 4 hosts x 16 round-robin (the second alone under a sanitizer).
  std::vector<HostLayout> large = {{"8 hosts x 8", {}, 64}, {"round-robin 4 x 16", {}, 64}};
  for (int r = 0; r < 64; ++r) {
    large[0].hostOf.push_back(r / 8);
    large[1].hostOf.push_back(r % 4);
  }
  std::vector<Job> jobs;
  auto add = [&](const HostLayout& l, std::initializer_list<size_t> counts,
                 std::initializer_list<size_t> pieces, const std::vector<int>& roots) {
    for (const AlgorithmInfo* algo : hierarchicalRows())
      for (size_t count : counts)
        for (size_t piece : pieces)
          for (bool inPlace : {false, true}) {
            if (inPlace && !hasInPlace(algo->coll)) continue;
            for (int root : roots) {
              if (root > 0 && !rooted(algo->coll)) continue;
              for (braidRedOp_t op : {braidSum, braidAvg}) {
                if (op == braidAvg && !reducing(algo->coll)) continue;
                jobs.push_back(Job{algo, &l, count, piece, inPlace, root, op});
              }
            }
          }
  };
  // Under a sanitizer (test_scale.h) the first, a middle and the last rank as roots.
  for (const HostLayout& l : layouts) {
    std::vector<int> roots;
    for (int r = 0; r < l.nranks; ++r)
      if (!test::reducedSizes() || r == 0 || r == l.nranks / 2 || r == l.nranks - 1)
        roots.push_back(r);
    add(l, {0, 1, 7, 1003}, {3, 64, kOnePiece}, roots);
  }
  // Under a sanitizer, the round-robin layout alone, with roots 0 and 63.
  if (test::reducedSizes()) large.erase(large.begin());
  for (const HostLayout& l : large)
    add(l, {1, 1003}, {64},
        test::reducedSizes() ? std::vector<int>{0, 63} : std::vector<int>{0, 37, 63});
  std::atomic<size_t> next{0}, failures{0};
  std::mutex mu;
  std::vector<std::string> messages;
  auto worker = [&] {
    for (size_t k; (k = next++) < jobs.size();) {
      const Job& j = jobs[k];
      auto args = [&](int r) {
        CollArgs a;
        a.coll = j.algo->coll;
        a.count = j.count;
        a.op = j.op;
        a.root = j.root;
        a.rank = r;
        a.nranks = j.layout->nranks;
        a.pieceElems = j.piece;
        a.hostOf = j.layout->hostOf.empty() ? nullptr : j.layout->hostOf.data();
        return a;
      };
      VerifyResult res = verifySchedules(*j.algo, j.layout->nranks, args, j.inPlace);
      if (res.ok) continue;
      ++failures;
      std::lock_guard<std::mutex> lock(mu);
      if (messages.size() < 8) messages.push_back(std::string(j.layout->name) + ": " + res.message);
    }
  };
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  std::sort(messages.begin(), messages.end());
  for (const std::string& m : messages) ADD_FAILURE() << m;
  EXPECT_EQ(failures.load(), 0u) << failures.load() << " of " << jobs.size() << " cases fail";
  std::printf("hierarchical rows over %zu host layouts: %zu cases\n", layouts.size() + large.size(),
              jobs.size());
}

// Hosts of different sizes (or hosts not numbered by first appearance) are refused with a
// sentence, by supports() and so by the verifier.
TEST(Hierarchical, RefusesUnevenLayouts) {
  const std::vector<std::vector<int>> bad = {{0, 0, 1}, {0, 1, 1, 1, 0, 2}, {1, 0}, {0, 2, 1, 2}};
  for (const AlgorithmInfo* algo : hierarchicalRows())
    for (const std::vector<int>& hostOf : bad) {
      const int n = static_cast<int>(hostOf.size());
      auto args = [&](int r) {
        CollArgs a;
        a.coll = algo->coll;
        a.count = 8;
        a.rank = r;
        a.nranks = n;
        a.hostOf = hostOf.data();
        return a;
      };
      const char* why = unsupportedReason(*algo, args(0));
      ASSERT_NE(why, nullptr) << collectiveName(algo->coll) << " accepts an uneven layout";
      EXPECT_NE(std::string(why).find("host"), std::string::npos) << why;
      VerifyResult r = verifySchedules(*algo, n, args, false);
      EXPECT_FALSE(r.ok);
      EXPECT_NE(r.message.find("does not support this call"), std::string::npos) << r.message;
    }
  const AlgorithmInfo* ar = findAlgorithm(Collective::kAllReduce, "hierarchical");
  ASSERT_NE(ar, nullptr);
  const int uneven[] = {0, 0, 1};
  CollArgs a;
  a.nranks = 3;
  a.hostOf = uneven;
  EXPECT_NE(std::string(unsupportedReason(*ar, a)).find("same number of ranks on every host"),
            std::string::npos);
}

// The default rule picks hierarchical for large vectors on several even hosts with more
// than one rank each, and keeps the one-level rules otherwise.
TEST(Hierarchical, DefaultRule) {
  const std::vector<int> twoByFour = {0, 0, 0, 0, 1, 1, 1, 1}, interleaved = {0, 1, 0, 1},
                         oneEach = {0, 1, 2, 3}, uneven = {0, 0, 0, 1}, oneHost = {0, 0, 0, 0};
  auto pick = [](Collective c, const std::vector<int>& hostOf, size_t count) {
    CollArgs a;
    a.coll = c;
    a.count = count;
    a.nranks = static_cast<int>(hostOf.size());
    a.hostOf = hostOf.data();
    const AlgorithmInfo* algo = defaultAlgorithm(a, 4);
    return std::string(algo ? algo->name : "none");
  };
  const size_t big = 1 << 20;  // elements of 4 bytes: 4 MiB
  for (Collective c : {Collective::kAllReduce, Collective::kBroadcast, Collective::kReduce,
                       Collective::kReduceScatter, Collective::kAllGather}) {
    EXPECT_EQ(pick(c, twoByFour, big), "hierarchical") << collectiveName(c);
    EXPECT_EQ(pick(c, interleaved, big), "hierarchical") << collectiveName(c);
    EXPECT_NE(pick(c, twoByFour, 16), "hierarchical") << collectiveName(c);
    EXPECT_NE(pick(c, oneEach, big), "hierarchical") << collectiveName(c);
    EXPECT_NE(pick(c, uneven, big), "hierarchical") << collectiveName(c);
    EXPECT_NE(pick(c, oneHost, big), "hierarchical") << collectiveName(c);
  }
  // 256 KiB in all: all-reduce at 65536 floats; reduce-scatter at 8192 per rank on 8.
  EXPECT_EQ(pick(Collective::kAllReduce, twoByFour, 65536), "hierarchical");
  EXPECT_NE(pick(Collective::kAllReduce, twoByFour, 65535), "hierarchical");
  EXPECT_EQ(pick(Collective::kReduceScatter, twoByFour, 8192), "hierarchical");
  EXPECT_NE(pick(Collective::kReduceScatter, twoByFour, 8191), "hierarchical");
  EXPECT_EQ(pick(Collective::kAllToAll, twoByFour, big), "pairwise");
}

}  // namespace
}  // namespace braid
