// The cost-model selector: each algorithm's closed form (AlgorithmInfo::cost, written beside
// its builders in src/algorithms over algorithms/cost.h) or, where cheap enough, the schedule
// simulator (simulate.h) predicts a call's time on a Fabric; the fastest candidate wins.
// Also the call sizes nccl-tests prints, pipelining grain choice and BRAID_ALGO's rules.
#include "tuning/cost_model.h"

#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "base/config.h"
#include "base/error.h"
#include "tuning/simulate.h"

namespace braid::tuning {

size_t callBytes(Collective coll, size_t count, size_t elemSize, int nranks) {
  const size_t b = count * elemSize;
  switch (coll) {
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
    case Collective::kGather:
    case Collective::kScatter:
      return b * static_cast<size_t>(nranks);
    default:
      return b;
  }
}

double predictUs(const AlgorithmInfo& algo, Collective coll, size_t count, size_t elemSize,
                 const Fabric& fabric, bool inPlace) {
  if (fabric.nranks() <= 1)
    return fabric.step_overhead_us + count * elemSize / (fabric.copy_gbs * 1e3);
  if (coll != algo.coll || !algo.cost) return -1;
  CostModel m(fabric);
  m.inPlace = inPlace;
  return algo.cost(m, static_cast<double>(count) * elemSize);
}

namespace {
std::atomic<uint64_t> computedPredictions{0};

// What a simulated prediction depends on, as a key: the call and every figure of the fabric.
std::string predictionKey(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                          const Fabric& f) {
  std::string key = std::string(algo.name) + "/" + collectiveName(args.coll) + "/" +
                    std::to_string(args.count * elemSize) + "/" + std::to_string(elemSize) + "/" +
                    std::to_string(args.root) + "/" + std::to_string(f.chunk_bytes) + "/" +
                    std::to_string(f.fifo_slots) + "/" + std::to_string(f.nicsPerHost) + "/" +
                    formatCalibration(f) + (args.inPlace ? "/in place/" : "/");
  for (int h : f.hostOf) key += std::to_string(h) + ",";
  key += "/";
  for (int r : f.ring) key += std::to_string(r) + ",";
  return key;
}
}  // namespace

uint64_t predictionsComputed() { return computedPredictions.load(std::memory_order_relaxed); }

double predictCallUs(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                     const Fabric& whole) {
  // Simulated predictions are kept for the process: every rank of a communicator asks the
  // same question when it compiles a plan (and threads of one process share the answer), and
  // calls of other dtypes and ops of the same size cost the same. Thread ranks ask at the same
  // moment: the first plays the simulation and the others wait for its answer rather than play
  // it too (ASan+UBSan build, 2 cores: EdgeCases.AvgAtOddRankCountsEveryAlgorithm, up to 28
  // thread ranks, 31.7 s to 3.8).
  static std::mutex memoMu;
  static std::unordered_map<std::string, std::shared_future<double>> memo;
  if (whole.nranks() > kSimulateRanks) {
    computedPredictions.fetch_add(1, std::memory_order_relaxed);
    return predictCallUsUncached(algo, args, elemSize, whole);
  }
  std::string key = predictionKey(algo, args, elemSize, whole);
  std::promise<double> mine;
  std::shared_future<double> answer;
  bool play = false;  // this thread plays the simulation; the others wait for its answer
  {
    std::lock_guard<std::mutex> lock(memoMu);
    auto it = memo.find(key);
    if (it != memo.end()) {
      answer = it->second;
    } else {
      if (memo.size() >= 4096) memo.clear();
      answer = mine.get_future().share();
      memo.emplace(key, answer);
      play = true;
    }
  }
  if (!play) return answer.get();
  computedPredictions.fetch_add(1, std::memory_order_relaxed);
  try {
    const double us = predictCallUsUncached(algo, args, elemSize, whole);
    mine.set_value(us);
    return us;
  } catch (...) {
    // The waiters see the same failure; later calls ask again.
    mine.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(memoMu);
    memo.erase(key);
    throw;
  }
}

double predictCallUsUncached(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                             const Fabric& whole) {
  // What each rank sends and receives: the call's size plus its own vector or block.
  const Fabric fabric = whole.forCall(callBytes(args.coll, args.count, elemSize, whole.nranks()) +
                                      args.count * elemSize);
  // The simulator plays every step: only where the steps are few enough to be cheap (a
  // bound on the pieces every rank moves, n ranks x pieces of the whole call x log n).
  const double pieces =
      static_cast<double>(callBytes(args.coll, args.count, elemSize, fabric.nranks())) /
          std::max<size_t>(fabric.chunk_bytes, 1) +
      fabric.nranks();
  // Calls back to back, as nccl-tests (20 by default) and training loops issue them: the time
  // per call once they follow each other (a rooted call's root starts the next while others
  // finish). As many as the step budget allows, 3 to 20.
  const double steps = pieces * fabric.nranks() * 8;
  const int calls = static_cast<int>(std::clamp(kSimulateSteps / std::max(steps, 1.0), 1.0, 20.0));
  if (fabric.nranks() <= kSimulateRanks && args.coll != Collective::kAllToAllv && args.count > 0 &&
      calls >= 3) {
    try {
      const SimResult r = simulateSchedules(algo, args, elemSize, fabric, kSimulateRanks, calls);
      if (r.ok) return r.per_call_us;
    } catch (const std::bad_alloc&) {
      // Too large to play after all: the closed form answers.
    }
  }
  return predictUs(algo, args.coll, args.count, elemSize, fabric, args.inPlace);
}

size_t choosePieceBytes(const AlgorithmInfo& algo, const CollArgs& args, size_t elemSize,
                        const Fabric& fabric) {
  const size_t chunk = std::max(fabric.chunk_bytes, elemSize) / elemSize * elemSize;
  const int n = fabric.nranks();
  // A call of more than kPieceChoiceChunks chunks per rank is pipelined deeply at the
  // chunk already, and its smaller pieces would be costly to simulate: it keeps the chunk.
  if (args.coll == Collective::kAllToAllv || args.coll == Collective::kBarrier || args.count == 0 ||
      n <= 1 || chunk / 2 < kMinPieceBytes ||
      callBytes(args.coll, args.count, elemSize, n) / static_cast<size_t>(n) >
          kPieceChoiceChunks * chunk)
    return chunk;
  CollArgs a = args;  // as rankCandidates sees the call
  a.nranks = n;
  a.hostOf = fabric.nhosts() > 1 ? fabric.hostOf.data() : nullptr;
  a.ring = fabric.ring.empty() ? nullptr : fabric.ring.data();
  Fabric f = fabric;
  f.chunk_bytes = chunk;
  size_t best = chunk;
  double bestUs = predictCallUs(algo, a, elemSize, f);
  for (size_t piece = chunk / 2; piece >= kMinPieceBytes && piece >= chunk / 8; piece /= 2) {
    f.chunk_bytes = piece / elemSize * elemSize;
    const double us = predictCallUs(algo, a, elemSize, f);
    if (us >= 0 && us * (1 + kTie) < bestUs) {
      best = f.chunk_bytes;
      bestUs = us;
    }
  }
  return best;
}

std::vector<Candidate> rankCandidates(const CollArgs& args, size_t elemSize, const Fabric& fabric,
                                      int* best) {
  std::vector<Candidate> out;
  *best = -1;
  CollArgs a = args;
  a.nranks = fabric.nranks();
  a.hostOf = fabric.nhosts() > 1 ? fabric.hostOf.data() : nullptr;
  a.ring = fabric.ring.empty() ? nullptr : fabric.ring.data();
  for (const AlgorithmInfo& algo : algorithms()) {
    if (algo.coll != args.coll) continue;
    Candidate c;
    c.algo = &algo;
    c.unsupported = unsupportedReason(algo, a);
    c.predicted_us = c.unsupported ? -1 : predictCallUs(algo, a, elemSize, fabric);
    if (c.predicted_us < 0 && !c.unsupported)
      c.unsupported = "the cost model has no formula for it";
    out.push_back(c);
    const int i = static_cast<int>(out.size()) - 1;
    if (!c.unsupported && (*best < 0 || c.predicted_us < out[*best].predicted_us)) *best = i;
  }
  // A tie (within kTie) goes to the algorithm listed first: where the host's memory system
  // binds (host_bw_gbs), every algorithm moving the same bytes is predicted alike, and which
  // is faster is decided by what the model does not see (caches, the scheduler of an
  // oversubscribed host), so the table's order of preference decides, not rounding.
  if (*best >= 0)
    for (size_t i = 0; i < out.size(); ++i)
      if (!out[i].unsupported && out[i].predicted_us <= out[*best].predicted_us * (1 + kTie)) {
        *best = static_cast<int>(i);
        break;
      }
  return out;
}

std::string AlgoSpec::forced(Collective coll, size_t bytes) const {
  for (const AlgoRule& r : rules) {
    if (bytes < r.lo || bytes >= r.hi) continue;
    if (r.coll == static_cast<int>(coll)) return r.algo;
    if (r.coll < 0 && findAlgorithm(coll, r.algo)) return r.algo;
  }
  return "";
}

namespace {
std::string trimmed(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, std::min(s.size(), s.find_first_not_of(ws)));
  const size_t last = s.find_last_not_of(ws);
  s.erase(last == std::string::npos ? 0 : last + 1);
  return s;
}
// The distinct algorithm names of coll (-1: of every collective), for messages.
std::string algorithmNames(int coll) {
  std::vector<std::string> names;
  for (const AlgorithmInfo& a : algorithms())
    if ((coll < 0 || static_cast<int>(a.coll) == coll) &&
        std::find(names.begin(), names.end(), a.name) == names.end())
      names.push_back(a.name);
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}
}  // namespace

braidResult_t parseAlgoSpec(const std::string& text, AlgoSpec* out) {
  out->text = text;
  out->rules.clear();
  int coll = -1;  // the collective of the last "coll:" item; -1 before any
  if (trimmed(text).empty()) return braidSuccess;  // unset: the selector decides
  size_t at = 0;
  for (int number = 1; at <= text.size(); ++number) {
    size_t end = text.find_first_of(";,", at);
    if (end == std::string::npos) end = text.size();
    std::string item = trimmed(text.substr(at, end - at));
    at = end + 1;
    if (item.empty())
      return fail(braidInvalidArgument,
                  "BRAID_ALGO=%s: item %d is empty (two separators in a row, or one at an end)",
                  text.c_str(), number);
    AlgoRule rule;
    const size_t colon = item.find(':');
    if (colon != std::string::npos) {
      const std::string name = trimmed(item.substr(0, colon));
      coll = -1;
      for (int c = 0; c < kNumCollectives; ++c)
        if (!strcasecmp(name.c_str(), collectiveName(static_cast<Collective>(c)))) coll = c;
      if (coll < 0)
        return fail(braidInvalidArgument,
                    "BRAID_ALGO=%s: \"%s\" names no collective (allreduce, reducescatter, "
                    "allgather, broadcast, reduce, alltoall, alltoallv, gather, scatter, barrier)",
                    text.c_str(), name.c_str());
      item = trimmed(item.substr(colon + 1));
    }
    const size_t atSign = item.find('@');
    rule.coll = coll;
    rule.algo = trimmed(item.substr(0, atSign));
    if (atSign != std::string::npos) {
      const std::string range = trimmed(item.substr(atSign + 1));
      const size_t dash = range.find('-');
      const std::string lo = trimmed(range.substr(0, dash));
      const std::string hi = dash == std::string::npos ? "" : trimmed(range.substr(dash + 1));
      if (dash == std::string::npos || (!lo.empty() && !parseByteSize(lo, &rule.lo)) ||
          (!hi.empty() && !parseByteSize(hi, &rule.hi)))
        return fail(braidInvalidArgument,
                    "BRAID_ALGO=%s: \"@%s\" is not a byte range LO-HI (for example @0-64K, "
                    "@64K-, @1M-16M)",
                    text.c_str(), range.c_str());
      if (rule.lo >= rule.hi)
        return fail(braidInvalidArgument, "BRAID_ALGO=%s: the range \"@%s\" is empty", text.c_str(),
                    range.c_str());
    }
    bool known = false;
    for (const AlgorithmInfo& a : algorithms())
      if (!strcasecmp(a.name, rule.algo.c_str()) &&
          (coll < 0 || static_cast<int>(a.coll) == coll)) {
        known = true;
        rule.algo = a.name;
      }
    if (!known) {
      if (coll < 0)
        return fail(braidInvalidArgument,
                    "BRAID_ALGO=%s: no collective has an algorithm \"%s\" (known: %s)",
                    text.c_str(), rule.algo.c_str(), algorithmNames(-1).c_str());
      return fail(braidInvalidArgument, "BRAID_ALGO=%s: %s has no algorithm \"%s\" (known: %s)",
                  text.c_str(), collectiveName(static_cast<Collective>(coll)), rule.algo.c_str(),
                  algorithmNames(coll).c_str());
    }
    out->rules.push_back(rule);
  }
  return braidSuccess;
}

}  // namespace braid::tuning

namespace braid::tuning {
double busBwFactor(Collective coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Collective::kAllReduce:
      return 2 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
      return (n - 1) / n;
    case Collective::kBarrier:
      return 0;
    default:
      return 1;
  }
}
}  // namespace braid::tuning
