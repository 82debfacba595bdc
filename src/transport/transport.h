// Transport interface: moves bytes from one rank to one peer, in order.
//
// DESIGN.md sketches isend/irecv requests; Braid's connections instead lend their own
// buffers (reserve/commit on the send side, peek/release on the receive side), so the
// executor can reduce straight out of a received buffer with no staging copy. A
// transport that has no shared buffer (tcp) stages into its own and offers the same calls.
// Every piece carries the sender's message sequence number, so ranks that disagree about
// what they exchange get an error instead of mixed data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace braid {

// Lets a rank sleep while it waits on its connections, and its peers wake it: a peer that
// publishes a piece or frees a slot rings the waiting rank's doorbell. Lives in shared
// memory (a futex word), so it works between processes and between threads alike.
// Protocol (no lost wake-ups): the sleeper reads the ticket, sets `sleeping`, re-checks
// its queues, then waits while the ticket is unchanged; a ringer publishes, then (after a
// full fence) bumps the ticket and wakes only if `sleeping` is set: a fence and a load on
// the fast path.
// A doorbell in one process's own memory may instead be an eventfd (eventFd >= 0): the
// network proxy sleeps in epoll, on its sockets and that fd at once.
struct Doorbell {
  std::atomic<uint32_t> ticket{0};
  std::atomic<uint32_t> sleeping{0};
  int eventFd = -1;

  void ring();
  uint32_t read() const { return ticket.load(std::memory_order_acquire); }
  // Waits until the ticket moves past `seen` or timeoutUs pass.
  void wait(uint32_t seen, long timeoutUs);
};

class Connection {
 public:
  virtual ~Connection() = default;

  // Send side. Returns a buffer of *capacity bytes that the caller may fill, or nullptr
  // when the peer has not yet drained enough (try again later).
  virtual void* sendReserve(size_t* capacity) = 0;
  // Publishes `bytes` written into the reserved buffer as part of message `seq`.
  virtual void sendCommit(size_t bytes, uint64_t seq) = 0;
  // Copies up to `bytes` at src into the next free slot and publishes them as part of
  // message `seq` (sendReserve, memcpy, sendCommit; a connection may place small pieces
  // better). Returns false when no slot is free; else *taken is the bytes sent (0 for 0).
  virtual bool sendCopy(const void* src, size_t bytes, uint64_t seq, size_t* taken) {
    size_t capacity = 0;
    void* buf = sendReserve(&capacity);
    if (!buf) return false;
    *taken = bytes < capacity ? bytes : capacity;
    if (*taken > 0) std::memcpy(buf, src, *taken);
    sendCommit(*taken, seq);
    return true;
  }

  // Receive side. The next piece, or nullptr if none has arrived yet.
  virtual const void* recvPeek(size_t* bytes, uint64_t* seq) = 0;
  // Frees the piece returned by the last recvPeek.
  virtual void recvRelease() = 0;
  // Whether the piece the last recvPeek returned lies in another process's memory (an
  // in-place piece of a process on this host): recvPeek's pointer is then not readable here
  // and recvPull copies its bytes [offset, offset + n) into dst. Returns 0, or the errno of
  // the read (ESRCH: the sender exited).
  virtual bool recvRemote() const { return false; }
  // Whether the piece the last recvPeek returned is CUDA device memory (the CUDA IPC
  // transport): readable by the device's copies and kernels only.
  virtual bool recvOnDevice() const { return false; }
  virtual int recvPull(void* dst, size_t offset, size_t n) {
    (void)dst, (void)offset, (void)n;
    return 0;
  }

  // Largest piece one commit can carry.
  virtual size_t maxPiece() const = 0;
  virtual const char* name() const = 0;
  // In-place sends: instead of copying, publish a piece that points at src, which must stay
  // unchanged until sendRetired(ticket). Offered where the far end can read this process's
  // memory: a thread of it (the network proxy, or a rank run as a thread), a process of this
  // host that reads with process_vm_readv, or one that maps src's braidMemAllocHost
  // allocation (single copy), or, for CUDA device memory, a rank of this host that opens it
  // (CUDA IPC). sendsInPlace says whether a step of `bytes` at src goes in
  // place (else it is copied); `large`: the call outgrows the cache, the only calls whose
  // braidMemAllocHost buffers go in place. sendInPlace returns false when no slot is free
  // (try again).
  virtual bool sendsInPlace(const void* src, size_t bytes, bool large) const {
    (void)src, (void)bytes, (void)large;
    return false;
  }
  virtual bool sendInPlace(const void* src, size_t bytes, uint64_t seq, uint64_t* ticket) {
    (void)src, (void)bytes, (void)seq, (void)ticket;
    return false;
  }
  // In-place sends of CUDA device memory (the CUDA IPC transport): whether a step of `bytes`
  // at src goes in place (the far end opens this process's device memory, and src's can be
  // exported; else the caller copies it through host memory), and the send of one piece of
  // the step last accepted, which returns false when no slot is free. sameStep: the step
  // asked before, and part of it went (the answer may be kept from then).
  virtual bool sendsDeviceInPlace(const void* src, size_t bytes, bool sameStep) {
    (void)src, (void)bytes, (void)sameStep;
    return false;
  }
  virtual bool sendDeviceInPlace(const void* src, size_t bytes, uint64_t seq, uint64_t* ticket) {
    (void)src, (void)bytes, (void)seq, (void)ticket;
    return false;
  }
  // Whether the far end is done reading the piece published as `ticket`.
  virtual bool sendRetired(uint64_t ticket) {
    (void)ticket;
    return true;
  }

  // Why the connection can carry nothing more (the peer's host closed or reset it), or
  // nullptr while it works. Checked by a rank that waits on the peer.
  virtual const char* failure() const { return nullptr; }
  // This rank gives the connection up (braidCommAbort, or a call that failed): a peer that
  // waits on it sees failure() instead of waiting for its timeout. `blamed` is the rank whose
  // loss made this rank give up (-1: an abort or another error): the peer's failure() names
  // it. Connections over the network need not: their sockets close.
  virtual void abandon(int blamed) { (void)blamed; }
  // The rank the far end blamed when it gave the connection up (-1: none, or it did not).
  virtual int blamed() const { return -1; }
};

}  // namespace braid
