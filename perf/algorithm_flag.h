/// @file algorithm_flag.h
/// Braid's -A flag of the perf binaries: `-A list` prints the algorithms of the binary's
/// collective (one a line, from braidListAlgorithms), `-A NAME` forces one (matched
/// case-insensitively, then respelled as the table spells it), `-A auto` is the default rule.
#ifndef BRAID_PERF_ALGORITHM_FLAG_H_
#define BRAID_PERF_ALGORITHM_FLAG_H_

#include "common.h"
#include "options.h"

namespace braid::perf {

/// Checks -A against coll's algorithms.
/// @return 0 after printing -A list's names, else -1 to go on; an unknown name, or a name
///         given to a binary without algorithms (sendrecv, hypercube), exits with status 2
///         naming the known ones.
int CheckAlgorithmFlag(Options* opts, const Collective& coll);

}  // namespace braid::perf

#endif  // BRAID_PERF_ALGORITHM_FLAG_H_
