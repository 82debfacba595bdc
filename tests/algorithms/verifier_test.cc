// Tests for the schedule verifier.
//
// The sweep is generated from the algorithm table (one test per row, so no algorithm goes
// untested): every nranks 1..64 and a sample up to 1024, counts that divide and do not
// divide by nranks, a tiny pieceElems (many-piece paths) and a huge one (one piece), in
// place and out of place, roots 0 and nranks-1, SUM and AVG, all-to-all-v with per-pair
// counts including zeros.
//
// The negative tests hand-make small broken schedules and check that each is caught with
// a message that names the problem.
#include "algorithms/verifier.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/schedule.h"
#include "core/executor.h"
#include "test_scale.h"

namespace braid {
namespace {

bool reducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}
bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}
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

constexpr size_t kOnePiece = size_t{1} << 30;

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

// ---- Hand-made schedules ------------------------------------------------------------
//
// A BuildFn is a plain function, so the bug to plant is a file-level setting.

enum class Bug {
  kNone,
  kMissingSend,      // central: rank n-1 never sends its contribution
  kMissingRecv,      // central: the root never receives rank n-1's contribution
  kDoubled,          // central: rank 2 also goes through rank 1, so it counts twice
  kMixedElements,    // central: rank 2 sends from send[1], the root adds it to element 0
  kBroadcastEarly,   // central: the root's broadcast does not wait for the reduction
  kWrongBlock,       // direct all-gather: rank 2's first piece comes from send[1]
  kNoInPlaceDep,     // exchange: the first recv-reduce does not wait for the send
  kWholeMessage,     // exchange: one step per stage instead of one per piece
  kCountMismatch,    // direct all-gather: rank 1 expects one element fewer from rank 0
  kWritesSend,       // central: the root accumulates in its send buffer
  kNullRecvOffRoot,  // central reduce: every rank writes its recv buffer
  kDivideTwice,      // central: the root divides on every recv-reduce
  kOneWayBarrier,    // barrier: each rank only hears from its left neighbour
};
Bug gBug = Bug::kNone;

constexpr BufferId kS = BufferId::kSend, kR = BufferId::kRecv;

// Central all-reduce (or reduce to rank 0 when a.coll is kReduce): every rank sends to
// rank 0, which reduces into recv in rank order, then sends the result back.
void buildCentral(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  const bool all = a.coll == Collective::kAllReduce;
  if (c == 0) return;
  if (n == 1) {
    Step s = makeStep(StepKind::kCopy, -1, {kS, 0}, {kR, 0}, c);
    out->add(s);
    return;
  }
  if (r == 0) {
    int last = -1;
    bool first = true;
    for (int p = 1; p < n; ++p) {
      if (gBug == Bug::kMissingRecv && p == n - 1) continue;
      const bool mixed = gBug == Bug::kMixedElements && p == 2;
      Step s = makeStep(StepKind::kRecvReduce, p, {first ? kS : kR, 0},
                        {gBug == Bug::kWritesSend ? kS : kR, 0}, mixed ? c - 1 : c);
      const bool lastOne = p == n - 1 || (gBug == Bug::kMissingRecv && p == n - 2);
      if (a.op == braidAvg && (lastOne || gBug == Bug::kDivideTwice)) s.divisor = n;
      s.deps[0] = last;
      last = out->add(s);
      first = false;
    }
    if (!all) return;
    for (int p = 1; p < n; ++p) {
      Step s = makeStep(StepKind::kSend, p, {kR, 0}, {kR, 0}, c);
      if (gBug != Bug::kBroadcastEarly) s.deps[0] = last;
      out->add(s);
    }
    return;
  }
  if (gBug == Bug::kDoubled && r == 2) {
    out->add(makeStep(StepKind::kSend, 1, {kS, 0}, {kR, 0}, c));
  }
  if (gBug == Bug::kDoubled && r == 1) {
    int got = out->add(makeStep(StepKind::kRecvReduce, 2, {kS, 0}, {kR, 0}, c));
    Step s = makeStep(StepKind::kSend, 0, {kR, 0}, {kR, 0}, c);
    s.deps[0] = got;
    int sent = out->add(s);
    Step back = makeStep(StepKind::kRecv, 0, {kR, 0}, {kR, 0}, c);
    back.deps[0] = sent;
    out->add(back);
    return;
  }
  if (!(gBug == Bug::kMissingSend && r == n - 1)) {
    const bool mixed = gBug == Bug::kMixedElements && r == 2;
    out->add(makeStep(StepKind::kSend, 0, {kS, mixed ? size_t{1} : 0}, {kR, 0}, mixed ? c - 1 : c));
  }
  if (all || gBug == Bug::kNullRecvOffRoot)
    out->add(makeStep(StepKind::kRecv, 0, {kR, 0}, {kR, 0}, c));
}

// Direct all-gather in pieces of pieceElems: each rank sends its vector to every other
// rank, piece by piece, and copies its own block.
void buildDirectAllGather(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count, piece = a.pieceElems;
  out->add(makeStep(StepKind::kCopy, -1, {kS, 0}, {kR, r * c}, c));
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    for (size_t b = 0; b < c; b += piece) {
      const size_t len = std::min(piece, c - b);
      const bool shifted = gBug == Bug::kWrongBlock && r == 2 && b == 0;
      out->add(makeStep(StepKind::kSend, to, {kS, shifted ? b + 1 : b}, {kR, 0}, len));
      const bool shorter = gBug == Bug::kCountMismatch && r == 1 && from == 0 && b == 0;
      out->add(
          makeStep(StepKind::kRecv, from, {kR, 0}, {kR, from * c + b}, shorter ? len - 1 : len));
    }
  }
}

// Recursive-doubling all-reduce for a power-of-two nranks, piece by piece: at stage k
// exchange the vector with rank ^ 2^k and add what arrives. The recv-reduce of a piece
// waits for that piece's send (in place, or from stage 1 on, they share elements) and the
// next stage's send waits for the recv-reduce.
void buildExchange(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  const size_t c = a.count;
  const size_t piece = gBug == Bug::kWholeMessage ? std::max<size_t>(c, 1) : a.pieceElems;
  if (n == 1) {
    out->add(makeStep(StepKind::kCopy, -1, {kS, 0}, {kR, 0}, c));
    return;
  }
  std::vector<int> lastReduce((c + piece - 1) / piece, -1);
  for (int k = 1; k < n; k *= 2) {
    const int peer = r ^ k;
    for (size_t b = 0, i = 0; b < c; b += piece, ++i) {
      const size_t len = std::min(piece, c - b);
      const BufRef src{k == 1 ? kS : kR, b};
      Step send = makeStep(StepKind::kSend, peer, src, {kR, 0}, len);
      send.deps[0] = lastReduce[i];
      const int sent = out->add(send);
      Step red = makeStep(StepKind::kRecvReduce, peer, src, {kR, b}, len);
      if (!(gBug == Bug::kNoInPlaceDep && k == 1)) red.deps[0] = sent;
      red.deps[1] = lastReduce[i];
      if (a.op == braidAvg && 2 * k == n) red.divisor = n;
      lastReduce[i] = out->add(red);
    }
  }
}

// Barrier: dissemination (Hensgen, Finkel & Manber 1988): round k sends to rank + 2^k and
// receives from rank - 2^k. The broken one runs round 0 only.
void buildBarrier(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  const int n = a.nranks, r = a.rank;
  int last = -1;
  for (int k = 1; k < n; k *= 2) {
    Step s = makeStep(StepKind::kSend, (r + k) % n, {kS, 0}, {kR, 0}, 0);
    s.deps[0] = last;
    out->add(s);
    // Each round's receive waits for the last, so a round's send follows every receive
    // before it: without that, round 2 may leave before round 0's message arrived.
    Step v = makeStep(StepKind::kRecv, (r - k + n) % n, {kS, 0}, {kR, 0}, 0);
    v.deps[0] = last;
    last = out->add(v);
    if (gBug == Bug::kOneWayBarrier) break;
  }
}

VerifyResult verify(BuildFn build, Collective coll, int n, size_t count, bool inPlace,
                    braidRedOp_t op = braidSum, size_t piece = 3, size_t slots = 2) {
  AlgorithmInfo algo{"handmade", coll, "test schedule", build, nullptr};
  auto args = [&](int r) {
    CollArgs a;
    a.coll = coll;
    a.count = count;
    a.op = op;
    a.rank = r;
    a.nranks = n;
    a.pieceElems = piece;
    return a;
  };
  VerifyOptions opts;
  opts.connectionSlots = slots;
  return verifySchedules(algo, n, args, inPlace, opts);
}

class HandMade : public testing::Test {
 protected:
  void TearDown() override { gBug = Bug::kNone; }
};

TEST_F(HandMade, CorrectSchedulesPass) {
  for (int n : {1, 2, 3, 5, 8})
    for (bool inPlace : {false, true})
      for (braidRedOp_t op : {braidSum, braidAvg}) {
        VerifyResult r = verify(buildCentral, Collective::kAllReduce, n, 7, inPlace, op);
        EXPECT_TRUE(r.ok) << r.message;
        r = verify(buildCentral, Collective::kReduce, n, 7, inPlace, op);
        EXPECT_TRUE(r.ok) << r.message;
        r = verify(buildDirectAllGather, Collective::kAllGather, n, 7, inPlace);
        EXPECT_TRUE(r.ok) << r.message;
        r = verify(buildBarrier, Collective::kBarrier, n, 0, false);
        EXPECT_TRUE(r.ok) << r.message;
        if ((n & (n - 1)) == 0) {
          r = verify(buildExchange, Collective::kAllReduce, n, 10, inPlace, op);
          EXPECT_TRUE(r.ok) << r.message;
        }
      }
}

// Expects the verifier to refuse, with every one of `needles` in its message.
void expectCaught(const VerifyResult& r, std::initializer_list<const char*> needles) {
  ASSERT_FALSE(r.ok) << "the verifier accepted a broken schedule";
  for (const char* s : needles) EXPECT_NE(r.message.find(s), std::string::npos) << r.message;
  std::printf("caught: %s\n", r.message.c_str());
}

TEST_F(HandMade, MissingSendDeadlocks) {
  gBug = Bug::kMissingSend;
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 5, false),
               {"deadlock: 4 of 4 ranks", "rank 0 step 2 (recv-reduce 5 elements from rank 3",
                "rank 3 never sends"});
}

TEST_F(HandMade, MissingRecvDeadlocksOnBoundedBuffers) {
  gBug = Bug::kMissingRecv;
  // Rank 3's 5-element message needs 2 slots of 3 elements... it fits, so the verifier sees
  // the message nobody receives.
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 5, false),
               {"rank 3 sends 1 messages to rank 0, which receives only 0"});
  // 10 elements need 4 slots: the send waits forever for room.
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 10, false),
               {"deadlock when each connection buffers 2 pieces",
                "rank 3 step 0 (send 10 elements from send[0] to rank 0) waits for room",
                "rank 0 posts no receive from rank 3"});
}

TEST_F(HandMade, DoubledContribution) {
  gBug = Bug::kDoubled;
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 5, false),
               {"rank 0 step 2 (recv-reduce", "some rank is counted twice"});
}

TEST_F(HandMade, WrongOffsetMixesElements) {
  gBug = Bug::kMixedElements;
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 5, false),
               {"combines element 0 with element 1"});
}

TEST_F(HandMade, WrongOffsetGivesWrongResult) {
  gBug = Bug::kWrongBlock;
  expectCaught(verify(buildDirectAllGather, Collective::kAllGather, 4, 7, false),
               {"wrong result: rank 0's recv[14] holds rank 2's send[1], but should hold rank "
                "2's send[0]"});
}

TEST_F(HandMade, BroadcastBeforeTheReductionIsARace) {
  gBug = Bug::kBroadcastEarly;
  // Out of place the early send reads a receive buffer that holds nothing yet.
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 5, false),
               {"rank 0 step 3 (send 5 elements from recv[0] to rank 1) reads recv[0], which "
                "holds no value yet"});
  // In place it holds the root's own input, which happens to be read before it is reduced
  // into in the simulated order; the verifier still sees that nothing orders the two.
  expectCaught(verify(buildCentral, Collective::kAllReduce, 4, 5, true),
               {"race: rank 0 step", "nothing orders the two"});
}

TEST_F(HandMade, MissingInPlaceDependencyIsARace) {
  gBug = Bug::kNoInPlaceDep;
  // Out of place the first stage reads send and writes recv: no dependency needed.
  VerifyResult r = verify(buildExchange, Collective::kAllReduce, 4, 10, false);
  EXPECT_TRUE(r.ok) << r.message;
  // In place they are the same elements: the recv-reduce may overwrite a piece before the
  // send has read it, though the simulated order happens to be harmless.
  expectCaught(verify(buildExchange, Collective::kAllReduce, 4, 10, true),
               {"race: rank", "recv-reduce 3 elements from rank", "send 3 elements from send[",
                "nothing orders the two"});
}

TEST_F(HandMade, WholeMessageExchangeDeadlocksOnBoundedBuffers) {
  gBug = Bug::kWholeMessage;
  // Both ranks of a pair send 10 elements (4 slots) before receiving: with 2-slot
  // connections both wait for room.
  VerifyResult r = verify(buildExchange, Collective::kAllReduce, 4, 10, true, braidSum, 3, 0);
  EXPECT_TRUE(r.ok) << r.message;
  expectCaught(verify(buildExchange, Collective::kAllReduce, 4, 10, true),
               {"deadlock when each connection buffers 2 pieces", "waits for room",
                "with unbounded buffers it completes"});
  // Messages of at most two pieces fit.
  r = verify(buildExchange, Collective::kAllReduce, 4, 6, true);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST_F(HandMade, CountMismatch) {
  gBug = Bug::kCountMismatch;
  expectCaught(verify(buildDirectAllGather, Collective::kAllGather, 3, 7, false),
               {"rank 1 step", "(recv 2 elements from rank 0", "but their counts differ"});
}

TEST_F(HandMade, WritingTheSendBuffer) {
  gBug = Bug::kWritesSend;
  expectCaught(verify(buildCentral, Collective::kAllReduce, 3, 4, false),
               {"writes the send buffer"});
}

TEST_F(HandMade, WritingRecvOffRoot) {
  gBug = Bug::kNullRecvOffRoot;
  expectCaught(verify(buildCentral, Collective::kReduce, 3, 4, false),
               {"rank 1 step 1 (recv", "leaves unset (null) on rank 1"});
}

TEST_F(HandMade, AvgDividesOnce) {
  gBug = Bug::kDivideTwice;
  expectCaught(verify(buildCentral, Collective::kAllReduce, 3, 4, false, braidAvg),
               {"divides", "AVG must divide the full reduction"});
}

TEST_F(HandMade, BarrierMustHearFromEveryone) {
  gBug = Bug::kOneWayBarrier;
  expectCaught(verify(buildBarrier, Collective::kBarrier, 4, 0, false),
               {"may leave the barrier before rank"});
}

// Ring all-reduce without the dependency of each all-gather receive on the reduce-scatter
// send of the same piece: in place the receive overwrites what that send reads, but the
// value received already includes this rank's sent contribution, so a chain of messages
// around the ring orders the two. The verifier must accept it (no false race).
BuildFn gRingBuild = nullptr;
void buildRingWithoutRecvDeps(const CollArgs& a, Schedule* out) {
  gRingBuild(a, out);
  for (Step& s : out->steps)
    if (s.kind == StepKind::kRecv) std::fill(std::begin(s.deps), std::end(s.deps), -1);
}

TEST_F(HandMade, OrderThroughAChainOfMessagesIsNoRace) {
  const AlgorithmInfo* ring = findAlgorithm(Collective::kAllReduce, "ring");
  ASSERT_NE(ring, nullptr);
  gRingBuild = ring->build;
  for (int n : {2, 3, 5, 8}) {
    VerifyResult r = verify(buildRingWithoutRecvDeps, Collective::kAllReduce, n, 20, true);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// Dependencies that wait on each other never run.
void buildCycle(const CollArgs& a, Schedule* out) {
  out->steps.clear();
  out->scratchElems = 0;
  Step s = makeStep(StepKind::kCopy, -1, {kS, 0}, {kR, 0}, a.count);
  s.deps[0] = 1;
  out->add(s);
  Step t = makeStep(StepKind::kCopy, -1, {kS, 0}, {kR, 0}, a.count);
  t.deps[0] = 0;
  out->add(t);
}

TEST_F(HandMade, DependencyCycle) {
  expectCaught(verify(buildCycle, Collective::kAllReduce, 1, 4, false),
               {"deadlock: 1 of 1 ranks", "is in a cycle of dependencies"});
}

// ---- Hierarchical rows over host layouts ----------------------------------------------
//
// The sweep above runs every row with hostOf null (one host). The hierarchical rows also
// read CollArgs::hostOf, so they are verified here over layouts of several hosts:
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
  const auto start = std::chrono::steady_clock::now();
  VerifyResult r = verifySchedules(*ring, 1024, args, true);
  const double sec =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.ok) << r.message;
  std::printf("ring all-reduce, 1024 ranks, 1024 elements, in place: %.2f s\n", sec);
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

// ---- The executor's plan: which receive-reduces write the call's final output ----------
// Plan::finalOutput marks a receive-reduce into the receive buffer that no later step reads
// (its output may then go to memory with streaming stores). Recursive doubling on 2 ranks out
// of place reduces straight into the receive buffer, once per piece, and nothing reads it
// again; in place it reduces into scratch and copies. The ring's reduce-scatter phase of an
// all-reduce is read back by its all-gather; a ring reduce-scatter's last step is the output.
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
