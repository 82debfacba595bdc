// Transport interface: moves bytes from one rank to one peer, in order.
//
// DESIGN.md sketches isend/irecv requests; Braid's connections instead lend their own
// buffers (a send copies into the connection's slot, or publishes a piece that points at the
// sender's memory; a receive returns the piece where it lies until released), so the
// executor can reduce straight out of a received buffer with no staging copy. A
// transport that has no shared buffer (tcp) stages into its own and offers the same verbs.
// Every piece carries the sender's message sequence number, so ranks that disagree about
// what they exchange get an error instead of mixed data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "braid/braid.h"

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

// What a send step publishes: its bytes copied into the connection's buffer, or a piece that
// points at the sender's memory (in place: the far end reads it there, and the sender keeps it
// unchanged until retired(ticket)), host or CUDA device memory.
enum class SendKind : uint8_t { kCopy, kInPlace, kDeviceInPlace };

// A send step as the connection is asked about it (Connection::sendKind): `bytes` at src,
// host memory unless `device`. `large`: the call outgrows the cache (host memory: the only
// calls whose braidMemAllocHost buffers go in place). `sameStep`: the step was asked about
// before and part of it went (the answer may be kept from then).
struct SendStep {
  const void* src;
  size_t bytes;
  bool device;
  bool large;
  bool sameStep;
};

// One piece of a send: up to `bytes` at src, as part of message `seq`, published as `kind`.
// kCopy: the connection copies what fits in one slot (maxPiece) with `copy`, or memcpy where
// copy is null (host memory); copy reads src where memcpy cannot (device memory) and returns
// braidSuccess or the error it set. In place: the piece is sent whole (bytes <= maxPiece).
struct SendPiece {
  const void* src;
  size_t bytes;
  uint64_t seq;
  SendKind kind;
  braidResult_t (*copy)(void* dst, const void* src, size_t bytes) = nullptr;
};

// What send did: `sent` false when no slot was free (try again; nothing happened). Else
// `taken` bytes went (0 for an empty piece), and an in-place piece's `ticket`, for retired().
struct Sent {
  bool sent = false;
  size_t taken = 0;
  uint64_t ticket = 0;
};

// Where a received piece lies (RecvPiece::where).
enum class PieceAt : uint8_t {
  kHere,    // readable at `data` by this process's cores
  kRemote,  // in another process of this host (an in-place piece): pull() reads it
  kDevice,  // CUDA device memory (the CUDA IPC transport): the device's copies and kernels only
};

// The next received piece (Connection::recv): `bytes` at data, message `seq`.
struct RecvPiece {
  const void* data = nullptr;
  size_t bytes = 0;
  uint64_t seq = 0;
  PieceAt where = PieceAt::kHere;
};

// Why a connection can carry nothing more, as its far end or its network left it.
struct ConnectionState {
  // nullptr while the connection works, else why not (the peer's host closed or reset it,
  // the peer gave it up). The text lives until the next call on this connection.
  const char* failure = nullptr;
  // The rank the far end blamed when it gave the connection up (-1: none, or it did not).
  int blamed = -1;
};

// A connection moves pieces to and from one peer, in order, in a few verbs: sendKind and send
// (with retired for in-place pieces), recv, pull and release, and its state (state, abandon).
// What does not change over its life is plain data: its name and its largest piece. Every
// verb is non-blocking and called by the rank's own thread, one call at a time.
class Connection {
 public:
  Connection(const char* name, size_t maxPiece) : name_(name), maxPiece_(maxPiece) {}
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The transport's name, for messages ("shm", "tcp", ...).
  const char* name() const { return name_; }
  // Bytes one piece carries at most (a slot's payload).
  size_t maxPiece() const { return maxPiece_; }

  // How a step goes: in place where the far end can read the sender's memory (a thread of
  // this process: the network proxy, or a rank run as a thread; a process of this host that
  // reads with process_vm_readv or maps src's braidMemAllocHost allocation; for device
  // memory, a rank of this host that opens it through CUDA IPC, where src can be exported),
  // else kCopy (device memory then goes through host memory). Never kInPlace for device
  // memory nor kDeviceInPlace for host memory.
  virtual SendKind sendKind(const SendStep& step) = 0;
  // Publishes one piece, or nothing when no slot is free (*out says which). Returns the
  // error of piece.copy, else braidSuccess.
  virtual braidResult_t send(const SendPiece& piece, Sent* out) = 0;
  // Whether the far end is done reading the in-place piece published as `ticket`.
  virtual bool retired(uint64_t ticket) = 0;

  // The next piece, true, or false when none has arrived yet. It stays the next until
  // release().
  virtual bool recv(RecvPiece* out) = 0;
  // A kRemote piece: copies its bytes [offset, offset + n) into dst. Returns 0, or the errno
  // of the read (ESRCH: the sender exited).
  virtual int pull(void* dst, size_t offset, size_t n) = 0;
  // Frees the piece the last recv returned.
  virtual void release() = 0;

  // Whether the connection still carries pieces, and whom its far end blamed. Checked by a
  // rank that waits on the peer.
  virtual ConnectionState state() const = 0;
  // This rank gives the connection up (braidCommAbort, or a call that failed): a peer that
  // waits on it sees state().failure instead of waiting for its timeout. `blamed` is the rank
  // whose loss made this rank give up (-1: an abort or another error): the peer's state names
  // it. Connections over the network need not: their sockets close.
  virtual void abandon(int blamed) = 0;

 private:
  const char* name_;
  size_t maxPiece_;
};

}  // namespace braid
