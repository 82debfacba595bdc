// Ranks as hosts of equal size: a rank's host and its local index (its place among its host's
// ranks in rank order), from CollArgs::hostOf. The two-level algorithms (hierarchical.cc)
// run their phases over these groups.
#pragma once

#include <vector>

#include "algorithms/schedule.h"

namespace braid {

// Why CollArgs::hostOf cannot drive these algorithms, or nullptr. O(nranks).
const char* supportsHierarchical(const CollArgs& a);

// Ranks as H hosts of L ranks each (a layout supportsHierarchical accepted).
struct HostLayout {
  int hosts = 1;                     // H
  int local = 1;                     // L: ranks per host
  int host = 0;                      // this rank's host
  int li = 0;                        // this rank's local index
  std::vector<int> members;          // [g * L + i]: the rank of local index i on host g
  std::vector<int> hostOf, localOf;  // per rank

  int at(int g, int i) const { return members[static_cast<size_t>(g) * local + i]; }
  // Whether host g's ranks are consecutive in rank order (at(g, i) == at(g, 0) + i).
  bool contiguous(int g) const {
    for (int i = 1; i < local; ++i)
      if (at(g, i) != at(g, 0) + i) return false;
    return true;
  }
};

// The call's layout; args.hostOf null is one host of every rank.
HostLayout makeLayout(const CollArgs& a);

}  // namespace braid
