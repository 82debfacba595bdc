// Fabric's accessors (algorithms/cost.h).
#include "algorithms/cost.h"

#include <algorithm>
#include <cstdio>

namespace braid {

int Fabric::nhosts() const {
  int h = 0;
  for (int x : hostOf) h = std::max(h, x + 1);
  return h;
}

int Fabric::ranksPerHost() const {
  std::vector<int> per(nhosts(), 0);
  for (int x : hostOf) ++per[x];
  return per.empty() ? 0 : *std::max_element(per.begin(), per.end());
}

std::string Fabric::describe() const {
  char between[160] = "";
  if (nhosts() > 1)
    std::snprintf(between, sizeof(between),
                  "; between hosts %.2f us, %d NIC(s) of %.2f GB/s per host", inter.latency_us,
                  nicsPerHost, inter.bw_gbs);
  char buf[400];
  std::snprintf(buf, sizeof(buf),
                "%d ranks on %d host(s); within a host %.2f us, %.1f GB/s%s; reduce %.1f GB/s, "
                "copy %.1f GB/s, step %.2f us, chunk %zu B",
                nranks(), nhosts(), intra.latency_us, intra.bw_gbs, between, reduce_gbs, copy_gbs,
                step_overhead_us, chunk_bytes);
  return buf;
}

Fabric Fabric::forCall(size_t bytesPerRank) const {
  Fabric f = *this;
  if (intra_cache_bw_gbs > 0 && cache_bytes > 0 && bytesPerRank <= cache_bytes) {
    // The copies stay in the cores' caches: the host's memory system is not what they share.
    if (f.host_bw_gbs > 0) f.host_bw_gbs *= intra_cache_bw_gbs / f.intra.bw_gbs;
    f.intra.bw_gbs = intra_cache_bw_gbs;
  }
  return f;
}

Fabric uniformFabric(int hosts, int ranksPerHost, LinkCost intra, LinkCost inter) {
  Fabric f;
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < ranksPerHost; ++l) f.hostOf.push_back(h);
  f.intra = intra;
  f.inter = inter;
  return f;
}

}  // namespace braid
