// Shared-memory transport between ranks of one host (processes or threads).
//
// Each rank creates one POSIX shared-memory segment (random name, mode 0600) that holds
// one single-producer single-consumer FIFO per peer (name "/braid-PID-RANDOM"): the peer writes
// pieces into it, this rank reads them. Peers map the segment during init; the creator unlinks it
// right after the bootstrap barrier that says every peer has mapped it, so /dev/shm holds nothing
// once init returns (and nothing if a rank dies later).
//
// FIFO layout: a head counter (written by the sender only) and a tail counter (written by
// the receiver only), each on its own cache line, then `slots` cells of a 64-byte header
// {seq, bytes} and `slotBytes` of payload. Publication is a release store of head, matched
// by an acquire load: no lock and no system call on the data path.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "braid/braid.h"
#include "transport/transport.h"

namespace braid {

class ShmSegment {
 public:
  // Creates a segment with `nfifos` FIFOs of `slots` x `slotBytes`.
  static braidResult_t create(int nfifos, int slots, size_t slotBytes,
                              std::unique_ptr<ShmSegment>* out);
  // Maps a peer's segment by name.
  static braidResult_t open(const std::string& name, std::unique_ptr<ShmSegment>* out);
  ~ShmSegment();

  const std::string& name() const { return name_; }
  void unlink();  // idempotent; only the creator unlinks
  // FIFO `index` inside this segment.
  void* fifo(int index) const;
  int slots() const;
  size_t slotBytes() const;
  // The owner's doorbell: peers ring it when they publish to or drain from its FIFOs.
  Doorbell* doorbell() const;

 private:
  ShmSegment() = default;
  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
  bool linked_ = false;
};

// One direction of one pair: sender side writes into the FIFO in the receiver's segment.
class ShmConnection : public Connection {
 public:
  // sendFifo: my FIFO inside the peer's segment, laid out by the peer (slots x slotBytes);
  // recvFifo: the peer's FIFO inside mine, laid out by me (recvSlots x recvSlotBytes), so
  // ranks with different BRAID_BUFFSIZE / BRAID_CHUNKSIZE still agree on every address.
  // peerBell: the peer's doorbell, rung after each publish and each freed slot.
  ShmConnection(void* sendFifo, int slots, size_t slotBytes, void* recvFifo, int recvSlots,
                size_t recvSlotBytes, Doorbell* peerBell);

  void* sendReserve(size_t* capacity) override;
  void sendCommit(size_t bytes, uint64_t seq) override;
  const void* recvPeek(size_t* bytes, uint64_t* seq) override;
  void recvRelease() override;
  size_t maxPiece() const override { return slotBytes_; }
  const char* name() const override { return "shm"; }

  struct Fifo;  // public so the segment can initialise its counters

 private:
  Fifo* send_;
  Fifo* recv_;
  Doorbell* peerBell_;
  int slots_;  // of the FIFO this rank sends into
  size_t slotBytes_;
  int recvSlots_;  // of the FIFO this rank receives from
  size_t recvSlotBytes_;
  uint64_t sendHead_ = 0;  // local copies: each counter has one writer
  uint64_t sendTailSeen_ = 0;
  uint64_t recvTail_ = 0;
  uint64_t recvHeadSeen_ = 0;
};

}  // namespace braid
