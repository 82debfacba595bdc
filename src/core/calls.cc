// Running the calls that the entry points (collectives.cc, groups.cc) have checked, on a
// communicator that commInit made (comm.cc): the algorithm each call gets (braidCommSetAlgorithm,
// BRAID_ALGO / NCCL_ALGO, BRAID_TUNE_TABLE, the cost model), the plans cached per call shape, the
// choices that depend on whether a call outgrows the cache, BRAID_CHECK's comparison of the
// ranks' calls, work queued on streams, and sends and receives as one fused schedule (runP2P).
// The executor (executor.cc) runs the plans.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/call_check.h"
#include "core/comm.h"
#include "core/stream.h"
#include "device/device.h"
#include "tuning/cost_model.h"

namespace braid {

namespace {

// NCCL_ALGO (read when BRAID_ALGO is unset) in NCCL's spelling: "Ring", "Tree,Ring",
// "allreduce:tree;broadcast:ring" (2.24's per-collective form) or "^NVLS" (an exclusion).
// Names Braid has are kept, lower-cased; the others, and exclusions, are dropped with one
// warning, leaving those calls to the selector, as NCCL does with an algorithm it cannot use.
// A name that is neither Braid's nor NCCL's (a misspelling) goes to *unknown instead: NCCL
// refuses it, and so does init (checkSettings).
std::string fromNcclAlgo(const std::string& text, std::string* unknown) {
  // NCCL's algorithm names (2.2x's ncclAlgoStr), lower-cased.
  static const char* const kNcclAlgos[] = {
      "tree", "ring", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"};
  std::string lower = text, kept, dropped;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (!lower.empty() && lower[0] == '^') {
    BRAID_WARN("INIT", "NCCL_ALGO=\"%s\": exclusions are not supported; the selector decides",
               text.c_str());
    return "";
  }
  std::stringstream sections(lower);
  std::string section;
  while (std::getline(sections, section, ';')) {
    const size_t colon = section.find(':');
    const std::string prefix = colon == std::string::npos ? "" : section.substr(0, colon + 1);
    // A collective Braid does not have (sendrecv, or a misspelling) is dropped whole.
    if (!prefix.empty()) {
      bool known = false;
      for (int c = 0; c < kNumCollectives; ++c)
        known = known || prefix == std::string(collectiveName(static_cast<Collective>(c))) + ":";
      if (!known) {
        dropped += " " + section;
        continue;
      }
    }
    std::stringstream names(colon == std::string::npos ? section : section.substr(colon + 1));
    std::string name, list;
    while (std::getline(names, name, ',')) {
      name.erase(0, name.find_first_not_of(" \t"));  // "Ring, Tree": names without spaces
      name.erase(name.find_last_not_of(" \t") + 1);
      if (name.empty()) continue;
      const bool known = std::any_of(algorithms().begin(), algorithms().end(),
                                     [&](const AlgorithmInfo& a) { return name == a.name; });
      const bool nccls = std::any_of(std::begin(kNcclAlgos), std::end(kNcclAlgos),
                                     [&](const char* a) { return name == a; });
      if (!known && !nccls)
        *unknown += (unknown->empty() ? "" : ", ") + name;
      else
        (known ? list : dropped) += (known ? (list.empty() ? "" : ",") : " ") + name;
    }
    if (!list.empty())
      kept += (kept.empty() ? "" : ";") + prefix + list;
    else if (section.find_first_not_of(" \t,") != std::string::npos && !prefix.empty() &&
             section.size() == prefix.size())
      dropped += " " + section;  // "allreduce:" names no algorithm
  }
  if (!dropped.empty())
    BRAID_WARN("INIT", "NCCL_ALGO=\"%s\": Braid has no%s; %s", text.c_str(), dropped.c_str(),
               kept.empty() ? "the selector decides" : ("using \"" + kept + "\"").c_str());
  return kept;
}

std::string namesFor(Collective coll) {
  std::string names;
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == coll) names += std::string(names.empty() ? "" : ", ") + a.name;
  return names.empty() ? "none" : names;
}

}  // namespace

namespace {
struct EnvAlgo {
  std::string text, unknown;
};
const EnvAlgo& envAlgo() {
  static EnvAlgo algo;
  static std::once_flag once;
  std::call_once(once, [] {
    const bool ncclName = !std::getenv("BRAID_ALGO") && std::getenv("NCCL_ALGO");
    algo.text = ncclName ? fromNcclAlgo(config().algo, &algo.unknown) : config().algo;
  });
  return algo;
}
}  // namespace

const std::string& envAlgoText() { return envAlgo().text; }
const std::string& envAlgoUnknown() { return envAlgo().unknown; }

namespace {

// What every rank must agree on for one call (alltoallv's counts differ per rank by design),
// with the step each rank picked (choosePieceBytes, alike on every rank by construction: a
// disagreement is then a mismatched call, not a hang).
uint32_t callTag(const CollArgs& a) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t v : {static_cast<uint64_t>(a.coll) + 1,
                     a.coll == Collective::kAllToAllv ? 0 : static_cast<uint64_t>(a.count),
                     static_cast<uint64_t>(a.dtype), static_cast<uint64_t>(a.op),
                     static_cast<uint64_t>(a.root), static_cast<uint64_t>(a.pieceElems)})
    h = (h ^ v) * 1099511628211ull;
  uint32_t tag = static_cast<uint32_t>(h ^ (h >> 32));
  return tag == 0 ? 1 : tag;
}

// a's index in algorithms(), -1 for an algorithm not listed there.
int algorithmIndex(const AlgorithmInfo* a) {
  const auto& all = algorithms();
  return a >= all.data() && a < all.data() + all.size() ? static_cast<int>(a - all.data()) : -1;
}

// tag mixed with n (never 0).
uint32_t numberedTag(uint32_t tag, uint64_t n) {
  const uint64_t h = (static_cast<uint64_t>(tag) ^ (n * 0x9e3779b97f4a7c15ull)) * 1099511628211ull;
  const auto t = static_cast<uint32_t>(h ^ (h >> 32));
  return t == 0 ? 1 : t;
}

}  // namespace

// After a failed exchange the connections hold partial messages: refuse later calls.
braidResult_t markBroken(braidComm* comm, braidResult_t res) {
  res = shareCause(comm, res);
  if (res != braidSuccess && comm->broken.empty()) {
    comm->broken = lastError();
    comm->brokenCode = res;
    // Pieces this rank published in place point into buffers its caller may now free or
    // reuse: its peers must not read them (nor wait for this rank any longer).
    // For network peers on this machine, which see only this rank's connections close.
    if (comm->segment)
      callPosition(*comm->segment)
          ->gaveUp.store(2 + std::max(comm->blamed, -1), std::memory_order_release);
    for (Connection* c : comm->connPtrs)
      if (c) c->abandon(comm->blamed);
  }
  return res;
}

namespace {

// Publishes the call this rank is in, and then the last it finished, in its segment's
// CallPosition, where rank 0's stall summary reads it (two relaxed stores per call).
class CallScope {
 public:
  // finishes false: the scope only starts the call (BRAID_CHECK's exchange before it).
  CallScope(braidComm* comm, uint32_t kind, bool finishes = true)
      : pos_(comm->segment ? callPosition(*comm->segment) : nullptr),
        seq_(comm->opCount),
        finishes_(finishes) {
    if (!pos_) return;
    pos_->what.store(kind, std::memory_order_relaxed);
    pos_->started.store(seq_, std::memory_order_relaxed);
  }
  ~CallScope() {
    if (pos_ && finishes_) pos_->done.store(seq_, std::memory_order_relaxed);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  CallPosition* pos_;
  uint64_t seq_;
  bool finishes_;
};

// What every call on comm runs with: its connections, sequence numbers, peers, waiting
// limits and failure reporting; the caller adds what depends on the call (count, cache
// choices, stall kind). callTag 0 for send/receive groups.
ExecContext commContext(braidComm* comm, const char* what, braidDataType_t dtype, braidRedOp_t op,
                        uint32_t tag) {
  ExecContext ctx{comm->rank,
                  comm->nranks,
                  dtype,
                  op,
                  braidTypeSize(dtype),
                  what,
                  comm->opCount,
                  comm->bases.data(),
                  comm->bases.size(),
                  comm->connPtrs.data(),
                  comm->sendSeq.data(),
                  comm->recvSeq.data(),
                  comm->peerPids.data(),
                  comm->segment ? comm->segment->doorbell() : nullptr,
                  comm->oversubscribed,
                  tag};
  if (comm->deviceDirect) {
    ctx.cudaDevice = comm->cudaDevice;
    ctx.deviceScratch = &comm->deviceScratch;
    ctx.deviceBlock = &comm->deviceBlock;
  }
  ctx.aborted = &comm->aborted;
  ctx.revokedBy = &comm->revokedBy;
  ctx.timeoutSec = comm->timeoutSec;
  ctx.stallWarnSec = comm->stallWarnSec;
  ctx.blamed = &comm->blamed;
  ctx.stall = comm->stallBoard.get();
  ctx.peerCheck = comm->fingerprints ? comm->peerCallCheck.get() : nullptr;
  ctx.peerPositions = comm->peerPositions.empty() ? nullptr : comm->peerPositions.data();
  return ctx;
}

braidResult_t checkUsable(const braidComm* comm) {
  // Revoked for misuse a rank found (shareCause): named below with its reason.
  const int by = comm->revokedBy.load(std::memory_order_acquire);
  const std::string reason = by >= 0 ? revokeReasonOf(comm) : std::string();
  if (by >= 0 && reason.empty())
    return fail(braidInvalidUsage,
                "this communicator was revoked (braidCommRevoke on rank %d): only "
                "braidCommShrink, braidCommDestroy and braidCommAbort may follow",
                by);
  if (comm->aborted.load(std::memory_order_relaxed))
    return fail(braidInvalidUsage, "this communicator was aborted (braidCommAbort)");
  if (comm->suspended)
    return fail(braidInvalidUsage,
                "this communicator is suspended (braidCommSuspend): braidCommResume it first");
  if (comm->finalized)
    return fail(braidInvalidUsage,
                "this communicator was finalized (braidCommFinalize): only braidCommDestroy "
                "and braidCommGetAsyncError may follow");
  if (comm->broken.empty() && !reason.empty())
    return fail(braidInvalidUsage,
                "this communicator was revoked by rank %d and cannot be used again (destroy it): "
                "%s",
                by, reason.c_str());
  if (comm->broken.empty()) return braidSuccess;
  return fail(braidInvalidUsage,
              "this communicator failed earlier and cannot be used again (destroy it): %s",
              comm->broken.c_str());
}

}  // namespace

namespace {
// publishRefusal with comm->mu held: opCount is this rank's last call.
void publishRefusalLocked(braidComm* comm, uint32_t kind) {
  if (!comm->segment) return;
  // The message without its "rank N: " prefix: the peer's line names the rank already.
  callPosition(*comm->segment)
      ->publishRefusal(comm->opCount + 1, kind, withoutRankPrefix(lastError(), comm->rank));
}
}  // namespace

void publishRefusal(braidComm* comm, uint32_t kind, braidStream_t stream) {
  if (!comm->segment || stream || insideGroup()) return;
  {
    std::lock_guard<std::mutex> lock(comm->queuedWork->mu);
    if (comm->queuedWork->pending > 0) return;
  }
  std::lock_guard<std::mutex> lock(comm->mu);
  publishRefusalLocked(comm, kind);
}

braidResult_t chooseAlgorithm(const braidComm* comm, const CollArgs& args,
                              const AlgorithmInfo** out) {
  const size_t elemSize = braidTypeSize(args.dtype);
  const size_t bytes = tuning::callBytes(args.coll, args.count, elemSize, args.nranks);
  std::string forced = comm->forcedAlgo[static_cast<int>(args.coll)];
  const char* source = "braidCommSetAlgorithm";
  if (forced.empty()) {
    forced = comm->algoSpec.forced(args.coll, bytes);
    source = "BRAID_ALGO";
  }
  if (!forced.empty()) {
    const AlgorithmInfo* a = findAlgorithm(args.coll, forced);
    if (!a)
      return fail(braidInvalidArgument, "%s=%s: no %s algorithm of that name (known: %s)", source,
                  forced.c_str(), collectiveName(args.coll), namesFor(args.coll).c_str());
    if (const char* why = unsupportedReason(*a, args))
      return fail(braidInvalidUsage, "%s=%s cannot run this %s: %s", source, forced.c_str(),
                  collectiveLabel(args.coll), why);
    *out = a;
    if (comm->rank == 0)
      BRAID_INFO("TUNING", "%s %zu B: %s (forced by %s)", collectiveName(args.coll), bytes, a->name,
                 source);
    return braidSuccess;
  }
  // braid-tune's measurement for the nearest size, where it has one the call can run.
  if (const tuning::MeasuredEntry* e = comm->measured.lookup(args.coll, bytes)) {
    const AlgorithmInfo* a = findAlgorithm(args.coll, e->best);
    if (a && !unsupportedReason(*a, args)) {
      *out = a;
      if (comm->rank == 0)
        BRAID_INFO("TUNING", "%s %zu B: %s (measured fastest at %zu B, BRAID_TUNE_TABLE)",
                   collectiveName(args.coll), bytes, a->name, e->bytes);
      return braidSuccess;
    }
  }
  // The cost model's least predicted time; the fixed rule only if it knows no candidate.
  // Every rank must choose alike, and each rank calls in place or not on its own (as with
  // NCCL), so the choice is made for the out-of-place form whatever this rank's: the forms'
  // schedules exchange the same messages.
  CollArgs outOfPlace = args;
  outOfPlace.inPlace = false;
  int best = -1;
  const std::vector<tuning::Candidate> cands =
      tuning::rankCandidates(outOfPlace, elemSize, comm->fabric, &best);
  *out = best >= 0 ? cands[best].algo : defaultAlgorithm(args, elemSize);
  if (!*out)
    return fail(braidInternalError, "no algorithm implements %s for this call",
                collectiveLabel(args.coll));
  if (comm->rank == 0 && logEnabled(LogLevel::kInfo) && config().subsysEnabled("TUNING")) {
    std::string all;
    for (const tuning::Candidate& c : cands) {
      char item[160];
      if (c.unsupported)
        std::snprintf(item, sizeof(item), "%s n/a", c.algo->name);
      else
        std::snprintf(item, sizeof(item), "%s %.1f us", c.algo->name, c.predicted_us);
      all += (all.empty() ? "" : ", ") + std::string(item);
    }
    BRAID_INFO("TUNING", "%s %zu B on %d ranks, %d host(s): %s (predicted: %s)",
               collectiveName(args.coll), bytes, args.nranks, comm->nhosts, (*out)->name,
               all.c_str());
  }
  return braidSuccess;
}

namespace {

// The last-level cache of cpu 0 (what one core shares), in bytes (assumedCacheBytes): the
// largest level sysfs lists for cpu 0, else glibc's sysconf figure, bounded.
size_t lastLevelCacheBytes() {
  static const size_t bytes = [] {
    size_t best = 0;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
      FILE* f = std::fopen((dir + "/size").c_str(), "r");
      if (!f) continue;
      unsigned long v = 0;
      char unit = 0;
      if (std::fscanf(f, "%lu%c", &v, &unit) >= 1)
        best = std::max<size_t>(best, v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0));
      std::fclose(f);
    }
    return assumedCacheBytes(best, sysconf(_SC_LEVEL3_CACHE_SIZE));
  }();
  return bytes;
}

// Whether the buffers a call touches on every rank of this machine together outgrow the
// last-level cache (per placement of the plan's call): its data then streams from and to
// memory, and two choices change.
// Receives write with streaming stores, which spare the read of each line they overwrite
// (2 ranks, all-reduce of 64-256 MiB out of place: 5-8% more busbw; at 16 MiB in place,
// where the buffers fit, they cost 25%). Sends from braidMemAllocHost buffers go single copy
// (2 ranks, 32-256 MiB: 11-15 GB/s against the FIFO's 8-9); on calls that fit in cache the
// FIFO's two copies win, the sender running ahead (128 KiB-4 MiB: 17 GB/s against 10-12 on
// this VM; perf/compare_peers.sh runs both kinds of buffer).
void setCacheChoices(const braidComm* comm, size_t elemSize, Plan* plan) {
  const size_t cache = config().cacheBytes ? config().cacheBytes : lastLevelCacheBytes();
  const size_t ranks = static_cast<size_t>(comm->localRanks);
  // In place the send and receive buffers overlap: the larger one is the footprint.
  const size_t elems = plan->inPlace ? std::max(plan->sendExtent, plan->recvExtent)
                                     : plan->sendExtent + plan->recvExtent;
  plan->outgrowsCache = elems * elemSize * ranks > cache;
  plan->streamStores = config().streamStores == Config::StreamStores::kAuto
                           ? plan->outgrowsCache
                           : config().streamStores == Config::StreamStores::kOn;
}

// What messages call BRAID_CHECK's exchange before a call of c: "BRAID_CHECK's exchange
// before all-reduce" (its stall line and timeout name the user's call, not an all-gather).
const char* checkExchangeLabel(Collective c) {
  static const std::vector<std::string> labels = [] {
    std::vector<std::string> l;
    for (int k = 0; k < kNumCollectives; ++k)
      l.push_back(std::string("BRAID_CHECK's exchange before ") +
                  collectiveLabel(static_cast<Collective>(k)));
    return l;
  }();
  const auto k = static_cast<size_t>(c);
  return k < labels.size() ? labels[k].c_str() : "BRAID_CHECK's exchange";
}

}  // namespace

braidResult_t runCollective(braidComm* comm, const CollArgs& in, const void* sendbuff,
                            void* recvbuff, const CollArgs* userCall, bool device,
                            uint32_t fingerprint) {
  std::lock_guard<std::mutex> lock(comm->mu);
  LogRankScope rankScope(comm->rank);
  BRAID_TRY(checkUsable(comm));
  CollArgs args = in;
  args.rank = comm->rank;
  args.nranks = comm->nranks;
  const size_t elemSize = braidTypeSize(args.dtype);
  args.pieceElems = std::max<size_t>(1, comm->chunkSize / elemSize);
  args.hostOf = comm->nhosts > 1 ? comm->hostOf.data() : nullptr;
  args.ring = comm->ring.empty() ? nullptr : comm->ring.data();
  args.inPlace = isInPlaceForm(args.coll, args.rank, args.count, elemSize, sendbuff, recvbuff);
  // The algorithm is chosen once per plan: a cached call goes straight to its steps.
  Plan* plan = nullptr;
  std::unique_ptr<Plan> uncached;
  auto compile = [&](Plan* p) -> braidResult_t {
    if (const braidResult_t res = chooseAlgorithm(comm, args, &p->algo); res != braidSuccess) {
      // This rank's braidCommSetAlgorithm names none that can run it: refused here alone.
      publishRefusalLocked(comm, static_cast<uint32_t>((userCall ? *userCall : args).coll) + 1);
      return res;
    }
    // The grain: BRAID_CHUNKSIZE's when rank 0 set it, else the cost model's for this call
    // (choosePieceBytes: chunkSize or a smaller one). Every rank chooses alike: for the
    // out-of-place form, on rank 0's figures.
    if (!comm->chunkFixed) {
      CollArgs outOfPlace = args;
      outOfPlace.inPlace = false;
      const size_t piece = tuning::choosePieceBytes(*p->algo, outOfPlace, elemSize, comm->fabric);
      args.pieceElems = std::max<size_t>(1, piece / elemSize);
      if (piece != comm->chunkSize && comm->rank == 0)
        BRAID_INFO("TUNING", "%s of %zu elements: %s in pieces of %zu bytes (chunk %zu)",
                   collectiveName(args.coll), args.count, p->algo->name, piece, comm->chunkSize);
    }
    p->algo->build(args, &p->schedule);
    p->inPlace = args.inPlace;
    compilePlan(p, elemSize);
    setCacheChoices(comm, elemSize, p);
    // Ranks whose algorithms differ (braidCommSetAlgorithm on one rank) meet as different calls.
    p->callTag = numberedTag(callTag(args), static_cast<uint64_t>(2 + algorithmIndex(p->algo)));
    return braidSuccess;
  };
  if (args.coll == Collective::kAllToAllv) {
    uncached = std::make_unique<Plan>();  // counts vary per call: not cached
    BRAID_TRY(compile(uncached.get()));
    plan = uncached.get();
  } else {
    const braidComm::PlanKey key{
        static_cast<int>(args.coll), args.count, static_cast<int>(args.dtype),
        static_cast<int>(args.op),   args.root,  args.inPlace};
    if (comm->lastPlan && comm->lastKey == key) {
      plan = comm->lastPlan;
    } else {
      auto it = comm->plans.find(key);
      if (it == comm->plans.end()) {
        if (comm->plans.size() >= 256) comm->clearPlans();
        auto p = std::make_unique<Plan>();
        BRAID_TRY(compile(p.get()));
        it = comm->plans.emplace(key, std::move(p)).first;
      }
      plan = it->second.get();
      // BRAID_CHECK's exchange before each user call has a plan of its own: remembering it
      // would alternate the two, and the user's call would never find its plan here.
      if (!userCall) {
        comm->lastKey = key;
        comm->lastPlan = plan;
      }
    }
  }
  ++comm->opCount;
  const AlgorithmInfo* algo = plan->algo;
  comm->bases.resize(3);  // kSend, kRecv, kScratch; runP2P adds its buffers after them
  comm->bases[0] = static_cast<char*>(const_cast<void*>(sendbuff));
  comm->bases[1] = static_cast<char*>(recvbuff);
  comm->bases[2] = nullptr;
  BRAID_INFO("COLL", "%s #%llu count %zu %s %s root %d: algorithm %s", collectiveLabel(args.coll),
             static_cast<unsigned long long>(comm->opCount), args.count, braidTypeName(args.dtype),
             braidOpName(args.op), args.root, algo->name);
  const char* what = !userCall     ? collectiveLabel(args.coll)
                     : fingerprint ? fingerprintExchangeLabel(userCall->coll)
                                   : checkExchangeLabel(userCall->coll);
  // The user's collectives, count-0 ones' fingerprint exchanges included, are numbered alike
  // on every rank; BRAID_CHECK's exchange is known by the number of the call it precedes. A
  // call refused before it started takes no number (as in NCCL, it did not happen: the rank
  // may make it again, fixed).
  const bool counted = !userCall || fingerprint != 0;
  const uint64_t number = counted ? ++comm->collCount : comm->collCount + 1;
  // The number goes into the messages' tag: a rank a call ahead of its peers meets theirs as
  // another call even where the two calls have the same shape.
  ExecContext ctx = commContext(comm, what, args.dtype, args.op,
                                fingerprint ? fingerprint : numberedTag(plan->callTag, number));
  if (comm->fingerprints)  // BRAID_CALL_CHECK=0: none kept (misuse is named as found)
    comm->callRecord.set(number, userCall ? *userCall : args, userCall ? -1 : algorithmIndex(algo));
  ctx.checkExchange = userCall != nullptr;
  ctx.count = args.count;
  ctx.outgrowsCache = plan->outgrowsCache;
  ctx.streamStores = plan->streamStores;
  ctx.device = device;
  // BRAID_CHECK's exchange reports (and publishes) the user's call it precedes, whose number
  // it has: a rank stuck in it is at that call, not past it.
  ctx.kind = static_cast<uint32_t>(userCall ? userCall->coll : args.coll) + 1;
  CallScope position(comm, ctx.kind, userCall == nullptr);
  if (userCall) return markBroken(comm, execute(plan, ctx));  // not one of the user's calls
  trace::CallInfo call{comm->commHash, comm->opCount, static_cast<uint32_t>(args.coll)};
  call.dtype = args.dtype;
  call.op = isReducing(args.coll) ? static_cast<int>(args.op) : -1;
  call.root = isRooted(args.coll) ? args.root : -1;
  call.count = args.count;
  call.bytes = args.count * elemSize;
  call.algo = algo->name;
  traceCallBegin(comm, call, static_cast<uint32_t>(plan->schedule.steps.size()), &ctx);
  return traceCallEnd(comm, ctx, markBroken(comm, execute(plan, ctx)));
}

braidResult_t checkCallsMatch(braidComm* comm, const CollArgs& a) {
  LogRankScope rankScope(comm->rank);
  constexpr int kFields = 5;
  const uint64_t mine[kFields] = {
      static_cast<uint64_t>(a.coll),
      // All-to-all-v's count is a per-rank maximum that may differ (as in callTag).
      a.coll == Collective::kAllToAllv ? 0 : static_cast<uint64_t>(a.count),
      static_cast<uint64_t>(a.dtype),
      isReducing(a.coll) ? static_cast<uint64_t>(a.op) : 0,
      isRooted(a.coll) ? static_cast<uint64_t>(static_cast<uint32_t>(a.root)) : 0,
  };
  const size_t n = static_cast<size_t>(comm->nranks);
  std::vector<uint64_t> all(kFields * n);
  CollArgs g;
  g.coll = Collective::kAllGather;
  g.count = kFields;
  g.dtype = braidUint64;
  g.op = braidSum;
  // The exchange is not one of the user's calls: it keeps their numbering.
  const uint64_t userCalls = comm->opCount;
  const braidResult_t res = runCollective(comm, g, mine, all.data(), &a);
  comm->opCount = userCalls;
  // The user's call never starts when the exchange fails or finds a mismatch: its record (with
  // the number it would have had) says why, and writes the dump as a failed call would.
  auto refused = [&](braidResult_t r) {
    trace::CallInfo call{comm->commHash, userCalls + 1, static_cast<uint32_t>(a.coll)};
    call.dtype = a.dtype;
    call.op = isReducing(a.coll) ? static_cast<int>(a.op) : -1;
    call.root = isRooted(a.coll) ? a.root : -1;
    call.count = a.count;
    call.bytes = a.count * braidTypeSize(a.dtype);
    call.algo = "";
    ExecContext ctx{};
    traceCallBegin(comm, call, 0, &ctx);
    return traceCallEnd(comm, ctx, r);
  };
  // The executor's errors name the exchange ("BRAID_CHECK's exchange before all-reduce #2 timed
  // out ..."); the others (an algorithm BRAID_ALGO forces that cannot run it) are named here.
  if (res != braidSuccess) {
    const std::string why = lastError();
    if (why.find(checkExchangeLabel(a.coll)) != std::string::npos) return refused(res);
    return refused(fail(res, "BRAID_CHECK's exchange before call #%llu (%s) failed: %s",
                        static_cast<unsigned long long>(userCalls + 1), collectiveLabel(a.coll),
                        withoutRankPrefix(why.c_str(), comm->rank)));
  }
  bool same = true;
  for (size_t r = 1; r < n && same; ++r)
    same = std::equal(all.begin(), all.begin() + kFields, all.begin() + r * kFields);
  if (same) return braidSuccess;
  // Every rank gathered the same table, so every rank fails alike, with the same list.
  std::string calls;
  constexpr size_t kListed = 16;
  for (size_t r = 0; r < n && r < kListed; ++r) {
    const uint64_t* f = &all[r * kFields];
    const bool known = f[0] < static_cast<uint64_t>(kNumCollectives);
    const auto coll = static_cast<Collective>(f[0]);
    char line[200];
    std::snprintf(line, sizeof(line), "%srank %zu: %s count %llu %s", r ? "; " : "", r,
                  known ? collectiveLabel(coll) : "?", static_cast<unsigned long long>(f[1]),
                  braidTypeName(static_cast<braidDataType_t>(f[2])));
    calls += line;
    if (known && isReducing(coll))
      calls += std::string(" op ") + braidOpName(static_cast<braidRedOp_t>(f[3]));
    if (known && isRooted(coll)) calls += " root " + std::to_string(f[4]);
  }
  if (n > kListed) calls += "; and " + std::to_string(n - kListed) + " more";
  return refused(fail(braidInvalidUsage,
                      "BRAID_CHECK: the ranks made different calls at call #%llu (every rank "
                      "must make the same collective calls in the same order): %s",
                      static_cast<unsigned long long>(userCalls + 1), calls.c_str()));
}

braidResult_t runP2P(braidComm* comm, const std::vector<P2POp>& ops, bool device) {
  std::lock_guard<std::mutex> lock(comm->mu);
  LogRankScope rankScope(comm->rank);
  BRAID_TRY(checkUsable(comm));
  Plan plan;
  comm->bases.assign(3 + ops.size(), nullptr);
  std::vector<int> selfSends, selfRecvs;
  for (size_t k = 0; k < ops.size(); ++k) {
    const P2POp& op = ops[k];
    comm->bases[3 + k] = static_cast<char*>(op.buff);
    if (op.bytes == 0) continue;  // both sides skip empty messages
    if (op.peer == comm->rank) {
      (op.isSend ? selfSends : selfRecvs).push_back(static_cast<int>(k));
      continue;
    }
    Step s;
    s.kind = op.isSend ? StepKind::kSend : StepKind::kRecv;
    s.peer = op.peer;
    s.src = {userBuffer(static_cast<int>(k)), 0};
    s.dst = {userBuffer(static_cast<int>(k)), 0};
    s.count = op.bytes;
    plan.schedule.add(s);
  }
  // Refused before it starts (its number not taken), as a collective's bad arguments are.
  auto refuse = [&](braidResult_t res) {
    publishRefusalLocked(comm, 0);
    return res;
  };
  if (selfSends.size() != selfRecvs.size())
    return refuse(fail(braidInvalidUsage,
                       "group: %zu sends to self but %zu receives from self; each send to self "
                       "needs a matching receive in the same group",
                       selfSends.size(), selfRecvs.size()));
  for (size_t i = 0; i < selfSends.size(); ++i) {
    const P2POp& snd = ops[selfSends[i]];
    const P2POp& rcv = ops[selfRecvs[i]];
    if (snd.bytes != rcv.bytes)
      return refuse(fail(braidInvalidUsage,
                         "group: send to self of %zu bytes meets a receive of %zu bytes", snd.bytes,
                         rcv.bytes));
    Step s;
    s.kind = StepKind::kCopy;
    s.src = {userBuffer(selfSends[i]), 0};
    s.dst = {userBuffer(selfRecvs[i]), 0};
    s.count = snd.bytes;
    plan.schedule.add(s);
  }
  ++comm->opCount;
  compilePlan(&plan, 1);
  ExecContext ctx = commContext(comm, "send/recv group", braidUint8, braidSum, 0);
  ctx.device = device;
  CallScope position(comm, 0);
  trace::CallInfo call{comm->commHash, comm->opCount, trace::kSendRecv, braidUint8};
  for (const P2POp& op : ops) call.count += op.bytes;
  call.bytes = call.count;
  if (ops.size() == 1) {
    call.kind = ops[0].isSend ? trace::kSend : trace::kRecv;
    call.peer = ops[0].peer;
  }
  traceCallBegin(comm, call, static_cast<uint32_t>(plan.schedule.steps.size()), &ctx);
  return traceCallEnd(comm, ctx, markBroken(comm, execute(&plan, ctx)));
}

}  // namespace braid
