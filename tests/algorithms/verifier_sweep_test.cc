// The schedule verifier over the algorithm table: one test per row (so no algorithm goes
// untested), every nranks 1..64 and a sample up to 1024, counts that divide and do not divide
// by nranks, a tiny pieceElems (many-piece paths) and a huge one (one piece), in place and out
// of place, roots 0 and nranks-1, SUM and AVG, all-to-all-v with per-pair counts including
// zeros. The verifier_test executable's main is here.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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

// Collectives whose buffers hold nranks * count elements per rank.
bool nTimesCount(Collective c) {
  return c == Collective::kReduceScatter || c == Collective::kAllGather ||
         c == Collective::kAllToAll || c == Collective::kAllToAllv || c == Collective::kGather ||
         c == Collective::kScatter;
}

struct Case {
  int nranks;
  size_t count;
  size_t piece;
  bool inPlace;
  int root;
  braidRedOp_t op;
};

// All-to-all-v arrays, [rank * n + peer]: rank i sends ((7i + 3j) % 5) * count / 2
// elements to rank j (zero for a fifth of the pairs). Send blocks lie in peer order with a
// one-element gap between them; receive blocks lie in reverse peer order, packed.
struct VArrays {
  std::vector<size_t> sc, sd, rc, rd;
};
VArrays makeV(int n, size_t count) {
  const size_t nn = static_cast<size_t>(n);
  VArrays v;
  v.sc.resize(nn * nn);
  v.sd.resize(nn * nn);
  v.rc.resize(nn * nn);
  v.rd.resize(nn * nn);
  auto pair = [&](size_t i, size_t j) { return ((7 * i + 3 * j) % 5) * count / 2; };
  for (size_t i = 0; i < nn; ++i) {
    size_t at = 0;
    for (size_t j = 0; j < nn; ++j) {
      v.sc[i * nn + j] = pair(i, j);
      v.sd[i * nn + j] = at;
      at += pair(i, j) + 1;
    }
    at = 0;
    for (size_t k = nn; k-- > 0;) {
      v.rc[i * nn + k] = pair(k, i);
      v.rd[i * nn + k] = at;
      at += pair(k, i);
    }
  }
  return v;
}

// Empty if the case passes or the row does not support it (then *skipped is set), else
// the verifier's message.
std::string runCase(const AlgorithmInfo& algo, const Case& c, bool* skipped) {
  VArrays v;
  if (algo.coll == Collective::kAllToAllv) v = makeV(c.nranks, c.count);
  const size_t nn = static_cast<size_t>(c.nranks);
  auto args = [&](int r) {
    CollArgs a;
    a.coll = algo.coll;
    a.count = c.count;
    a.op = c.op;
    a.root = c.root;
    a.rank = r;
    a.nranks = c.nranks;
    a.pieceElems = c.piece;
    if (algo.coll == Collective::kAllToAllv) {
      a.sendCounts = &v.sc[r * nn];
      a.sendDispls = &v.sd[r * nn];
      a.recvCounts = &v.rc[r * nn];
      a.recvDispls = &v.rd[r * nn];
      a.count = 0;
      for (size_t j = 0; j < nn; ++j)
        a.count = std::max({a.count, v.sc[r * nn + j], v.rc[r * nn + j]});
    }
    return a;
  };
  *skipped = false;
  for (int r = 0; r < c.nranks; ++r)
    if (unsupportedReason(algo, args(r))) {
      *skipped = true;
      return {};
    }
  VerifyResult res = verifySchedules(algo, c.nranks, args, c.inPlace);
  return res.ok ? std::string() : res.message;
}

// The sampled cases for one row.
std::vector<Case> casesFor(const AlgorithmInfo& algo) {
  const Collective coll = algo.coll;
  std::vector<Case> out;
  auto combos = [&](int n) {
    std::vector<Case> cs;
    std::vector<int> roots = {0};
    if (rooted(coll) && n > 1) roots.push_back(n - 1);
    std::vector<braidRedOp_t> ops = {braidSum};
    if (reducing(coll)) ops.push_back(braidAvg);
    for (size_t piece : {size_t{3}, kOnePiece})
      for (bool inPlace : {false, true}) {
        if (inPlace && !hasInPlace(coll)) continue;
        for (int root : roots)
          for (braidRedOp_t op : ops) cs.push_back(Case{n, 0, piece, inPlace, root, op});
      }
    return cs;
  };
  auto countsFor = [&](int n, size_t cap) {
    std::vector<size_t> cs;
    const size_t nn = static_cast<size_t>(n);
    for (size_t c : {size_t{0}, size_t{1}, nn - 1, nn, 2 * nn + 3})
      if (c <= cap && std::find(cs.begin(), cs.end(), c) == cs.end()) cs.push_back(c);
    return cs;
  };
  if (coll == Collective::kBarrier) {
    for (int n = 1; n <= 64; ++n) out.push_back(Case{n, 0, 3, false, 0, braidSum});
    for (int n : {96, 127, 128, 255, 256, 511, 1000, 1024})
      out.push_back(Case{n, 0, 3, false, 0, braidSum});
    return out;
  }
  for (int n = 1; n <= 64; ++n) {
    // Under a sanitizer (test_scale.h): every n up to 16, then 31-33 and 63-64.
    if (test::reducedSizes() && n > 16 && n != 31 && n != 32 && n != 33 && n < 63) continue;
    const std::vector<Case> cs = combos(n);
    const std::vector<size_t> counts = countsFor(n, SIZE_MAX);
    for (size_t ci = 0; ci < counts.size(); ++ci) {
      if (n <= 8) {
        for (Case c : cs) {
          c.count = counts[ci];
          out.push_back(c);
        }
      } else {
        // Two combinations per count, rotating so that every combination meets many counts.
        for (size_t k : {size_t{0}, cs.size() / 2}) {
          Case c = cs[(n * 5 + ci + k) % cs.size()];
          c.count = counts[ci];
          out.push_back(c);
        }
      }
    }
  }
  // Large rank counts: three cases each, rotating through the combinations. Buffers of
  // nranks * count elements keep count small, and pieces of about a quarter of nranks
  // keep the step count (nranks^2 for ring-like schedules) near a few million.
  int i = 0;
  // Under a sanitizer (test_scale.h) up to 128 ranks.
  const std::vector<int> large = test::reducedSizes()
                                     ? std::vector<int>{96, 127, 128}
                                     : std::vector<int>{96, 127, 128, 255, 256, 511, 1000, 1024};
  for (int n : large) {
    const std::vector<Case> cs = combos(n);
    const size_t nn = static_cast<size_t>(n);
    const size_t cap =
        nTimesCount(coll) ? std::max<size_t>(1, (size_t{2} << 20) / (nn * nn)) : SIZE_MAX;
    const std::vector<size_t> counts = countsFor(n, cap);
    Case uneven = cs[(i * 3) % cs.size()];
    uneven.count = counts.back();
    uneven.piece = std::max<size_t>(3, nn / 4);
    Case whole = cs[(i * 3 + 1) % cs.size()];
    whole.count = counts.size() > 2 ? counts[2] : counts.back();
    whole.piece = kOnePiece;
    Case tiny = cs[(i * 3 + 2) % cs.size()];
    tiny.count = 1;
    tiny.piece = 3;
    for (const Case& c : {uneven, whole, tiny}) {
      // A vector of at most one piece runs the same schedule whatever pieceElems is.
      auto same = [&](const Case& d) {
        return d.nranks == c.nranks && d.count == c.count && d.inPlace == c.inPlace &&
               d.root == c.root && d.op == c.op &&
               std::min(d.piece, std::max<size_t>(d.count, 1)) ==
                   std::min(c.piece, std::max<size_t>(c.count, 1));
      };
      if (std::none_of(out.begin(), out.end(), same)) out.push_back(c);
    }
    ++i;
  }
  return out;
}

class VerifierSweep : public testing::TestWithParam<size_t> {};

TEST_P(VerifierSweep, MeetsTheCollectivesMeaning) {
  const AlgorithmInfo& algo = algorithms()[GetParam()];
  const std::vector<Case> cases = casesFor(algo);
  std::atomic<size_t> next{0}, skipped{0}, failures{0};
  std::mutex mu;
  std::vector<std::string> messages;
  auto worker = [&] {
    for (size_t k; (k = next++) < cases.size();) {
      bool skip = false;
      std::string msg = runCase(algo, cases[k], &skip);
      if (skip) ++skipped;
      if (msg.empty()) continue;
      ++failures;
      std::lock_guard<std::mutex> lock(mu);
      if (messages.size() < 8) messages.push_back(std::move(msg));
    }
  };
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(messages.begin(), messages.end());
  for (const std::string& m : messages) ADD_FAILURE() << m;
  EXPECT_EQ(failures.load(), 0u) << failures.load() << " of " << cases.size() << " cases fail";
  EXPECT_LT(skipped.load(), cases.size()) << algo.name << " supports none of the cases";
  std::printf("%s %s: %zu cases (%zu unsupported) in %.2f s\n", algo.name,
              collectiveName(algo.coll), cases.size(), skipped.load(), sec);
}

std::string rowName(const testing::TestParamInfo<size_t>& info) {
  const AlgorithmInfo& a = algorithms()[info.param];
  std::string s = std::string(a.name) + "_" + collectiveName(a.coll);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Table, VerifierSweep, testing::Range<size_t>(0, algorithms().size()),
                         rowName);

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  // The sweep builds and drops schedules of up to millions of steps on every core: with glibc's
  // defaults each large vector is a fresh mmap, faulted in page by page and unmapped on free
  // (a third of the run was the kernel's). Kept in the heap instead, the pages are reused
  // (release build: bruck all-to-all 18.5 s to 10.7), and one arena serves every thread, so
  // that what one worker frees the next reuses (with GLIBC_TUNABLES' huge pages, set by
  // tests/meson.build: 82 s to 43 s). Sanitizers bring their own allocator.
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
