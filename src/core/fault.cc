// Surviving a lost rank (braid_fault.h): revoke, shrink with its agreement, grow.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/control.h"
#include "transport/shm.h"

namespace braid {

braidResult_t checkNotRevoked(const braidComm* comm, const char* fn) {
  const int by = comm->revokedBy.load(std::memory_order_acquire);
  if (by < 0) return braidSuccess;
  return fail(braidInvalidUsage,
              "%s: comm was revoked (braidCommRevoke on rank %d): only braidCommShrink, "
              "braidCommDestroy and braidCommAbort may follow",
              fn, by);
}

void revokeLocally(braidComm* comm, int by, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(comm->revokeMu);
    int none = -1;
    if (comm->revokedBy.load(std::memory_order_acquire) >= 0) return;
    comm->revokeReason = reason;
    if (!comm->revokedBy.compare_exchange_strong(none, by, std::memory_order_acq_rel)) return;
  }
  BRAID_WARN("FAULT", "rank %d: communicator revoked by rank %d%s", comm->rank, by,
             by == comm->rank ? " (here)" : "");
  // Calls asleep on the doorbell wake now instead of at their 10 ms poll.
  if (comm->segment) comm->segment->doorbell()->ring();
  if (comm->control) comm->control->broadcastRevoke(by, reason);
}

std::string revokeReasonOf(const braidComm* comm) {
  std::lock_guard<std::mutex> lock(comm->revokeMu);
  return comm->revokeReason;
}

namespace {

// Seconds the agreement waits for a rank, and a participant for the verdict.
double agreeTimeoutSec(const braidComm* comm) {
  return comm->timeoutSec > 0 ? comm->timeoutSec : config().timeoutSec;
}

std::string rankList(const std::vector<char>& set) {
  std::string s;
  for (size_t r = 0; r < set.size(); ++r)
    if (set[r]) {
      if (!s.empty()) s += ',';
      s += std::to_string(r);
    }
  return s.empty() ? "none" : s;
}

std::vector<int> ranksOf(const std::vector<char>& set) {
  std::vector<int> out;
  for (size_t r = 0; r < set.size(); ++r)
    if (set[r]) out.push_back(static_cast<int>(r));
  return out;
}

// Quietly: the agreement's sends and receives fail as a matter of course (a dead peer).
bool sendQuiet(int fd, const void* p, size_t n, Deadline d) {
  const std::string saved = lastError();
  const bool ok = sendAll(fd, p, n, d) == braidSuccess;
  failVerbatim(braidSuccess, saved);
  return ok;
}
bool recvQuiet(int fd, void* p, size_t n, Deadline d) {
  const std::string saved = lastError();
  const bool ok = recvAll(fd, p, n, d) == braidSuccess;
  failVerbatim(braidSuccess, saved);
  return ok;
}

// The coordinator's side: gathers every rank it does not exclude, with what each excludes,
// until none is missing (probing the missing ones: a gone one is excluded at once, one that
// cannot be reached once the timeout is over), then answers each with the verdict. A missing
// rank that lives at the timeout waits on another coordinator (the ranks' excludeRanks
// differ) or never called shrink: then nobody may go on, and every rank that asked is told
// so (kFailed), as this rank fails, naming it.
braidResult_t coordinate(braidComm* comm, uint64_t epoch, std::vector<char>* out,
                         braidUniqueId* id) {
  ControlPlane& cp = *comm->control;
  const int n = comm->nranks;
  std::vector<char>& excluded = *out;
  std::vector<AgreeRequest> arrived(static_cast<size_t>(n));
  const Deadline giveUp = deadlineAfter(agreeTimeoutSec(comm));
  Clock::time_point nextProbe = Clock::now() + std::chrono::milliseconds(100);
  while (true) {
    std::vector<int> missing;
    for (int r = 0; r < n; ++r)
      if (r != comm->rank && !excluded[r] && arrived[r].fd < 0) missing.push_back(r);
    if (missing.empty()) break;
    const Clock::time_point now = Clock::now();
    if (now >= giveUp) {
      std::string alive;
      for (int r : missing) {
        if (cp.probe(r, 0.2) == Liveness::kAlive) {
          if (!alive.empty()) alive += ',';
          alive += std::to_string(r);
          continue;
        }
        BRAID_WARN("FAULT", "shrink: rank %d cannot be reached within %s: left out", r,
                   secondsText(agreeTimeoutSec(comm)).c_str());
        excluded[r] = 1;
      }
      if (!alive.empty()) {
        for (AgreeRequest& a : arrived) {
          if (a.fd < 0) continue;
          AgreeVerdict v{};
          v.verdict = AgreeVerdict::kFailed;
          sendQuiet(a.fd, &v, sizeof v, deadlineAfter(1.0));
          ::close(a.fd);
          a.fd = -1;
        }
        return fail(braidInvalidUsage,
                    "braidCommShrink: rank(s) %s live but did not join this rank's agreement "
                    "within %s: they wait on another coordinator (do the ranks' excludeRanks "
                    "differ? an excluded rank must not call shrink) or never called "
                    "braidCommShrink; no new communicator",
                    alive.c_str(), secondsText(agreeTimeoutSec(comm)).c_str());
      }
      break;
    }
    AgreeRequest req;
    if (cp.takeAgree(epoch, std::min<Deadline>(nextProbe, giveUp), &req)) {
      if (req.from < 0 || req.from >= n || req.from == comm->rank) {
        ::close(req.fd);
        continue;
      }
      if (arrived[req.from].fd >= 0) ::close(arrived[req.from].fd);  // a retry: the newer one
      for (int x : req.excluded)
        if (x >= 0 && x < n && x != comm->rank) excluded[x] = 1;
      arrived[req.from] = std::move(req);
      continue;
    }
    nextProbe = Clock::now() + std::chrono::milliseconds(100);
    for (int r : missing)
      if (cp.probe(r, 0.05) == Liveness::kGone) {
        BRAID_INFO("FAULT", "shrink: rank %d is gone (its control plane refuses): left out", r);
        excluded[r] = 1;
      }
  }
  const braidResult_t made = braidGetUniqueId(id);
  const std::vector<int> list = ranksOf(excluded);
  for (int r = 0; r < n; ++r) {
    AgreeRequest& a = arrived[r];
    if (a.fd < 0) continue;
    AgreeVerdict v{};
    v.verdict = excluded[r] ? AgreeVerdict::kExcluded : AgreeVerdict::kMember;
    v.count = static_cast<int32_t>(list.size());
    v.id = *id;
    // A coordinator without a bootstrap closes the connections: each participant finds it
    // alive and asks again until its own deadline.
    if (made == braidSuccess) {
      const Deadline d = deadlineAfter(2.0);
      if (sendQuiet(a.fd, &v, sizeof v, d) && !list.empty())
        sendQuiet(a.fd, list.data(), list.size() * sizeof(int), d);
    }
    ::close(a.fd);
    a.fd = -1;
  }
  return made;
}

// A participant's side with coordinator c: sends what it excludes and takes the verdict.
// braidRemoteError when c is gone (the caller excludes it and turns to the next rank).
braidResult_t participate(braidComm* comm, int c, uint64_t epoch, Deadline deadline,
                          std::vector<char>* out, braidUniqueId* id, bool* member, int* redirect) {
  ControlPlane& cp = *comm->control;
  const int n = comm->nranks;
  *redirect = -1;
  while (true) {
    int fd = -1;
    const Deadline connectBy = std::min<Deadline>(deadline, deadlineAfter(5.0));
    if (cp.sendAgree(c, epoch, ranksOf(*out), connectBy, &fd) != braidSuccess) {
      // Refused by a live process of this machine: c left the communicator (it destroyed
      // it, or shrank without this rank), which is not a death to step over.
      // A killed process closes its sockets while it exits, a moment before it is a zombie.
      auto leftAlive = [&] {
        const int pid = comm->peerPids.empty() ? 0 : comm->peerPids[c];
        if (pid <= 0 || pid == getpid()) return false;
        for (int i = 0; i < 50; ++i) {
          if (processGone(pid)) return false;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return true;
      };
      if (leftAlive())
        return fail(braidInvalidUsage,
                    "braidCommShrink: rank %d lives but has left this communicator (destroyed "
                    "it, or shrank without this rank); no new communicator",
                    c);
      return fail(braidRemoteError, "shrink: the coordinator, rank %d, cannot be reached", c);
    }
    AgreeVerdict v{};
    const bool got = recvQuiet(fd, &v, sizeof v, deadline) && v.count >= 0 && v.count <= n;
    std::vector<int> list(got ? static_cast<size_t>(v.count) : 0);
    const bool whole =
        got && (list.empty() || recvQuiet(fd, list.data(), list.size() * sizeof(int), deadline));
    ::close(fd);
    if (got && v.verdict == AgreeVerdict::kFailed)
      return fail(braidInvalidUsage,
                  "braidCommShrink: the coordinator, rank %d, could not reach an agreement "
                  "(a live rank did not join it; its log says which); no new communicator",
                  c);
    if (whole && v.verdict == AgreeVerdict::kRedirect && list.size() == 1 && list[0] >= 0 &&
        list[0] < n && list[0] != c) {
      *redirect = list[0];  // c waits on that coordinator: ask it
      return braidSuccess;
    }
    if (whole) {
      std::fill(out->begin(), out->end(), 0);
      for (int x : list)
        if (x >= 0 && x < n) (*out)[x] = 1;
      *member = v.verdict == AgreeVerdict::kMember;
      *id = v.id;
      return braidSuccess;
    }
    if (Clock::now() >= deadline)
      return fail(braidTimeout, "shrink: no verdict from the coordinator, rank %d, in time", c);
    // The connection closed without a verdict: the coordinator died, or lives and could not
    // decide; ask it again if it lives.
    if (cp.probe(c, 1.0) != Liveness::kAlive)
      return fail(braidRemoteError, "shrink: the coordinator, rank %d, died", c);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

braidResult_t shrinkComm(braidComm* comm, const int* excludeRanks, int excludeCount,
                         braidComm_t* newcomm, const braidConfig_t* config, int flags) {
  BRAID_TRY(checkComm(comm, "braidCommShrink"));
  InFlight running(comm);
  if (insideGroup())
    return fail(braidInvalidUsage,
                "braidCommShrink: called inside braidGroupStart/End; shrink outside a group");
  if (!newcomm) return fail(braidInvalidArgument, "braidCommShrink: newcomm is NULL");
  *newcomm = nullptr;
  if (flags != BRAID_SHRINK_DEFAULT && flags != BRAID_SHRINK_ABORT)
    return fail(braidInvalidArgument,
                "braidCommShrink: shrinkFlags is %d; give BRAID_SHRINK_DEFAULT (0) or "
                "BRAID_SHRINK_ABORT (1)",
                flags);
  const int n = comm->nranks;
  if (excludeCount < 0 || excludeCount > n)
    return fail(braidInvalidArgument, "braidCommShrink: excludeCount is %d; it must be in [0, %d]",
                excludeCount, n);
  if (excludeCount > 0 && !excludeRanks)
    return fail(braidInvalidArgument, "braidCommShrink: excludeRanks is NULL, excludeCount %d",
                excludeCount);
  std::vector<char> excluded(static_cast<size_t>(n), 0);
  for (int i = 0; i < excludeCount; ++i) {
    const int r = excludeRanks[i];
    if (r < 0 || r >= n)
      return fail(braidInvalidArgument,
                  "braidCommShrink: excludeRanks[%d] is %d; ranks of comm are 0..%d", i, r, n - 1);
    if (r == comm->rank)
      return fail(braidInvalidArgument,
                  "braidCommShrink: excludeRanks[%d] is this rank (%d); an excluded rank does "
                  "not call shrink",
                  i, r);
    excluded[r] = 1;
  }
  BRAID_TRY(checkConfig(config, "braidCommShrink"));
  LogRankScope rankScope(comm->rank);
  const auto started = Clock::now();
  if (flags & BRAID_SHRINK_ABORT) revokeLocally(comm, comm->rank);
  // Peers on this machine whose process is gone are out before anyone is asked.
  for (int r = 0; r < n; ++r)
    if (r != comm->rank && !comm->peerPids.empty() && comm->peerPids[r] > 0 &&
        processGone(comm->peerPids[r]))
      excluded[r] = 1;
  const uint64_t epoch = comm->shrinks.fetch_add(1) + 1;
  const double bound = agreeTimeoutSec(comm);
  const Deadline deadline = deadlineAfter(3 * bound + 10);
  const braidConfig_t merged = childConfig(comm, config);
  std::vector<char> gone(static_cast<size_t>(n), 0);  // found dead here (not just excluded)
  for (int attempt = 0; attempt <= n; ++attempt) {
    int c = 0;
    while (c < n && excluded[c] && c != comm->rank) ++c;
    braidUniqueId id{};
    bool member = true;
    if (c == comm->rank) {
      if (n == 1 || !comm->control) {
        BRAID_TRY(braidGetUniqueId(&id));
      } else {
        comm->control->setAgreeRole(epoch, c);
        const braidResult_t r = coordinate(comm, epoch, &excluded, &id);
        comm->control->setAgreeRole(epoch, -1);
        BRAID_TRY(r);
      }
    } else {
      comm->control->setAgreeRole(epoch, c);
      int redirect = -1;
      const braidResult_t r =
          participate(comm, c, epoch, deadline, &excluded, &id, &member, &redirect);
      comm->control->setAgreeRole(epoch, -1);
      if (r == braidRemoteError) {
        BRAID_WARN("FAULT", "shrink: %s; turning to the next rank", lastError());
        excluded[c] = gone[c] = 1;
        continue;
      }
      BRAID_TRY(r);
      if (redirect >= 0) {
        if (gone[redirect]) {
          // c still waits on a coordinator this rank found dead: c finds out soon; ask again.
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        } else {
          // c waits on a lower live coordinator this rank had excluded (the lists differ):
          // the live one decides.
          BRAID_WARN("FAULT", "shrink: rank %d coordinates (rank %d waits on it); asking it",
                     redirect, c);
          excluded[redirect] = 0;
        }
        if (Clock::now() >= deadline) break;
        --attempt;
        continue;
      }
    }
    if (!member) {
      BRAID_WARN("FAULT",
                 "shrink: the survivors left this rank out (excluded: %s); no new communicator "
                 "here",
                 rankList(excluded).c_str());
      return braidSuccess;
    }
    std::vector<int> members;
    bool goneHere = false;
    for (int r = 0; r < n; ++r) {
      if (!excluded[r])
        members.push_back(r);
      else if (!comm->peerPids.empty() && processGone(comm->peerPids[r]))
        goneHere = true;
    }
    // What a rank killed during an init left in /dev/shm (a process of this machine, gone).
    if (goneHere) sweepDeadSegments();
    const int newRank =
        static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
    braidConfig_t cfg = merged;
    braidComm_t made = nullptr;
    const braidResult_t res =
        braidCommInitRankConfig(&made, static_cast<int>(members.size()), id, newRank, &cfg);
    if (res == braidSuccess) {
      made->parentRanks = members;
      inheritRecorder(made, comm, -1, -1);
      *newcomm = made;
      BRAID_INFO(
          "FAULT", "shrink: %d of %d ranks left (excluded: %s); this rank is %d; %s",
          static_cast<int>(members.size()), n, rankList(excluded).c_str(), newRank,
          secondsText(std::chrono::duration<double>(Clock::now() - started).count()).c_str());
      return braidSuccess;
    }
    // A member died after the verdict (its bootstrap timed out on every member), or the
    // coordinator did: agree again; the dead are found gone this time.
    BRAID_WARN("FAULT", "shrink: the new communicator could not be made (%s); agreeing again",
               lastError());
    if (Clock::now() >= deadline) break;
  }
  return fail(braidTimeout,
              "braidCommShrink: no agreement among the surviving ranks within %s (excluded so "
              "far: %s)",
              secondsText(3 * bound + 10).c_str(), rankList(excluded).c_str());
}

// One rank's part in grow's exchange over comm: whether it holds the id, and the id.
struct GrowEntry {
  int32_t has;
  braidUniqueId id;
};

braidResult_t growComm(braidComm* comm, int nranks, const braidUniqueId* uniqueId, int rank,
                       braidComm_t* newcomm, const braidConfig_t* config) {
  if (!newcomm) return fail(braidInvalidArgument, "braidCommGrow: newcomm is NULL");
  *newcomm = nullptr;
  BRAID_TRY(checkConfig(config, "braidCommGrow"));
  int parent = -1;
  braidComm_t made = nullptr;
  if (!comm) {  // a joining process
    if (!uniqueId)
      return fail(braidInvalidArgument,
                  "braidCommGrow: a joining process (comm NULL) needs the uniqueId that "
                  "braidCommGetUniqueId made");
    if (nranks < 1 || rank < 0 || rank >= nranks)
      return fail(braidInvalidArgument,
                  "braidCommGrow: a joining process's rank is %d with nranks %d; it must be in "
                  "[old size, nranks)",
                  rank, nranks);
    braidConfig_t cfg = BRAID_CONFIG_INITIALIZER;
    if (config) std::memcpy(&cfg, config, config->size);
    cfg.size = sizeof cfg;
    cfg.blocking = 1;
    BRAID_TRY(braidCommInitRankConfig(&made, nranks, *uniqueId, rank, &cfg));
  } else {
    BRAID_TRY(checkComm(comm, "braidCommGrow"));
    InFlight running(comm);
    if (insideGroup())
      return fail(braidInvalidUsage,
                  "braidCommGrow: called inside braidGroupStart/End; grow outside a group");
    if (rank != -1)
      return fail(braidInvalidArgument,
                  "braidCommGrow: rank is %d on a rank of comm; ranks of comm pass -1 and keep "
                  "their ranks",
                  rank);
    if (nranks < comm->nranks || nranks > (1 << 24))
      return fail(braidInvalidArgument,
                  "braidCommGrow: nranks is %d; it must be at least comm's %d ranks", nranks,
                  comm->nranks);
    GrowEntry mine{};
    mine.has = uniqueId ? 1 : 0;
    if (uniqueId) mine.id = *uniqueId;
    std::vector<GrowEntry> all(static_cast<size_t>(comm->nranks));
    BRAID_TRY(braidAllGather(&mine, all.data(), sizeof mine, braidUint8, comm, nullptr));
    int holder = -1, holders = 0;
    for (int r = 0; r < comm->nranks; ++r) {
      if (!all[r].has) continue;
      if (holder < 0) holder = r;
      ++holders;
    }
    if (holders != 1)
      return fail(braidInvalidUsage,
                  "braidCommGrow: %d ranks of comm passed a uniqueId; exactly one must (the "
                  "one that called braidCommGetUniqueId), the others NULL",
                  holders);
    braidConfig_t cfg = childConfig(comm, config);
    BRAID_TRY(braidCommInitRankConfig(&made, nranks, all[holder].id, comm->rank, &cfg));
    parent = comm->rank;
  }
  // Every rank learns every rank's parent rank over the new communicator.
  std::vector<int32_t> parents(static_cast<size_t>(made->nranks));
  const int32_t p = parent;
  if (braidResult_t r = braidAllGather(&p, parents.data(), 1, braidInt32, made, nullptr);
      r != braidSuccess) {
    const std::string why = lastError();
    braidCommDestroy(made);
    return failVerbatim(r, why);
  }
  made->parentRanks.assign(parents.begin(), parents.end());
  if (comm) inheritRecorder(made, comm, -1, -1);  // a joiner keeps its own recorder
  *newcomm = made;
  return braidSuccess;
}

}  // namespace
}  // namespace braid

using braid::fail;

extern "C" {

braidResult_t braidCommRevoke(braidComm_t comm, int revokeFlags) {
  return braid::guardApi("braidCommRevoke", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommRevoke"));
    if (revokeFlags != BRAID_REVOKE_DEFAULT)
      return fail(braidInvalidArgument,
                  "braidCommRevoke: revokeFlags is %d; the only value is BRAID_REVOKE_DEFAULT (0)",
                  revokeFlags);
    braid::revokeLocally(comm, comm->rank);
    return braidSuccess;
  });
}

braidResult_t braidCommIsRevoked(braidComm_t comm, int* revoked, int* byRank) {
  return braid::guardApi("braidCommIsRevoked", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkCommHandle(comm, "braidCommIsRevoked"));
    if (!revoked) return fail(braidInvalidArgument, "braidCommIsRevoked: revoked is NULL");
    const int by = comm->revokedBy.load(std::memory_order_acquire);
    *revoked = by >= 0;
    if (byRank) *byRank = by;
    return braidSuccess;
  });
}

braidResult_t braidCommShrink(braidComm_t comm, const int* excludeRanks, int excludeCount,
                              braidComm_t* newcomm, braidConfig_t* config, int shrinkFlags) {
  return braid::guardApi("braidCommShrink", [&]() -> braidResult_t {
    return braid::shrinkComm(comm, excludeRanks, excludeCount, newcomm, config, shrinkFlags);
  });
}

braidResult_t braidCommParentRanks(braidComm_t comm, int* parentRanks) {
  return braid::guardApi("braidCommParentRanks", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommParentRanks"));
    if (!parentRanks)
      return fail(braidInvalidArgument, "braidCommParentRanks: parentRanks is NULL");
    for (int r = 0; r < comm->nranks; ++r)
      parentRanks[r] = comm->parentRanks.empty() ? r : comm->parentRanks[r];
    return braidSuccess;
  });
}

braidResult_t braidCommGetUniqueId(braidComm_t comm, braidUniqueId* uniqueId) {
  return braid::guardApi("braidCommGetUniqueId", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommGetUniqueId"));
    if (!uniqueId) return fail(braidInvalidArgument, "braidCommGetUniqueId: uniqueId is NULL");
    BRAID_TRY(braid::checkNotRevoked(comm, "braidCommGetUniqueId"));
    return braidGetUniqueId(uniqueId);
  });
}

braidResult_t braidCommGrow(braidComm_t comm, int nranks, const braidUniqueId* uniqueId, int rank,
                            braidComm_t* newcomm, braidConfig_t* config) {
  return braid::guardApi("braidCommGrow", [&]() -> braidResult_t {
    return braid::growComm(comm, nranks, uniqueId, rank, newcomm, config);
  });
}

}  // extern "C"
