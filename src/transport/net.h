// Network backends, and the proxy thread that carries a rank's connections over them.
//
// A backend has the shape of NCCL's net plugin (ncclNet_t): it connects the ranks that
// are not reached through shared memory, then moves whole pieces with non-blocking isend /
// irecv / test. Backends never see the executor: the proxy (net_proxy.h) drains each
// connection's local send FIFO into isends and fills its receive FIFO from irecvs, so to
// the executor a network peer is one more FIFO connection (transport.h), and a rank waiting
// on shm and network peers at once sleeps on its one doorbell.
//
// Threading: connect() runs on the rank's thread during init; everything else only on the
// proxy thread, so a backend needs no locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/socket.h"
#include "braid/braid.h"

namespace braid {

class NetBackend {
 public:
  virtual ~NetBackend() = default;
  virtual const char* name() const = 0;  // "tcp", "ucx"
  // What peers need to reach this rank, carried in the init card: printable, no newline.
  virtual std::string handle() const = 0;
  // Connects both directions with every rank p for which remote[p] is true, given every
  // rank's handle(); collective over those ranks, bounded by deadline. Errors name the peer.
  virtual braidResult_t connect(const std::vector<std::string>& handles,
                                const std::vector<char>& remote, Deadline deadline) = 0;
  // Posts a send of `bytes` at data to `peer`. `piece` numbers the pieces of one direction
  // 0, 1, 2, ...; sends are posted in piece order, receives in any order, and the
  // receiver's irecv of the same number gets the piece.
  // *req is an opaque request, valid until test() reports it done.
  virtual braidResult_t isend(int peer, const void* data, size_t bytes, uint64_t piece,
                              void** req) = 0;
  // The same for a piece whose first headBytes lie at head and the rest (bytes) at data:
  // the receiver gets them as one piece. Only where gatherSends() is true.
  virtual bool gatherSends() const { return false; }
  virtual braidResult_t isendGather(int peer, const void* head, size_t headBytes, const void* data,
                                    size_t bytes, uint64_t piece, void** req) {
    (void)peer, (void)head, (void)headBytes, (void)data, (void)bytes, (void)piece, (void)req;
    return braidInternalError;
  }
  // Posts a receive of piece number `piece` from `peer` into data (at most capacity bytes;
  // a larger piece is an error naming the peer).
  virtual braidResult_t irecv(int peer, void* data, size_t capacity, uint64_t piece,
                              void** req) = 0;
  // Whether req has completed; when it has, the request is freed and *bytes (may be null)
  // receives the piece's size. A lost peer (EOF, reset, transport error) is
  // braidRemoteError naming the peer.
  virtual braidResult_t test(void* req, bool* done, size_t* bytes) = 0;
  // Moves outstanding I/O without blocking; *progressed is set when anything moved.
  virtual braidResult_t progress(bool* progressed) = 0;
  // A file descriptor that turns readable when network activity may let progress() move,
  // or -1 (the proxy then polls). arm() is called before sleeping on it and returns false
  // when there is activity already (the proxy then does not sleep).
  virtual int waitFd() = 0;
  virtual bool arm() = 0;
  // Why `peer` can send nothing more when it closed its side cleanly (its process exited or
  // destroyed its communicator), else nullptr. Not an error by itself: the rank turns it
  // into one only if it still waits on that peer. Backends that cannot tell return nullptr.
  virtual const char* peerClosed(int peer) const {
    (void)peer;
    return nullptr;
  }
};

// Sockets: BRAID_NSOCKS_PERPEER sockets per direction and peer, pieces striped across them.
// nsocks: sockets per peer and direction, the same on every rank (0: BRAID_NSOCKS_PERPEER).
braidResult_t createTcpBackend(int rank, int nranks, const uint8_t secret[32],
                               std::unique_ptr<NetBackend>* out, int nsocks = 0);
// UCX through UCP tag matching on one worker. braidInvalidUsage, naming the build option,
// when Braid was built without UCX.
braidResult_t createUcxBackend(int rank, int nranks, std::unique_ptr<NetBackend>* out);
// Whether this Braid was built with UCX (createUcxBackend can succeed).
bool ucxBuilt();

}  // namespace braid
