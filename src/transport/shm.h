// Shared-memory transport between ranks of one host (processes or threads).
//
// Each rank creates one POSIX shared-memory segment (random name, mode 0600) that holds
// one single-producer single-consumer FIFO per peer (name "/braid-PID-RANDOM"): the peer writes
// pieces into it, this rank reads them. Peers map the segment during init; the creator unlinks it
// right after the bootstrap barrier that says every peer has mapped it, so /dev/shm holds nothing
// once init returns (and nothing if a rank dies later).
//
// The FIFOs and the connection over them are in fifo.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "braid/braid.h"
#include "transport/fifo.h"
#include "transport/transport.h"

namespace braid {

class ShmSegment {
 public:
  // Creates a segment with `nfifos` FIFOs of `slots` x `slotBytes`: the creator's inbound
  // FIFOs, which its peers write and it reads. numaNode >= 0: the creator's NUMA node, where
  // the segment's pages are placed (MPOL_PREFERRED) whoever touches them first; -1 leaves
  // the process's policy (first touch: usually the sender's node, as senders write first).
  static braidResult_t create(int nfifos, int slots, size_t slotBytes, int numaNode,
                              std::unique_ptr<ShmSegment>* out);
  // Maps a peer's segment by name. quiet: a failure only returns its code (no message, no
  // log line), for a view that is merely nice to have.
  static braidResult_t open(const std::string& name, std::unique_ptr<ShmSegment>* out,
                            bool quiet = false);
  ~ShmSegment();

  const std::string& name() const { return name_; }
  const void* base() const { return base_; }  // where this process mapped it
  void unlink();                              // idempotent; only the creator unlinks
  // FIFO `index` inside this segment.
  void* fifo(int index) const;
  int slots() const;
  size_t slotBytes() const;
  // The owner's doorbell: peers ring it when they publish to or drain from its FIFOs.
  Doorbell* doorbell() const;
  // Room for what the owner's communicator publishes to the peers that map the segment
  // (core/stall.h's CallPosition: the call it is in, the last it finished, why it refused
  // one), kOwnerAreaBytes bytes, zero when the segment is made. The transport never reads it.
  static constexpr size_t kOwnerAreaBytes = 320;
  void* ownerArea() const;
  struct Mapping;  // shm.cc's, shared by the segments of one name in this process

 private:
  ShmSegment() = default;
  std::string name_;
  // The process's one mapping of the segment, shared by every ShmSegment of that name in it
  // (thread ranks): a second mapping of a FIFO at another address would hide its
  // release/acquire pairs from ThreadSanitizer, and costs address space.
  std::shared_ptr<Mapping> mapping_;
  void* base_ = nullptr;
  bool owner_ = false;
  bool linked_ = false;
};

// Whether process pid of this machine has exited: gone (ESRCH), or a zombie its parent has not
// reaped yet. False for pid <= 0.
bool processGone(int pid);
// Removes every segment in /dev/shm whose creator has died without unlinking it (killed
// during an init): braidCommShrink calls it once it has left a gone process of this machine
// out.
void sweepDeadSegments();

}  // namespace braid
