// The schedule verifier: runs every rank's schedule symbolically, moving no data, and
// proves that the algorithm delivers its collective's meaning (schedule.h's buffer
// conventions) without deadlock, for any rank count.
//
// Each element holds a symbol: which send-buffer element it came from and the set of ranks
// whose contributions were combined into it (two 64-bit random-sum hashes and a count, so
// 1024 ranks cost 32 bytes per element), plus whether AVG's division was applied. Sends and
// receives between a pair match in posting order, as the transports deliver them; a step
// runs once its dependencies have run. The verifier reports the first problem: a receive
// that does not match the message sent (size), a reduction that combines different
// elements or counts a rank twice, AVG dividing anything but the full reduction or
// dividing twice, a read of a buffer element that was never written, a write to a buffer
// the collective must not touch (the caller's send buffer; recv off root for reduce), a
// step out of its buffer's bounds, two steps of a rank touching one element unordered (a
// race), a message nobody receives, an output element with the wrong symbol (alltoallv:
// also a write between the blocks), a barrier rank that can leave before another
// entered, or steps left that can never run (deadlock, naming up to 5 ranks, the step each
// waits at and why). Messages start with the call: algorithm, collective, nranks, count,
// op, root, pieceElems, in place.
#pragma once

#include <functional>
#include <string>

#include "algorithms/schedule.h"

namespace braid {

struct VerifyResult {
  bool ok = true;
  std::string message;  // empty when ok
};

struct VerifyOptions {
  // How many pieces (CollArgs::pieceElems elements each) one connection holds before a
  // send must wait for the receiver to drain it, as the shm transport's slots
  // (BRAID_BUFFSIZE / BRAID_CHUNKSIZE, never fewer than 2). A step of c elements occupies
  // max(1, ceil(c / pieceElems)) slots. The default, 2, is the smallest any configuration
  // allows, so a schedule that passes cannot deadlock on any buffer size; 0 models
  // unbounded buffers (a send always completes at once).
  size_t connectionSlots = 2;
};

// Verifies `algo` for the call described by `argsForRank(r)` on every rank r (the
// verifier sets args.rank and args.nranks itself). inPlace selects the collective's
// in-place aliasing: all-reduce, broadcast (root) and reduce (root) send == recv,
// reduce-scatter recv = send + rank*count, all-gather send = recv + rank*count; the other
// collectives have none and ignore it. Besides the result, it checks that no two steps of
// a rank touch one element (one of them writing) unless a dependency, queue order or chain
// of messages orders them, so the result holds for every order the executor may pick.
VerifyResult verifySchedules(const AlgorithmInfo& algo, int nranks,
                             const std::function<CollArgs(int rank)>& argsForRank, bool inPlace,
                             const VerifyOptions& options = {});

}  // namespace braid
