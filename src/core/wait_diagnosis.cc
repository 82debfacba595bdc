// What a run of the executor says and finds once it has waited long (wait_diagnosis.h): whether
// a peer is gone (lostPeer), whom the run waits for and why that peer is late (waitingFor, for
// the stall warning and the timeout), and the errors of a run that cannot finish (timeoutError,
// lostPeerError, deadPeer), each blaming a rank.
#include "core/wait_diagnosis.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "core/executor.h"
#include "core/stall.h"
#include "transport/shm.h"

namespace braid {

// Whether `peer` can no longer answer: its network connection is lost, or its process
// on this machine has exited.
bool WaitDiagnosis::gone(int peer) const {
  if (ctx_.connections[peer]->state().failure) return true;
  int pid = ctx_.peerPids ? ctx_.peerPids[peer] : 0;
  if (pid <= 0 || pid == getpid()) return false;
  return processGone(pid);
}

// The first peer this rank still waits on that is gone, or -1. A gone peer's receive queue
// counts only when no piece of it is left to read: a peer that finished first commits its
// last pieces before it goes, and they may wait for steps held up by other peers.
int WaitDiagnosis::lostPeer() {
  for (size_t q = 0; q < plan_.recvs.size(); ++q) {
    const Plan::Queue& queue = plan_.recvs[q];
    if (recvCur_[q].index >= queue.steps.size() || !gone(queue.peer)) continue;
    RecvPiece piece;
    if (!ctx_.connections[queue.peer]->recv(&piece)) return queue.peer;
  }
  for (size_t q = 0; q < plan_.sends.size(); ++q)
    if (sendCur_[q].retired < plan_.sends[q].steps.size() && gone(plan_.sends[q].peer))
      return plan_.sends[q].peer;
  return -1;
}

void WaitDiagnosis::blame(int rank) const {
  if (ctx_.blamed) *ctx_.blamed = rank;
}

braidResult_t WaitDiagnosis::lostPeerError(int peer) {
  // A peer that gave up because of a third rank passes the blame on to it.
  const ConnectionState state = ctx_.connections[peer]->state();
  const int further = state.blamed;
  blame(further >= 0 && further != ctx_.rank ? further : peer);
  if (const char* why = state.failure)
    return fail(braidRemoteError,
                "%s #%llu: the %s connection to rank %d is lost while this rank waits on it: %s",
                ctx_.what, static_cast<unsigned long long>(ctx_.opCount),
                ctx_.connections[peer]->name(), peer, why);
  return deadPeer(peer);
}

braidResult_t WaitDiagnosis::deadPeer(int peer) {
  blame(peer);
  return fail(braidRemoteError,
              "%s #%llu: rank %d (pid %d on this host) exited while this rank waited on it; "
              "the job cannot finish this call",
              ctx_.what, static_cast<unsigned long long>(ctx_.opCount), peer, ctx_.peerPids[peer]);
}

WaitDiagnosis::Stuck WaitDiagnosis::stuck() const {
  for (size_t q = 0; q < plan_.recvs.size(); ++q)
    if (recvCur_[q].index < plan_.recvs[q].steps.size()) return {static_cast<int>(q), -1};
  for (size_t q = 0; q < plan_.sends.size(); ++q)
    if (sendCur_[q].retired < plan_.sends[q].steps.size()) return {-1, static_cast<int>(q)};
  return {};
}

// The peer waitingFor() names, or -1.
int WaitDiagnosis::waitedPeer() const {
  const Stuck s = stuck();
  if (s.recvQueue >= 0) return plan_.recvs[static_cast<size_t>(s.recvQueue)].peer;
  if (s.sendQueue >= 0) return plan_.sends[static_cast<size_t>(s.sendQueue)].peer;
  return -1;
}

// What this rank waits for: the first receive stuck on its peer, else the first send
// whose peer has not drained it, with the step.
std::string WaitDiagnosis::waitingFor() const {
  char buf[256];
  const Stuck s = stuck();
  if (s.recvQueue >= 0) {
    const Plan::Queue& q = plan_.recvs[static_cast<size_t>(s.recvQueue)];
    const int32_t idx = q.steps[recvCur_[static_cast<size_t>(s.recvQueue)].index];
    // Steps are counted from 1 ("step 1 of 1"). A send/recv group's steps count bytes; a
    // collective's, elements of its datatype; BRAID_CHECK's exchange's, its own (not said).
    char size[64] = "";
    if (!ctx_.checkExchange)
      std::snprintf(size, sizeof(size), " of %zu %s", plan_.schedule.steps[idx].count,
                    ctx_.kind == 0 ? "bytes" : "elements");
    std::snprintf(buf, sizeof(buf),
                  "waiting to receive from rank %d (step %d of %zu, %s%s): ", q.peer, idx + 1,
                  plan_.schedule.steps.size(), stepKindName(plan_.schedule.steps[idx].kind), size);
    return buf + whyLate(q.peer);
  }
  if (s.sendQueue >= 0) {
    const int peer = plan_.sends[static_cast<size_t>(s.sendQueue)].peer;
    std::snprintf(buf, sizeof(buf), "waiting for rank %d to drain its receive buffer: ", peer);
    return buf + whyLate(peer);
  }
  return "waiting on no peer";
}

// Why `peer` does not answer: "late, stalled or dead", and, when it is of this host and its
// last act was to refuse its own call before the call started (its position says so), that
// call and its message: of this call's number, or of another (the two ranks' numbers part
// where either made send/recv calls with others).
std::string WaitDiagnosis::whyLate(int peer) const {
  const std::string rank = "rank " + std::to_string(peer);
  const CallPosition* p = ctx_.peerPositions ? ctx_.peerPositions[peer] : nullptr;
  uint32_t kind = 0;
  uint64_t number = 0;
  const std::string why = p ? p->latestRefusal(&number, &kind) : "";
  if (why.empty()) return rank + " is late, stalled or dead";
  if (number == ctx_.opCount)
    return rank + " has not entered call #" + std::to_string(number) + ": it refused its " +
           stallKindLabel(kind) + " of that number before the call started (" + why + ")";
  return rank + " has entered no call since it refused its " + stallKindLabel(kind) + " #" +
         std::to_string(number) + " before it started (" + why + ")";
}

braidResult_t WaitDiagnosis::timeoutError(double waited) {
  for (size_t q = 0; q < plan_.recvs.size(); ++q)
    if (recvCur_[q].index < plan_.recvs[q].steps.size()) {
      blame(plan_.recvs[q].peer);
      break;
    }
  return fail(braidTimeout,
              "%s #%llu timed out after %s (BRAID_TIMEOUT or braidConfig_t::timeoutSec) %s",
              ctx_.what, static_cast<unsigned long long>(ctx_.opCount), secondsText(waited).c_str(),
              waitingFor().c_str());
}

}  // namespace braid
