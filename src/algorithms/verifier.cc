// The schedule verifier (DESIGN.md, "algorithms are schedules"; the checks are listed in
// verifier.h): verifySchedules, and the symbolic run of a Program, every rank's schedule as
// verifier_program.h builds, checks and packs it, over the symbols described there. The run's
// state, and the checks made once it has ended (outputs, leftover messages, barrier, the
// deadlock's description), are verifier_sim.h's and verifier_checks.cc's.
//
// How it runs. The simulation drains a worklist of queues: a queue's head step runs once
// its dependencies are done. A send snapshots its source elements as the message and pushes
// the message's slots into the connection while there is room
// (VerifyOptions::connectionSlots); a receive drains the slots of the message at the head
// of its connection and, once the whole message is in, writes its destination. When no
// queue can move, whatever is left is a deadlock.
//
// Races. The simulation picks one order; the executor may pick another. So each element
// remembers its last writer and the readers since, and a step that reads (writes) it must
// be ordered after that writer (and those readers). "Ordered" is the executor's
// happens-before: queue order, dependencies and send -> matching receive, transitively and
// across ranks. A backward search from the later step proves it, never leaving the time
// window after the earlier step finished; a small cache serves the common case of one step
// touching many elements that one earlier step touched. With every conflicting pair
// ordered, every execution computes what the simulated one did.
//
// Barrier. Each step carries the set of ranks it has heard from (its own, its queue
// predecessor's, its dependencies' and, for a receive, the matching send's); every rank
// must have heard from all when it finishes. Sets live in a refcounted pool.
#include "algorithms/verifier.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "algorithms/verifier_program.h"
#include "algorithms/verifier_sim.h"

namespace braid {
namespace verify {
namespace {

enum class Outcome { kOk, kDeadlock, kError };
struct RunResult {
  Outcome outcome = Outcome::kOk;
  std::string message;
};

// Sets of buffers that runs hand on to later runs: take() gives one back from an earlier run
// (emptied, its capacity kept) or a new one; give() returns it. The pool holds as many sets as
// ever ran at once, for the life of the process.
template <class B>
class KeptPool {
 public:
  static std::unique_ptr<B> take() {
    std::lock_guard<std::mutex> lock(mu());
    std::vector<std::unique_ptr<B>>& sets = pool();
    if (sets.empty()) return std::make_unique<B>();
    std::unique_ptr<B> b = std::move(sets.back());
    sets.pop_back();
    return b;
  }
  static void give(std::unique_ptr<B> b) {
    std::lock_guard<std::mutex> lock(mu());
    pool().push_back(std::move(b));
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::unique_ptr<B>>& pool() {
    static std::vector<std::unique_ptr<B>> sets;
    return sets;
  }
};

// v.assign(n, x), the capacity grown by at least half when it must grow: runs of a sweep grow
// one after another, and fitting each exactly reallocated (and faulted in) the buffer for each.
template <class T>
void assignGrowing(std::vector<T>& v, size_t n, const std::type_identity_t<T>& x) {
  if (n > v.capacity()) {
    v.clear();
    v.reserve(std::max(n, v.capacity() + v.capacity() / 2));
  }
  v.assign(n, x);
}

// One symbolic run of a Program.
class Sim : SimState {
 public:
  // A run takes the buffers of an earlier run, emptied with their capacity kept: a sweep
  // verifies thousands of schedules, and buffers of up to hundreds of MiB allocated afresh for
  // each were faulted in 4 KiB at a time (under ASan+UBSan, 1.8 million page faults in the
  // hierarchical sweep, 16 of its 41 CPU-seconds in the kernel). The sets outlive the threads
  // that used them (KeptPool), and grow by half again when they must grow (assignGrowing).
  Sim(const Program& p, size_t slots) : SimState(p, slots), kept_(KeptPool<Buffers>::take()) {
    exchange(*kept_);
  }
  ~Sim() {
    forEachBuffer(*kept_, [](auto& mine, auto&) { mine.clear(); });
    exchange(*kept_);
    KeptPool<Buffers>::give(std::move(kept_));
  }
  Sim(const Sim&) = delete;
  Sim& operator=(const Sim&) = delete;

  RunResult run() {
    init();
    simulate();
    if (failed_) return {Outcome::kError, error_};
    if (remaining_ > 0) return {Outcome::kDeadlock, describeDeadlock()};
    if (!checkLeftoverMessages() || !checkOutputs() || !checkBarrier())
      return {Outcome::kError, error_};
    return {};
  }

 private:
  void init() {
    const size_t total = p_.steps.size();
    assignGrowing(mem_, static_cast<size_t>(p_.elems), Sym{0, 0, 0, 0, 0});
    for (int r = 0; r < p_.n; ++r) {
      const BufInfo& send = p_.buf(r, 0);
      if (send.null) continue;
      for (size_t k = 0; k < send.size; ++k) mem_[send.base + k] = p_.dataSym(r, k);
    }
    assignGrowing(writer_, mem_.size(), -1);
    assignGrowing(reader_, mem_.size(), -1);
    assignGrowing(overflow_, mem_.size(), -1);
    dyn_.resize(total);
    for (size_t g = 0; g < total; ++g) dyn_[g] = Dyn{0, kPending, p_.steps[g].ndeps};
    assignGrowing(payload_, total, -1);
    qs_.resize(p_.queues.size());
    for (size_t q = 0; q < p_.queues.size(); ++q) {
      const Queue& Q = p_.queues[q];
      qs_[q] = QState{Q.begin, Q.begin, Q.end, Q.partner, Q.kind, 0, 0, 0};
    }
    remaining_ = static_cast<int64_t>(total);
    if (p_.barrier) {
      words_ = (static_cast<size_t>(p_.n) + 63) / 64;
      heard_.assign(static_cast<size_t>(p_.n) * words_, 0);
      for (int r = 0; r < p_.n; ++r) heard_[r * words_ + r / 64] |= uint64_t{1} << (r % 64);
      stepSet_.assign(total, -1);
      refs_ = p_.refs;
    }
  }

  // ---- Simulation ---------------------------------------------------------------------

  void wake(int32_t q) {
    if (q >= 0 && !qs_[q].inWork) {
      qs_[q].inWork = 1;
      work_.push_back(q);
    }
  }

  void simulate() {
    for (size_t q = p_.queues.size(); q-- > 0;) wake(static_cast<int32_t>(q));
    while (!work_.empty() && !failed_) {
      const int32_t q = work_.back();
      work_.pop_back();
      qs_[q].inWork = 0;
      runQueue(q);
    }
  }

  void complete(int32_t g) {
    dyn_[g].state = kDone;
    dyn_[g].doneTime = ++clock_;
    --remaining_;
    if (p_.barrier) mergeHeard(g);
    for (int32_t k = p_.revBegin[g]; k < p_.revBegin[g + 1]; ++k) {
      const int32_t d = p_.rev[k];
      if (--dyn_[d].depsLeft == 0) wake(p_.steps[d].queue);
    }
  }

  int64_t slotsOf(uint32_t count) const {
    const size_t piece = p_.pieceElems;
    return std::max<int64_t>(1, static_cast<int64_t>(count / piece + (count % piece != 0)));
  }

  void runQueue(int32_t qi) {
    QState& Q = qs_[qi];
    int32_t& head = Q.head;
    while (head < Q.end && !failed_) {
      const int32_t g = p_.qSteps[head];
      if (dyn_[g].depsLeft > 0) return;
      const PStep& s = p_.steps[g];
      if (Q.kind == kLocalQ) {
        runCopy(g);
        complete(g);
        ++head;
      } else if (Q.kind == kSendQ) {
        if (dyn_[g].state == kPending) {
          startSend(g);
          dyn_[g].state = kStarted;
          Q.aux = 0;
          if (failed_) return;
        }
        const int64_t m = slotsOf(s.count);
        const int64_t push = slots_ == 0 ? m - Q.aux : std::min(m - Q.aux, slots_ - Q.occ);
        if (push > 0) {
          Q.aux += push;
          Q.occ += push;
          wake(Q.partner);
        }
        if (Q.aux < m) return;  // the connection is full: wait for the receiver
        Q.aux = 0;
        complete(g);
        ++head;
      } else {
        if (Q.partner < 0) return;  // the peer never sends here: a deadlock, reported later
        QState& S = qs_[Q.partner];
        const int32_t k = head - Q.begin;
        if (k >= S.end - S.begin) return;  // more receives than the peer sends
        const int32_t sg = p_.qSteps[S.begin + k];
        if (dyn_[sg].state == kPending) return;
        if (p_.steps[sg].count != s.count) {
          fail(format("%s matches %s (message %d between them), but their counts differ",
                      p_.describeStep(g).c_str(), p_.describeStep(sg).c_str(), k + 1));
          return;
        }
        const int64_t m = slotsOf(s.count);
        const int64_t avail = dyn_[sg].state == kDone ? m : S.aux;
        if (avail > Q.aux) {
          S.occ -= avail - Q.aux;
          Q.aux = avail;
          wake(Q.partner);
        }
        if (dyn_[sg].state != kDone) return;
        runRecv(g, sg);
        Q.aux = 0;
        complete(g);
        ++head;
      }
    }
  }

  // ---- Data ---------------------------------------------------------------------------

  std::string readsUndefined(int32_t g, uint32_t e) const {
    const PStep& s = p_.steps[g];
    return format("%s reads %s[%lld], which holds no value yet", p_.describeStep(g).c_str(),
                  bufName(s.srcBuf), static_cast<long long>(e - p_.buf(s.rank, s.srcBuf).base));
  }

  void startSend(int32_t g) {
    const PStep& s = p_.steps[g];
    payload_[g] = static_cast<int64_t>(arena_.size());
    arena_.resize(arena_.size() + s.count);
    Sym* out = arena_.data() + payload_[g];
    for (uint32_t i = 0; i < s.count; ++i) {
      const uint32_t e = s.src + i;
      if (mem_[e].cnt == 0) {
        fail(readsUndefined(g, e));
        return;
      }
      if (!onRead(e, g)) return;
      out[i] = mem_[e];
    }
    liveSends_.push_back(g);
    liveElems_ += s.count;
  }

  void runRecv(int32_t g, int32_t sg) {
    const PStep& s = p_.steps[g];
    const Sym* in = arena_.data() + payload_[sg];
    if (s.kind == StepKind::kRecv) {
      for (uint32_t i = 0; i < s.count; ++i) {
        if (!onWrite(s.dst + i, g)) return;
        mem_[s.dst + i] = in[i];
      }
    } else {
      for (uint32_t i = 0; i < s.count; ++i) {
        const uint32_t es = s.src + i, ed = s.dst + i;
        Sym v = mem_[es];
        if (v.cnt == 0) {
          fail(readsUndefined(g, es));
          return;
        }
        if (!onRead(es, g) || !combine(g, &v, in[i], i)) return;
        if (s.divisor > 1 && !divide(g, &v, s.divisor, i)) return;
        if (!onWrite(ed, g)) return;
        mem_[ed] = v;
      }
    }
    payload_[sg] = -1;
    liveElems_ -= s.count;
    if (arena_.size() > (size_t{1} << 20) && arena_.size() > 4 * liveElems_) compactArena();
  }

  void runCopy(int32_t g) {
    const PStep& s = p_.steps[g];
    if (s.count == 0 || (s.src == s.dst && s.divisor == 1)) return;  // the executor skips it
    tmp_.resize(s.count);
    for (uint32_t i = 0; i < s.count; ++i) {
      const uint32_t e = s.src + i;
      if (mem_[e].cnt == 0) {
        fail(readsUndefined(g, e));
        return;
      }
      if (!onRead(e, g)) return;
      tmp_[i] = mem_[e];
      if (s.divisor > 1 && !divide(g, &tmp_[i], s.divisor, i)) return;
    }
    for (uint32_t i = 0; i < s.count; ++i) {
      if (!onWrite(s.dst + i, g)) return;
      mem_[s.dst + i] = tmp_[i];
    }
  }

  bool combine(int32_t g, Sym* acc, const Sym& in, size_t i) {
    if (acc->idx != in.idx)
      return fail(format("%s combines element %llu with element %llu at its element %zu",
                         p_.describeStep(g).c_str(), static_cast<unsigned long long>(acc->idx),
                         static_cast<unsigned long long>(in.idx), i));
    if (acc->divided || in.divided)
      return fail(format(
          "%s combines a value that AVG has already divided (%s with %s); AVG "
          "divides only the full reduction, once",
          p_.describeStep(g).c_str(), p_.describeSym(*acc).c_str(), p_.describeSym(in).c_str()));
    if (static_cast<uint64_t>(acc->cnt) + in.cnt > static_cast<uint64_t>(p_.n))
      return fail(
          format("%s combines %s with %s: %u contributions, more than %d ranks, so some "
                 "rank is counted twice",
                 p_.describeStep(g).c_str(), p_.describeSym(*acc).c_str(),
                 p_.describeSym(in).c_str(), acc->cnt + in.cnt, p_.n));
    acc->h1 += in.h1;
    acc->h2 += in.h2;
    acc->cnt += in.cnt;
    return true;
  }

  bool divide(int32_t g, Sym* v, int divisor, size_t i) {
    if (!p_.reducing || p_.op != braidAvg)
      return fail(format("%s divides by %d, but the op is %s", p_.describeStep(g).c_str(), divisor,
                         p_.reducing ? opName(p_.op) : "none (data movement)"));
    if (divisor != p_.n)
      return fail(format("%s divides by %d, not by nranks = %d", p_.describeStep(g).c_str(),
                         divisor, p_.n));
    if (v->divided)
      return fail(format("%s divides element %zu a second time", p_.describeStep(g).c_str(), i));
    if (static_cast<int>(v->cnt) != p_.n || v->h1 != p_.h1All || v->h2 != p_.h2All)
      return fail(format("%s divides %s: AVG must divide the full reduction",
                         p_.describeStep(g).c_str(), p_.describeSym(*v).c_str()));
    v->divided = 1;
    return true;
  }

  void compactArena() {
    size_t at = 0, keep = 0;
    for (int32_t g : liveSends_) {
      if (payload_[g] < 0) continue;
      const size_t cnt = p_.steps[g].count;
      if (static_cast<size_t>(payload_[g]) != at)
        std::memmove(&arena_[at], &arena_[payload_[g]], cnt * sizeof(Sym));
      payload_[g] = static_cast<int64_t>(at);
      at += cnt;
      liveSends_[keep++] = g;
    }
    liveSends_.resize(keep);
    arena_.resize(at);
  }

  // ---- Races --------------------------------------------------------------------------

  bool onRead(uint32_t e, int32_t g) {
    const int32_t w = writer_[e];
    if (w >= 0 && w != g && !ordered(w, g)) return raceError(w, g, e, "reads", "written");
    const int32_t r = reader_[e];
    if (r == g) return true;
    if (r >= 0 && p_.steps[r].queue != p_.steps[g].queue && !(cacheOwner_ == g && cached(r))) {
      pool_.push_back({r, overflow_[e]});
      overflow_[e] = static_cast<int32_t>(pool_.size() - 1);
    }
    reader_[e] = g;
    return true;
  }

  bool onWrite(uint32_t e, int32_t g) {
    const int32_t w = writer_[e];
    if (w >= 0 && w != g && !ordered(w, g)) return raceError(w, g, e, "writes", "written");
    const int32_t r = reader_[e];
    if (r >= 0 && r != g && !ordered(r, g)) return raceError(r, g, e, "writes", "read");
    for (int32_t k = overflow_[e]; k >= 0; k = pool_[k].second) {
      const int32_t rr = pool_[k].first;
      if (rr != g && !ordered(rr, g)) return raceError(rr, g, e, "writes", "read");
    }
    writer_[e] = g;
    reader_[e] = -1;
    overflow_[e] = -1;
    return true;
  }

  // Names element e by the buffer step g reaches it through.
  std::string elementName(int32_t g, uint32_t e) const {
    const PStep& s = p_.steps[g];
    for (int b : {static_cast<int>(s.dstBuf), static_cast<int>(s.srcBuf)}) {
      if (b > 2) continue;
      const BufInfo& bi = p_.buf(s.rank, b);
      if (!bi.null && e >= bi.base && e < bi.base + static_cast<int64_t>(bi.size))
        return format("%s[%lld]", bufName(b), static_cast<long long>(e - bi.base));
    }
    return format("element %u", e);
  }

  bool raceError(int32_t a, int32_t b, uint32_t e, const char* verb, const char* pastVerb) {
    return fail(
        format("race: %s %s %s, which %s has %s, and nothing orders the two (no "
               "dependency, queue order or chain of messages): the executor may run "
               "them the other way round",
               p_.describeStep(b).c_str(), verb, elementName(b, e).c_str(),
               p_.describeStep(a).c_str(), pastVerb));
  }

  bool cached(int32_t a) const {
    for (int k = 0; k < cacheN_; ++k)
      if (cache_[k] == a) return true;
    return false;
  }

  // Whether a (done) happens before b (running), by the executor's rules; cached per b.
  bool ordered(int32_t a, int32_t b) {
    if (cacheOwner_ != b) {
      cacheOwner_ = b;
      cacheN_ = 0;
    }
    if (cached(a)) return true;
    if (!happensBefore(a, b)) return false;
    if (cacheN_ < kCache) {
      cache_[cacheN_++] = a;
    } else {
      cache_[cacheNext_] = a;
      cacheNext_ = (cacheNext_ + 1) % kCache;
    }
    return true;
  }

  bool happensBefore(int32_t a, int32_t b) {
    const PStep& sa = p_.steps[a];
    const PStep& sb = p_.steps[b];
    if (sa.queue == sb.queue) return sa.pos < sb.pos;
    if (dyn_[a].state != kDone) return false;
    for (int k = 0; k < sb.ndeps; ++k)
      if (p_.deps[sb.depBegin + k] == a) return true;
    if (const int32_t* clock = localClock(b))
      if (clock[sa.queue - p_.queueBase[sa.rank]] > sa.pos) return true;
    return searchBack(a, b);
  }

  // The local vector clock of step x: for each queue k of x's rank, 1 + the last position
  // in k that reaches x through queue order and dependencies (0: none). Computed on first
  // use, from its local predecessors' clocks; nullptr when the rank has too many queues
  // or the clocks' memory budget is spent (the caller then searches).
  const int32_t* localClock(int32_t x) {
    const int r = p_.steps[x].rank;
    const int64_t width = p_.queueBase[r + 1] - p_.queueBase[r];
    if (width > kMaxClockWidth) return nullptr;
    if (clockAt_.empty()) clockAt_.assign(p_.steps.size(), -1);
    if (clockAt_[x] >= 0) return &clocks_[clockAt_[x]];
    clockStack_.clear();
    clockStack_.push_back(x);
    while (!clockStack_.empty()) {
      const int32_t y = clockStack_.back();
      const PStep& sy = p_.steps[y];
      const Queue& Q = p_.queues[sy.queue];
      const int32_t pred = sy.pos > 0 ? p_.qSteps[Q.begin + sy.pos - 1] : -1;
      bool ready = true;
      if (pred >= 0 && clockAt_[pred] < 0) {
        clockStack_.push_back(pred);
        ready = false;
      }
      for (int k = 0; k < sy.ndeps; ++k) {
        const int32_t d = p_.deps[sy.depBegin + k];
        if (clockAt_[d] < 0) {
          clockStack_.push_back(d);
          ready = false;
        }
      }
      if (!ready) continue;
      clockStack_.pop_back();
      if (clockAt_[y] >= 0) continue;  // reached twice before it was computed
      if (clocks_.size() + width > kClockBudget) return nullptr;
      const int64_t at = static_cast<int64_t>(clocks_.size());
      clocks_.resize(clocks_.size() + width, 0);
      int32_t* c = &clocks_[at];
      auto merge = [&](int32_t from) {
        const int32_t* f = &clocks_[clockAt_[from]];
        for (int64_t k = 0; k < width; ++k) c[k] = std::max(c[k], f[k]);
      };
      if (pred >= 0) merge(pred);
      for (int k = 0; k < sy.ndeps; ++k) merge(p_.deps[sy.depBegin + k]);
      c[sy.queue - p_.queueBase[r]] = sy.pos + 1;
      clockAt_[y] = at;
    }
    return &clocks_[clockAt_[x]];
  }

  // Whether a reaches b through any chain, messages included: a backward search from b
  // that never goes back past the moment a finished.
  bool searchBack(int32_t a, int32_t b) {
    const PStep& sa = p_.steps[a];
    const uint32_t ta = dyn_[a].doneTime;
    if (visited_.empty()) visited_.assign(p_.steps.size(), 0);
    if (++stamp_ == 0) {
      std::fill(visited_.begin(), visited_.end(), 0);
      stamp_ = 1;
    }
    stack_.clear();
    stack_.push_back(b);
    visited_[b] = stamp_;
    // True when y proves the order; else queues y for a visit if it may lead back to a.
    auto reach = [&](int32_t y) {
      if (y == a) return true;
      if (dyn_[y].doneTime <= ta) return false;  // finished before a did, so not after it
      const PStep& sy = p_.steps[y];
      if (sy.queue == sa.queue && sy.pos > sa.pos) return true;
      if (visited_[y] != stamp_) {
        visited_[y] = stamp_;
        stack_.push_back(y);
      }
      return false;
    };
    while (!stack_.empty()) {
      const int32_t x = stack_.back();
      stack_.pop_back();
      const PStep& sx = p_.steps[x];
      const Queue& Q = p_.queues[sx.queue];
      if (Q.kind == kRecvQ && reach(p_.qSteps[p_.queues[Q.partner].begin + sx.pos])) return true;
      if (sx.pos > 0 && reach(p_.qSteps[Q.begin + sx.pos - 1])) return true;
      for (int k = 0; k < sx.ndeps; ++k)
        if (reach(p_.deps[sx.depBegin + k])) return true;
    }
    return false;
  }

  // ---- Barrier: who has heard from whom ---------------------------------------------

  int32_t newSet() {
    if (!freeSets_.empty()) {
      const int32_t s = freeSets_.back();
      freeSets_.pop_back();
      std::fill_n(&setPool_[static_cast<size_t>(s) * words_], words_, 0);
      return s;
    }
    setPool_.resize(setPool_.size() + words_, 0);
    return static_cast<int32_t>(setPool_.size() / words_ - 1);
  }
  void orInto(int32_t set, int32_t from) {
    uint64_t* d = &setPool_[static_cast<size_t>(set) * words_];
    const uint64_t* s = &setPool_[static_cast<size_t>(stepSet_[from]) * words_];
    for (size_t w = 0; w < words_; ++w) d[w] |= s[w];
  }
  void take(int32_t set, int32_t from) {
    orInto(set, from);
    if (--refs_[from] == 0) {
      freeSets_.push_back(stepSet_[from]);
      stepSet_[from] = -1;
    }
  }

  void mergeHeard(int32_t g) {
    const PStep& s = p_.steps[g];
    const int r = s.rank;
    const int32_t set = newSet();
    setPool_[static_cast<size_t>(set) * words_ + r / 64] |= uint64_t{1} << (r % 64);
    stepSet_[g] = set;
    const Queue& Q = p_.queues[s.queue];
    if (s.pos > 0) take(set, p_.qSteps[Q.begin + s.pos - 1]);
    for (int k = 0; k < s.ndeps; ++k) take(set, p_.deps[s.depBegin + k]);
    if (Q.kind == kRecvQ) take(set, p_.qSteps[p_.queues[Q.partner].begin + s.pos]);
    uint64_t* h = &heard_[static_cast<size_t>(r) * words_];
    const uint64_t* from = &setPool_[static_cast<size_t>(set) * words_];
    for (size_t w = 0; w < words_; ++w) h[w] |= from[w];
    if (refs_[g] == 0) {
      freeSets_.push_back(set);
      stepSet_[g] = -1;
    }
  }

  // The vectors above, as KeptPool keeps them between runs.
  struct Buffers {
    std::vector<Sym> mem, tmp, arena;
    std::vector<Dyn> dyn;
    std::vector<int64_t> payload, clockAt;
    std::vector<QState> qs;
    std::vector<int32_t> work, liveSends, writer, reader, overflow, stack, clocks, clockStack;
    std::vector<int32_t> stepSet, refs, freeSets;
    std::vector<std::pair<int32_t, int32_t>> pool;
    std::vector<uint32_t> visited;
    std::vector<uint64_t> heard, setPool;
  };
  // f(this run's vector, the kept one) for each vector.
  template <class F>
  void forEachBuffer(Buffers& k, F&& f) {
    f(mem_, k.mem), f(tmp_, k.tmp), f(arena_, k.arena), f(dyn_, k.dyn);
    f(payload_, k.payload), f(clockAt_, k.clockAt), f(qs_, k.qs), f(work_, k.work);
    f(liveSends_, k.liveSends), f(writer_, k.writer), f(reader_, k.reader);
    f(overflow_, k.overflow), f(stack_, k.stack), f(clocks_, k.clocks);
    f(clockStack_, k.clockStack), f(stepSet_, k.stepSet), f(refs_, k.refs);
    f(freeSets_, k.freeSets), f(pool_, k.pool), f(visited_, k.visited), f(heard_, k.heard);
    f(setPool_, k.setPool);
  }
  void exchange(Buffers& k) {
    forEachBuffer(k, [](auto& mine, auto& kept) { mine.swap(kept); });
  }
  std::unique_ptr<Buffers> kept_;
};

// A Program's largest vectors (a step and its links per step of every rank), taken from an
// earlier build (KeptPool) and given back emptied, their capacity kept, as Sim does with its own.
class KeptProgramBuffers {
 public:
  explicit KeptProgramBuffers(Program* p) : p_(p), kept_(KeptPool<Buffers>::take()) { exchange(); }
  ~KeptProgramBuffers() {
    p_->steps.clear(), p_->deps.clear(), p_->queues.clear(), p_->qSteps.clear();
    p_->revBegin.clear(), p_->rev.clear();
    exchange();
    KeptPool<Buffers>::give(std::move(kept_));
  }
  KeptProgramBuffers(const KeptProgramBuffers&) = delete;
  KeptProgramBuffers& operator=(const KeptProgramBuffers&) = delete;

 private:
  struct Buffers {
    std::vector<PStep> steps;
    std::vector<int32_t> deps, qSteps, revBegin, rev;
    std::vector<Queue> queues;
  };
  void exchange() {
    Buffers& kept = *kept_;
    p_->steps.swap(kept.steps), p_->deps.swap(kept.deps), p_->queues.swap(kept.queues);
    p_->qSteps.swap(kept.qSteps), p_->revBegin.swap(kept.revBegin), p_->rev.swap(kept.rev);
  }
  Program* p_;
  std::unique_ptr<Buffers> kept_;
};

std::string describeCall(const AlgorithmInfo& algo, int n, const CollArgs& a, bool inPlace) {
  std::string s = format("%s %s nranks %d", algo.name, collectiveName(algo.coll), n);
  if (algo.coll != Collective::kBarrier && algo.coll != Collective::kAllToAllv)
    s += format(" count %zu", a.count);
  if (isReducing(algo.coll)) s += format(" op %s", opName(a.op));
  if (isRooted(algo.coll)) s += format(" root %d", a.root);
  s += format(" pieceElems %zu", a.pieceElems);
  if (inPlace && hasInPlace(algo.coll)) s += " in place";
  return s;
}

}  // namespace
}  // namespace verify

VerifyResult verifySchedules(const AlgorithmInfo& algo, int nranks,
                             const std::function<CollArgs(int rank)>& argsForRank, bool inPlace,
                             const VerifyOptions& options) {
  if (nranks < 1) return {false, verify::format("nranks %d: need at least one rank", nranks)};
  std::vector<CollArgs> args(nranks);
  for (int r = 0; r < nranks; ++r) {
    args[r] = argsForRank(r);
    args[r].rank = r;
    args[r].nranks = nranks;
  }
  const std::string call = verify::describeCall(algo, nranks, args[0], inPlace);
  for (int r = 0; r < nranks; ++r)
    if (const char* why = unsupportedReason(algo, args[r]))
      return {false, call + ": the algorithm does not support this call on rank " +
                         std::to_string(r) + ": " + why};

  verify::Program program;
  const verify::KeptProgramBuffers kept(&program);
  std::string error;
  if (!program.build(algo, nranks, std::move(args), inPlace, &error))
    return {false, call + ": " + error};
  verify::RunResult res = verify::Sim(program, options.connectionSlots).run();
  if (res.outcome == verify::Outcome::kDeadlock && options.connectionSlots > 0) {
    const verify::RunResult unbounded = verify::Sim(program, 0).run();
    if (unbounded.outcome == verify::Outcome::kDeadlock)
      res.message += " (it deadlocks with unbounded connection buffers too)";
    else
      res.message =
          verify::format(
              "deadlock when each connection buffers %zu pieces of %zu elements "
              "(BRAID_BUFFSIZE = %zu x BRAID_CHUNKSIZE); with unbounded buffers it "
              "%s. ",
              options.connectionSlots, program.pieceElems, options.connectionSlots,
              unbounded.outcome == verify::Outcome::kOk ? "completes" : "fails otherwise") +
          res.message;
  }
  if (res.outcome == verify::Outcome::kOk) return {};
  return {false, call + ": " + res.message};
}

}  // namespace braid
