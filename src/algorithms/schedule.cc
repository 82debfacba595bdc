#include "algorithms/schedule.h"

#include <strings.h>

namespace braid {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
  }
  return "unknown";
}

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> table = {
      {"ring", Collective::kAllReduce,
       "ring reduce-scatter then ring all-gather, chunked and pipelined; bandwidth-optimal "
       "2(n-1)/n bytes per byte (Patarasuk & Yuan 2009)",
       buildRingAllReduce},
  };
  return table;
}

const AlgorithmInfo* findAlgorithm(Collective coll, const std::string& name) {
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == coll && !strcasecmp(a.name, name.c_str())) return &a;
  return nullptr;
}

}  // namespace braid
