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
  if (k < comm->peers.size() && !comm->peers[k].hostId.empty())
    beside += (beside.empty() ? "host " : ", host ") + comm->peers[k].hostId;
  return beside.empty() ? s : s + " (" + beside + ")";
}

std::string commLabel(const braidComm* comm) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "communicator %016" PRIx64, comm->commHash);
  std::string s = buf;
  if (comm->parentHash != 0) {
    std::snprintf(buf, sizeof buf, " (split from %016" PRIx64 ": colour %d, key %d)",
                  comm->parentHash, comm->splitColor, comm->splitKey);
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
    std::string reason = rankLabel(comm, comm->rank) + " on " + commLabel(comm) +
                         " found misuse: " + withoutRankPrefix(lastError(), comm->rank);
    if (comm->blamed >= 0 && comm->blamed < comm->nranks)
      reason += " [the rank in the other call: " + rankLabel(comm, comm->blamed) + "]";
    revokeLocally(comm, comm->rank, reason);
    return fail(res, "%s", reason.c_str());
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
                "%s (%s revoked the communicator for it; here the call failed with it: %s)",
                reason.c_str(), rankLabel(comm, by).c_str(), mine.c_str());
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
  const std::string what = callLabel(a.coll, a.count, a.dtype, a.op, a.root);
  const braidResult_t res =
      runCollective(comm, g, mine, all.data(), &a, false, fingerprintTag(a, calls));
  comm->opCount = opCount;
  if (res != braidSuccess) {
    const std::string why = withoutRankPrefix(lastError(), comm->rank);
    return fail(res, "%s, this rank's %s after collective #%" PRIu64 " on %s: %s",
                rankLabel(comm, comm->rank).c_str(), what.c_str(), calls, commLabel(comm).c_str(),
                why.c_str());
  }
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
