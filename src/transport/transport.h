// Transport interface: moves bytes from one rank to one peer, in order.
//
// DESIGN.md sketches isend/irecv requests; Braid's connections instead lend their own
// buffers (reserve/commit on the send side, peek/release on the receive side), so the
// executor can reduce straight out of a received buffer with no staging copy. A
// transport that has no shared buffer (tcp) stages into its own and offers the same calls.
// Every piece carries the sender's message sequence number, so ranks that disagree about
// what they exchange get an error instead of mixed data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid {

class Connection {
 public:
  virtual ~Connection() = default;

  // Send side. Returns a buffer of *capacity bytes that the caller may fill, or nullptr
  // when the peer has not yet drained enough (try again later).
  virtual void* sendReserve(size_t* capacity) = 0;
  // Publishes `bytes` written into the reserved buffer as part of message `seq`.
  virtual void sendCommit(size_t bytes, uint64_t seq) = 0;

  // Receive side. The next piece, or nullptr if none has arrived yet.
  virtual const void* recvPeek(size_t* bytes, uint64_t* seq) = 0;
  // Frees the piece returned by the last recvPeek.
  virtual void recvRelease() = 0;

  // Largest piece one commit can carry.
  virtual size_t maxPiece() const = 0;
  virtual const char* name() const = 0;
};

}  // namespace braid
