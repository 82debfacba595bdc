// The part of an executor run (executor.cc's Run derives from it) that accounts for a long wait,
// defined in wait_diagnosis.cc: whether a peer is gone, whom the run waits for and why, and the
// errors it ends with. Run's waiting loop (waitForProgress) calls it only once a wait has lasted
// (a liveness check every 100 ms, the stall warning, the timeout) or a peer has failed, never on
// the path that moves pieces.
#pragma once

#include <string>
#include <vector>

#include "braid/braid.h"
#include "core/executor.h"

namespace braid {

class WaitDiagnosis {
 protected:
  WaitDiagnosis(Plan* plan, const ExecContext& ctx)
      : plan_(*plan), ctx_(ctx), sendCur_(plan->sendCur), recvCur_(plan->recvCur) {}

  bool gone(int peer) const;
  int lostPeer();
  void blame(int rank) const;
  braidResult_t lostPeerError(int peer);
  braidResult_t deadPeer(int peer);

  // The queue this rank is stuck on: the first receive queue with steps left, else the first
  // send queue its peer has not drained ({-1, ...} when none).
  struct Stuck {
    int recvQueue = -1, sendQueue = -1;
  };
  Stuck stuck() const;
  int waitedPeer() const;
  std::string waitingFor() const;
  std::string whyLate(int peer) const;
  braidResult_t timeoutError(double waited);

  Plan& plan_;
  const ExecContext& ctx_;
  std::vector<Plan::Cursor>& sendCur_;
  std::vector<Plan::Cursor>& recvCur_;
};

}  // namespace braid
