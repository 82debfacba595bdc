// What the verifier's tests share: which collectives reduce and which have a root, and a
// pieceElems past any count here (the whole vector in one piece).
#pragma once

#include <cstddef>

#include "algorithms/schedule.h"

namespace braid::verifier_cases {

inline bool reducing(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}
inline bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

inline constexpr size_t kOnePiece = size_t{1} << 30;

}  // namespace braid::verifier_cases
