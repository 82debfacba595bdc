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
// elements or counts a rank twice, a read of a buffer element that was never written, a
// write to a buffer the collective must not touch (e.g. recv off root for reduce), an
// output element with the wrong symbol, or steps left that can never run (deadlock,
// naming the ranks and steps that wait).
#pragma once

#include <functional>
#include <string>

#include "algorithms/schedule.h"

namespace braid {

struct VerifyResult {
  bool ok = true;
  std::string message;  // empty when ok
};

// Verifies `algo` for the call described by `argsForRank(r)` on every rank r
// (args.rank/nranks are filled in by the caller of argsForRank). inPlace selects the
// collective's in-place aliasing (schedule.h); collectives without one ignore it.
VerifyResult verifySchedules(const AlgorithmInfo& algo, int nranks,
                             const std::function<CollArgs(int rank)>& argsForRank, bool inPlace);

}  // namespace braid
