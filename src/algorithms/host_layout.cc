// Ranks as hosts of equal size (host_layout.h).
#include "algorithms/host_layout.h"

#include <algorithm>

namespace braid {

// Why CollArgs::hostOf cannot drive these algorithms, or nullptr. O(nranks).
const char* supportsHierarchical(const CollArgs& a) {
  if (!a.hostOf) return nullptr;
  std::vector<int> size;
  for (int r = 0; r < a.nranks; ++r) {
    const int g = a.hostOf[r];
    if (g < 0 || g > static_cast<int>(size.size()))
      return "the host layout (CollArgs::hostOf) must number hosts 0, 1, ... in order of first "
             "appearance in rank order";
    if (g == static_cast<int>(size.size())) size.push_back(0);
    ++size[g];
  }
  for (int s : size)
    if (s != size[0])
      return "the hierarchical algorithms need the same number of ranks on every host, and "
             "this communicator's hosts hold different numbers of ranks; use a one-level "
             "algorithm such as ring";
  return nullptr;
}

// The layout of a call that supportsHierarchical accepted.
HostLayout makeLayout(const CollArgs& a) {
  HostLayout l;
  const int n = a.nranks;
  l.hostOf.assign(n, 0);
  if (a.hostOf) l.hostOf.assign(a.hostOf, a.hostOf + n);
  for (int r = 0; r < n; ++r) l.hosts = std::max(l.hosts, l.hostOf[r] + 1);
  l.local = n / l.hosts;
  l.members.assign(n, 0);
  l.localOf.assign(n, 0);
  std::vector<int> fill(l.hosts, 0);
  for (int r = 0; r < n; ++r) {
    const int g = l.hostOf[r];
    l.localOf[r] = fill[g]++;
    l.members[static_cast<size_t>(g) * l.local + l.localOf[r]] = r;
  }
  l.host = l.hostOf[a.rank];
  l.li = l.localOf[a.rank];
  return l;
}

}  // namespace braid
