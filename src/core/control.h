// The control plane: a channel between a communicator's ranks apart from its data connections,
// for what must still work once those are broken or a rank is dead: revocation and the
// agreement of braidCommShrink (braid_fault.h, docs/fault-tolerance.md).
//
// Each rank listens on a TCP port (the interface chooseListenAddress picks, as the stall board)
// and serves it from a thread of its own. A message is one connection: a header that proves
// the job's secret (the unique id's) before anything else is read, then the sender's list of
// ranks. Revocations are handed to a callback; agreement requests wait in a mailbox, with
// their connection open for the verdict, until the rank's shrink takes them. A probe is a
// connection alone: accepted means the process lives (its kernel answers whatever its threads
// do), refused means it is gone.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "braid/braid.h"

namespace braid {

enum class ControlType : uint32_t { kRevoke = 1, kAgree = 2, kPut = 3, kWhere = 4 };

// What a rank answers to kWhere: its collective of the number asked for where it remembers it
// (its current and previous one), else its latest (braidComm's CallRecord), in the caller's
// terms. Plain numbers: the control plane knows no collectives.
struct CallWhere {
  uint64_t number = 0;  // its number among the communicator's collectives (1 the first); 0: none
  uint64_t count = 0;   // as the caller passed it
  uint32_t coll = 0;    // Collective
  uint32_t dtype = 0;   // braidDataType_t
  int32_t op = 0;       // braidRedOp_t
  int32_t root = 0;
  uint32_t algo = 0;  // its algorithm's index in algorithms() + 1; 0: not said
  uint32_t reserved = 0;
};

// A connection's first bytes.
struct ControlHeader {
  static constexpr uint32_t kMagic = 0x4c544342;  // "BCTL"
  uint32_t magic;
  uint8_t secret[32];
  uint32_t type;  // ControlType
  // kAgree: which shrink of the communicator (its count of shrinks); kWhere: the number asked
  uint64_t epoch;
  int32_t from;  // the sender's rank
  // int32 ranks that follow, < 1<<20: kAgree, those the sender excludes; kRevoke, the rank
  // that revoked first
  int32_t count;
};

// An agreement request waiting for the coordinator's verdict.
struct AgreeRequest {
  int fd = -1;  // open: the verdict goes back on it
  int from = -1;
  uint64_t epoch = 0;
  std::vector<int> excluded;
};

// What the coordinator answers: verdict, then `count` int32 excluded ranks.
struct AgreeVerdict {
  static constexpr int32_t kMember = 0;
  static constexpr int32_t kExcluded = 1;
  // Not the coordinator: the one rank that follows is (the sender asks it instead).
  static constexpr int32_t kRedirect = 2;
  // The coordinator could not decide (the message says why in the sender's log): fail.
  static constexpr int32_t kFailed = 3;
  int32_t verdict;
  int32_t count;
  braidUniqueId id;  // the new communicator's (kMember)
};

// Result of probe.
enum class Liveness { kAlive, kGone, kUnknown };

class ControlPlane {
 public:
  // Listens and starts the thread. onRevoke runs on that thread for each revocation received
  // (the rank that revoked first, and the reason it gave: "" for braidCommRevoke).
  static braidResult_t create(const uint8_t secret[32], int rank,
                              std::function<void(int from, const std::string& reason)> onRevoke,
                              std::unique_ptr<ControlPlane>* out);
  // Stops the thread (and a revocation still being sent), closes every socket.
  ~ControlPlane();
  // Stops the thread and the revocation being sent; nothing arrives afterwards. Idempotent;
  // from the thread that owns the plane.
  void stop();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // "a.b.c.d:port", for the peer cards.
  const std::string& address() const { return address_; }
  // The peers' addresses by rank ("" for a rank without one), after init's exchange.
  void setPeers(const std::vector<std::string>& addresses);
  int nranks() const { return static_cast<int>(peers_.size()); }

  // Sends the revocation that rank `origin` made to every rank but this one and origin, from
  // a thread of its own, each within 1 s (a cut-off host costs that second, not a hang). Once
  // per plane: later calls do nothing. reason (at most kMaxReasonBytes of it) travels with it:
  // the misuse or failure that made origin revoke, so that every rank reports the same cause.
  void broadcastRevoke(int origin, const std::string& reason = "");
  static constexpr size_t kMaxReasonBytes = 4000;

  // Where puts and signals land (window.cc): run on the control thread with the connection,
  // the sender and the put's description (PutMeta); it reads the data and answers. Set before
  // any peer knows this rank's address.
  void setPutHandler(std::function<void(int fd, int from, const std::vector<int32_t>&)> fn) {
    onPut_ = std::move(fn);
  }
  // Sends a put (meta, then bytes of data) to `rank` and waits for its answer: braidSuccess
  // once the data is in the window and the signal counted there, braidInvalidArgument if the
  // peer refused it (no such window, out of range), braidRemoteError if it cannot be reached.
  braidResult_t sendPut(int rank, const std::vector<int>& meta, const void* data, size_t bytes,
                        Deadline deadline);
  // What this rank answers to askWhere (run on the control thread: it must not block). Set
  // before any peer knows this rank's address.
  void setWhereHandler(std::function<CallWhere(uint64_t number)> fn) { onWhere_ = std::move(fn); }
  // Which collective `rank` made as its number `number` (0: its latest): braidSuccess with
  // *out, braidRemoteError when it cannot be reached or does not answer by deadline (without
  // a message where it cannot be reached).
  braidResult_t askWhere(int rank, uint64_t number, Deadline deadline, CallWhere* out);
  // Opens a connection to `rank` and sends an agreement request; *fd stays open for the
  // verdict. braidRemoteError when the rank refuses (gone) or cannot be reached by deadline.
  braidResult_t sendAgree(int rank, uint64_t epoch, const std::vector<int>& excluded,
                          Deadline deadline, int* fd);
  // The next agreement request of `epoch` (older ones are closed and dropped), waiting until
  // `until`; false if none came.
  bool takeAgree(uint64_t epoch, Deadline until, AgreeRequest* out);
  // Whether `rank`'s process lives: a connection accepted within `sec`.
  Liveness probe(int rank, double sec);
  // This rank's part in agreement `epoch`: waiting on `coordinator` (another rank: requests
  // that reach this rank are redirected there, those queued already too), coordinating (this
  // rank), or none (-1).
  void setAgreeRole(uint64_t epoch, int coordinator);

 private:
  ControlPlane() = default;
  void serve();
  void handle(int fd);
  void redirect(int fd, int coordinator);  // under mu_; closes fd
  bool peerAddress(int rank, sockaddr_in* sa) const;
  int connectHeader(int rank, ControlType type, uint64_t epoch, const std::vector<int>& ranks,
                    Deadline deadline, int* fd);

  int listenFd_ = -1;
  int wakeFds_[2] = {-1, -1};
  uint8_t secret_[32] = {};
  int rank_ = -1;
  std::string address_;
  std::vector<std::string> peers_;
  std::function<void(int, const std::string&)> onRevoke_;
  std::function<void(int, int, const std::vector<int32_t>&)> onPut_;
  std::function<CallWhere(uint64_t)> onWhere_;
  std::thread thread_;
  std::thread revoker_;
  std::atomic<bool> revokeSent_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<AgreeRequest> mailbox_;
  uint64_t roleEpoch_ = 0;    // under mu_
  int roleCoordinator_ = -1;  // under mu_
};

}  // namespace braid
