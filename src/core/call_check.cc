// Count-0 calls that meet their peers (BRAID_CALL_CHECK) and the words of mismatch messages.
// NCCL returns from a count-0 call at once; when one rank's count is 0 and its peers' is not,
// the peers' call pairs with that rank's next one and can return a plausible wrong value. Here
// the count-0 call exchanges its fingerprint instead: its messages carry a call tag that no
// real call has, so the executor's tag check (frame()) refuses the pairing on both sides.
#include "core/call_check.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/socket.h"

namespace braid {

uint32_t fingerprintTag(const CollArgs& a, uint64_t callNumber) {
  // FNV-1a as callTag, salted so that no field list of a real call hashes alike by design.
  uint64_t h = 1469598103934665603ull ^ 0x43414c4c30ull;  // "CALL0"
  for (uint64_t v :
       {static_cast<uint64_t>(a.coll) + 1, static_cast<uint64_t>(a.count),
        static_cast<uint64_t>(a.dtype), isReducing(a.coll) ? static_cast<uint64_t>(a.op) : 0,
        isRooted(a.coll) ? static_cast<uint64_t>(static_cast<uint32_t>(a.root)) : 0, callNumber})
    h = (h ^ v) * 1099511628211ull;
  const uint32_t tag = static_cast<uint32_t>(h ^ (h >> 32));
  return tag == 0 ? 2 : tag;
}

const char* fingerprintExchangeLabel(Collective c) {
  static const std::vector<std::string> labels = [] {
    std::vector<std::string> l;
    for (int k = 0; k < kNumCollectives; ++k)
      l.push_back(std::string("the fingerprint exchange of a count-0 ") +
                  collectiveLabel(static_cast<Collective>(k)));
    return l;
  }();
  const auto k = static_cast<size_t>(c);
  return k < labels.size() ? labels[k].c_str() : "the fingerprint exchange of a count-0 call";
}

std::string rankLabel(const braidComm* comm, int r) {
  std::string s = "rank " + std::to_string(r);
  if (r < 0 || r >= comm->nranks) return s;
  const auto k = static_cast<size_t>(r);
  std::string beside;
  if (k < comm->worldRanks.size() && comm->worldRanks[k] >= 0 &&
      (comm->parentHash != 0 || comm->worldRanks[k] != r))
    beside = "world rank " + std::to_string(comm->worldRanks[k]);
  if (k < comm->peers.size() && !comm->peers[k].hostId.empty())  // "name/boot id": the name
    beside += (beside.empty() ? "host " : ", host ") +
              comm->peers[k].hostId.substr(0, comm->peers[k].hostId.find('/'));
  return beside.empty() ? s : s + " (" + beside + ")";
}

std::string commLabel(const braidComm* comm) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "communicator %016" PRIx64, comm->commHash);
  std::string s = buf;
  if (comm->parentHash != 0) {
    std::snprintf(buf, sizeof buf, " (split from %016" PRIx64 ": colour %d)", comm->parentHash,
                  comm->splitColor);
    s += buf;
  }
  return s;
}

std::string callLabel(Collective coll, size_t count, braidDataType_t dtype, braidRedOp_t op,
                      int root) {
  std::string s = std::string(collectiveLabel(coll)) + " count " + std::to_string(count) + " " +
                  braidTypeName(dtype);
  if (isReducing(coll)) s += std::string(" op ") + braidOpName(op);
  if (isRooted(coll)) s += " root " + std::to_string(root);
  return s;
}

void CallRecord::set(uint64_t n, const CollArgs& a, int algo) {
  Slot& slot = slots[n & 1];
  // All-to-all-v's count is a per-rank maximum that may differ (as in callTag).
  const uint64_t count = a.coll == Collective::kAllToAllv ? 0 : a.count;
  const uint64_t op = isReducing(a.coll) ? static_cast<uint64_t>(a.op) & 0xffff : 0;
  const uint64_t shape = static_cast<uint64_t>(a.coll) |
                         static_cast<uint64_t>(a.dtype & 0xff) << 8 | op << 16 |
                         (static_cast<uint64_t>(algo + 1) & 0xffff) << 32;
  const int32_t root = isRooted(a.coll) ? a.root : 0;
  // A loop of one call shape (the common case) changes only the number: one store, and a
  // reader that sees the new number with the slot's other fields sees the same call.
  if (slot.count.load(std::memory_order_relaxed) == count &&
      slot.shape.load(std::memory_order_relaxed) == shape &&
      slot.root.load(std::memory_order_relaxed) == root) {
    slot.number.store(n, std::memory_order_release);
    return;
  }
  const uint64_t v = version.load(std::memory_order_relaxed);
  version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  slot.number.store(n, std::memory_order_relaxed);
  slot.count.store(count, std::memory_order_relaxed);
  slot.shape.store(shape, std::memory_order_relaxed);
  slot.root.store(root, std::memory_order_relaxed);
  version.store(v + 2, std::memory_order_release);
}

CallWhere CallRecord::read(uint64_t n) const {
  for (;;) {
    const uint64_t v = version.load(std::memory_order_acquire);
    if (v & 1) {
      std::this_thread::yield();
      continue;
    }
    CallWhere w[2];
    uint64_t shape[2];
    for (int k = 0; k < 2; ++k) {
      w[k].number = slots[k].number.load(std::memory_order_relaxed);
      w[k].count = slots[k].count.load(std::memory_order_relaxed);
      shape[k] = slots[k].shape.load(std::memory_order_relaxed);
      w[k].root = slots[k].root.load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (version.load(std::memory_order_relaxed) != v) continue;
    for (int k = 0; k < 2; ++k) {
      w[k].coll = static_cast<uint32_t>(shape[k] & 0xff);
      w[k].dtype = static_cast<uint32_t>((shape[k] >> 8) & 0xff);
      w[k].op = static_cast<int32_t>((shape[k] >> 16) & 0xffff);
      w[k].algo = static_cast<uint32_t>((shape[k] >> 32) & 0xffff);
    }
    const int latest = w[1].number > w[0].number ? 1 : 0;
    if (n != 0 && w[1 - latest].number == n) return w[1 - latest];
    return w[latest];
  }
}

namespace {

// "rank 2, key 5": this rank, with its key where a split made the communicator (keys differ
// by rank, so the cause every rank shares leaves them out).
std::string selfLabel(const braidComm* comm) {
  std::string s = rankLabel(comm, comm->rank);
  if (comm->parentHash != 0) s += ", split key " + std::to_string(comm->splitKey);
  return s;
}

// The same call as the caller passed it (an algorithm not said matches any).
bool sameShape(const CallWhere& a, const CallWhere& b) {
  return a.number == b.number && a.count == b.count && a.coll == b.coll && a.dtype == b.dtype &&
         a.op == b.op && a.root == b.root;
}

bool sameCall(const CallWhere& a, const CallWhere& b) {
  return sameShape(a, b) && (a.algo == 0 || b.algo == 0 || a.algo == b.algo);
}

// The call as its caller passed it; with the algorithm where that is what differs.
std::string whereLabel(const CallWhere& w, bool withAlgo = false) {
  if (w.coll >= static_cast<uint32_t>(kNumCollectives)) return "an unknown call";
  std::string s =
      callLabel(static_cast<Collective>(w.coll), w.count, static_cast<braidDataType_t>(w.dtype),
                static_cast<braidRedOp_t>(w.op), w.root);
  if (withAlgo && w.algo > 0 && w.algo <= algorithms().size())
    s += std::string(" with algorithm ") + algorithms()[w.algo - 1].name;
  return s;
}

// "rank 1 (...)" or "ranks 0 (...), 2 (...)", at most kListed of them.
std::string ranksLabel(const braidComm* comm, const std::vector<int>& ranks) {
  if (ranks.size() == 1) return rankLabel(comm, ranks[0]);
  constexpr size_t kListed = 16;
  std::string s = "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kListed; ++i)
    s += (i ? ", " : "") + rankLabel(comm, ranks[i]).substr(5);  // without "rank "
  if (ranks.size() > kListed) s += ", and " + std::to_string(ranks.size() - kListed) + " more";
  return s;
}

class AskPeer final : public PeerCallCheck {
 public:
  explicit AskPeer(braidComm* comm) : comm_(comm) {}
  braidResult_t check(int peer) const override {
    if (!comm_->control) return braidSuccess;
    const CallWhere mine = comm_->callRecord.read();
    CallWhere theirs;
    const std::string saved = lastError();  // no answer is no finding: quietly
    if (comm_->control->askWhere(peer, mine.number, deadlineAfter(0.5), &theirs) != braidSuccess) {
      failVerbatim(braidSuccess, saved);
      return braidSuccess;
    }
    if (mine.number == 0 || theirs.number != mine.number || sameCall(mine, theirs))
      return braidSuccess;
    return fail(braidInvalidUsage,
                "rank %d is in a different call at this point (its collective #%llu is %s, this "
                "rank's %s)",
                peer, static_cast<unsigned long long>(mine.number),
                whereLabel(theirs, sameShape(mine, theirs)).c_str(),
                whereLabel(mine, sameShape(mine, theirs)).c_str());
  }

 private:
  braidComm* comm_;
};

}  // namespace

std::unique_ptr<PeerCallCheck> makePeerCallCheck(braidComm* comm) {
  return std::make_unique<AskPeer>(comm);
}

std::string misuseCause(braidComm* comm, bool* everyone) {
  const CallWhere mine = comm->callRecord.read();
  const size_t n = static_cast<size_t>(comm->nranks);
  const auto self = static_cast<size_t>(comm->rank);
  std::vector<CallWhere> at(n);
  std::vector<char> answered(n, 0), asked(n, 0);
  at[self] = mine;
  answered[self] = asked[self] = 1;
  const std::string saved = lastError();  // the asks below must not replace the caller's error
  // Ranks behind this one may still be on their way to this call: asked again for a while.
  const Deadline until = deadlineAfter(0.5);
  for (bool behind = true; behind;) {
    behind = false;
    for (size_t r = 0; r < n; ++r) {
      if (asked[r] && !(answered[r] && at[r].number < mine.number)) continue;
      asked[r] = 1;
      CallWhere answer;  // a failed ask may have written part of it
      if (comm->control && comm->control->askWhere(static_cast<int>(r), mine.number,
                                                   deadlineAfter(0.25), &answer) == braidSuccess) {
        at[r] = answer;
        answered[r] = 1;
      }
      behind |= answered[r] && at[r].number < mine.number;
    }
    if (behind && Clock::now() >= until) break;
    if (behind) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  failVerbatim(braidSuccess, saved);
  struct Group {
    CallWhere call;
    std::vector<int> ranks;
  };
  std::vector<Group> groups;
  std::string others;
  for (size_t r = 0; r < n; ++r) {
    const int rank = static_cast<int>(r);
    if (!answered[r]) {
      others += "; " + rankLabel(comm, rank) + " did not answer";
    } else if (at[r].number != mine.number) {
      others += "; " + rankLabel(comm, rank) + " was at collective #" +
                std::to_string(at[r].number) + " (" + whereLabel(at[r]) + ")";
    } else {
      auto g = std::find_if(groups.begin(), groups.end(),
                            [&](const Group& x) { return sameCall(x.call, at[r]); });
      if (g != groups.end())
        g->ranks.push_back(rank);
      else
        groups.push_back({at[r], {rank}});
    }
  }
  if (everyone) *everyone = others.empty();
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.ranks.size() < b.ranks.size(); });
  std::string s = "misuse on " + commLabel(comm) + " at collective #" +
                  std::to_string(mine.number) +
                  " (every rank must make the same collective calls in the same order): ";
  // The algorithm is said where two groups made the same call otherwise
  // (braidCommSetAlgorithm on some ranks only).
  bool algos = false;
  for (size_t i = 0; i < groups.size(); ++i)
    for (size_t j = i + 1; j < groups.size(); ++j)
      algos |= sameShape(groups[i].call, groups[j].call);
  for (size_t i = 0; i < groups.size(); ++i)
    s += (i ? "; " : "") + ranksLabel(comm, groups[i].ranks) + " called " +
         whereLabel(groups[i].call, algos);
  return s + others;
}

namespace {

// The executor's words for a peer in another call (executor.cc, progressRecv).
bool isMismatch(const char* msg) {
  return std::strstr(msg, "is in a different call") != nullptr ||
         std::strstr(msg, "the ranks called different collectives") != nullptr;
}

}  // namespace

braidResult_t shareCause(braidComm* comm, braidResult_t res) {
  if (res == braidSuccess) return res;
  int by = comm->revokedBy.load();
  if (by < 0 && res == braidInvalidUsage && comm->control && isMismatch(lastError())) {
    const std::string mine = withoutRankPrefix(lastError(), comm->rank);
    bool everyone = !comm->fingerprints;
    // BRAID_CALL_CHECK=0 keeps no call records to ask for: the cause is this rank's finding.
    const std::string cause = comm->fingerprints ? misuseCause(comm, &everyone)
                                                 : "misuse on " + commLabel(comm) + ", found by " +
                                                       rankLabel(comm, comm->rank) + ": " + mine;
    // A rank that did not answer, or had not reached the call, may be one that found the
    // misuse first, revoked and left: its revocation (sent before its control plane closed)
    // carries the cause every other rank reports. Wait a moment for it.
    for (int i = 0; i < 200 && !everyone && comm->revokedBy.load() < 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    revokeLocally(comm, comm->rank, cause);
    // A rank that found it first may have revoked already: its cause is the one every rank
    // reports (the same words where each asked the same ranks).
    by = comm->revokedBy.load();
    const std::string who =
        by == comm->rank
            ? std::string("found here, which revoked the communicator")
            : "found by " + rankLabel(comm, by) + ", which revoked the communicator for it";
    return fail(res, "%s [%s; here (%s): %s]", revokeReasonOf(comm).c_str(), who.c_str(),
                selfLabel(comm).c_str(), mine.c_str());
  }
  // A peer that saw a revocation first gives its connections up as its call ends; the
  // revocation reaches this rank over the control plane moments later (its forwarding): wait
  // that long for it, and say revoked rather than lost.
  if (res == braidRemoteError && comm->control)
    for (int i = 0; i < 200 && (by = comm->revokedBy.load()) < 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (by < 0) return res;
  const std::string reason = revokeReasonOf(comm);
  const std::string mine = withoutRankPrefix(lastError(), comm->rank);
  if (!reason.empty() && by != comm->rank)
    return fail(braidInvalidUsage,
                "%s [found by %s, which revoked the communicator for it; here (%s): %s]",
                reason.c_str(), rankLabel(comm, by).c_str(), selfLabel(comm).c_str(), mine.c_str());
  if (mine.find("revoked") != std::string::npos) return res;
  return fail(braidInvalidUsage,
              "the communicator was revoked (braidCommRevoke on rank %d) during this call (%s)", by,
              mine.c_str());
}

braidResult_t exchangeFingerprint(braidComm* comm, const CollArgs& a) {
  LogRankScope rankScope(comm->rank);
  const uint64_t opCount = comm->opCount;  // this call takes no number of its own
  const uint64_t calls = comm->collCount;  // the collectives before it, alike on every rank
  constexpr int kFields = 6;
  const uint64_t mine[kFields] = {
      static_cast<uint64_t>(a.coll),
      static_cast<uint64_t>(a.count),
      static_cast<uint64_t>(a.dtype),
      isReducing(a.coll) ? static_cast<uint64_t>(a.op) : 0,
      isRooted(a.coll) ? static_cast<uint64_t>(static_cast<uint32_t>(a.root)) : 0,
      calls,
  };
  const size_t n = static_cast<size_t>(comm->nranks);
  std::vector<uint64_t> all(kFields * n);
  CollArgs g;
  g.coll = Collective::kAllGather;
  g.count = kFields;
  g.dtype = braidUint64;
  g.op = braidSum;
  const braidResult_t res =
      runCollective(comm, g, mine, all.data(), &a, false, fingerprintTag(a, calls));
  comm->opCount = opCount;
  // The executor's message names the exchange and, where a peer was in another call, the cause
  // every rank reports (shareCause) leads it.
  if (res != braidSuccess) return res;
  bool same = true;
  for (size_t r = 1; r < n && same; ++r)
    same = std::equal(all.begin(), all.begin() + kFields, all.begin() + r * kFields);
  if (same) return braidSuccess;
  // The tags matched, so only a hash collision gets here: list every rank's call.
  std::string list;
  for (size_t r = 0; r < n && r < 16; ++r) {
    const uint64_t* f = &all[r * kFields];
    const auto coll = static_cast<Collective>(std::min<uint64_t>(f[0], kNumCollectives - 1));
    list += (r ? "; " : "") + rankLabel(comm, static_cast<int>(r)) + ": " +
            callLabel(coll, f[1], static_cast<braidDataType_t>(f[2]),
                      static_cast<braidRedOp_t>(f[3]), static_cast<int>(f[4])) +
            " after collective #" + std::to_string(f[5]);
  }
  return fail(braidInvalidUsage,
              "the ranks made different calls on %s (every rank must make the same collective "
              "calls in the same order): %s",
              commLabel(comm).c_str(), list.c_str());
}

}  // namespace braid
