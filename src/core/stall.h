// Hang diagnosis across ranks (issue 8): after BRAID_STALL_WARN seconds without progress in
// one call, every rank logs its own STALL line (executor.cc); rank 0 also gathers the ranks'
// positions and logs one summary line naming the ranks that are behind and where they are.
//
// The side channel is independent of the data path, so it can neither hang a call nor mix
// with its pieces:
// - Rank 0 listens on a TCP socket of its own (its address travels in rank 0's card). A rank
//   whose call stalls connects once, sends one fixed-size report (secret, rank, sequence
//   number, collective, bytes, the peer it waits on) and keeps the connection open until
//   the call ends: an open connection says "still stalled there", a closed one is stale.
//   Connecting and sending are bounded by half a second and happen only on a stall.
// - Each rank writes the sequence number of the call it enters and of the last one it
//   finished into its shared-memory segment (CallPosition, after the doorbell line; two
//   relaxed stores per call); rank 0 reads them for the peers it has mapped, so a rank that
//   never entered the call (stuck in user code) is seen too, with its last completed call.
// - A rank that refuses a call of its own (bad arguments: the call never starts) writes its
//   number and message there too; every rank of the host that waits on it in that call says
//   so in its stall line and timeout error, and rank 0 in its summary.
// - Rank 0, once its own call has stalled, takes the reports for a short window while it
//   keeps waiting (no thread of its own), then logs the summary once per call, positions
//   from furthest behind to furthest ahead:
//     STALL summary of all-reduce #12 on 4 ranks (rank 0's view): behind: rank 1 not in a
//     call (last completed #11); then ranks 0,2 at all-reduce #12 (400 bytes) waiting on 1;
//     rank 3 sent no report (not in a call, or in it for less than BRAID_STALL_WARN)
// A rank 0 that is itself behind (not in a call) logs nothing: the others' own lines name
// whom they wait on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "transport/shm.h"

namespace braid {

// Where a rank is, in its own shared-memory segment (ShmSegment::ownerArea), written by the
// rank, read by rank 0 (the summary) and by the ranks of its host that wait on it.
struct CallPosition {
  std::atomic<uint64_t> started{0};  // sequence number of the last call entered (0: none)
  std::atomic<uint64_t> done{0};     // sequence number of the last call finished
  std::atomic<uint32_t> what{0};     // kind of the call entered (stallKindLabel)
  // 0 while the rank's calls work; once one failed, 2 + the rank it blamed (1: none). Read by
  // network peers on this machine, whose connection to it says only that it closed.
  std::atomic<int32_t> gaveUp{0};
  // The last call this rank refused before it started (its own arguments were wrong, which
  // its peers' calls cannot know), so that a peer of this host left waiting at that number
  // says why in its stall and timeout messages, not only that the rank is late. A seqlock of
  // atomics: refusalVersion is odd while the fields after it change.
  static constexpr size_t kRefusalWords = 30;
  std::atomic<uint64_t> refusalVersion{0};
  std::atomic<uint64_t> refused{0};      // the number that call would have had; 0: none
  std::atomic<uint32_t> refusedKind{0};  // its kind (stallKindLabel)
  std::atomic<uint64_t> refusal[kRefusalWords] = {};  // its message, NUL-padded
  void publishRefusal(uint64_t seq, uint32_t kind, const char* why);
  // When this rank's last refusal is still its last act (it has entered no call of that number
  // or later since): its message, with its number in *number and kind in *kind; else "" (also
  // while it is rewritten).
  std::string latestRefusal(uint64_t* number, uint32_t* kind) const;
  // The same for a refusal of call number seq only.
  std::string refusalOf(uint64_t seq, uint32_t* kind) const {
    uint64_t number = 0;
    std::string why = latestRefusal(&number, kind);
    return number == seq ? why : "";
  }
};
static_assert(sizeof(CallPosition) <= ShmSegment::kOwnerAreaBytes);

// The CallPosition in a segment's owner area (zeroed there when the segment is made).
inline CallPosition* callPosition(const ShmSegment& segment) {
  return std::launder(static_cast<CallPosition*>(segment.ownerArea()));
}

// The kind of a call in reports and positions: a Collective's value + 1, 0 for a send/recv group.
const char* stallKindLabel(uint32_t kind);

// One rank's report of its stalled call.
struct StallReport {
  int rank = -1;
  uint64_t seq = 0;
  uint32_t kind = 0;  // stallKindLabel
  uint64_t bytes = 0;
  int waitingOn = -1;  // the peer it waits on, -1 none
};

class StallBoard {
 public:
  // Rank 0's board: listens for reports. Fails (braidSystemError) if no socket can listen.
  static braidResult_t createRoot(const uint8_t secret[32], int nranks,
                                  std::unique_ptr<StallBoard>* out);
  // Another rank's board: reports to rank 0 at `rootAddress` ("a.b.c.d:port").
  static std::unique_ptr<StallBoard> forPeer(const std::string& rootAddress,
                                             const uint8_t secret[32]);
  ~StallBoard();
  StallBoard(const StallBoard&) = delete;
  StallBoard& operator=(const StallBoard&) = delete;

  // Rank 0: its listening address, for its card.
  const std::string& address() const { return address_; }
  // Rank 0: the peers' positions (by rank, null where not mapped), read for a rank that sent
  // no report.
  void setPositions(std::vector<const CallPosition*> positions) {
    positions_ = std::move(positions);
  }

  // The calling rank's call has stalled (once per call): a peer reports to rank 0; rank 0
  // starts gathering for `windowSec`.
  void stalled(const StallReport& mine, double windowSec);
  // Rank 0 while it waits after stalled(): takes reports; logs the summary once the
  // window has passed.
  void poll();
  // The call ended: a peer closes its report; rank 0 drops what it gathered.
  void callEnded();

 private:
  StallBoard() = default;
  void takeReports();
  std::string summary() const;
  const CallPosition* positionOf(int r) const {
    return r >= 0 && static_cast<size_t>(r) < positions_.size() ? positions_[static_cast<size_t>(r)]
                                                                : nullptr;
  }

  bool root_ = false;
  int fd_ = -1;  // rank 0: listening socket; others: the open report, -1 when none
  std::string address_;
  uint8_t secret_[32] = {};
  std::vector<const CallPosition*> positions_;
  // Rank 0, during a stalled call:
  bool gathering_ = false;
  bool printed_ = false;
  std::chrono::steady_clock::time_point until_;
  StallReport mine_;
  std::vector<StallReport> reports_;  // by rank; rank -1: none
};

}  // namespace braid
