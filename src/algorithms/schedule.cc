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
  static const std::vector<AlgorithmInfo> table = [] {
    std::vector<AlgorithmInfo> t;
    appendRingAlgorithms(&t);
    appendTreeAlgorithms(&t);
    appendRecursiveDoublingAlgorithms(&t);
    appendRhdAlgorithms(&t);
    appendBinomialAlgorithms(&t);
    appendBruckAlgorithms(&t);
    appendPairwiseAlgorithms(&t);
    appendScatterAllGatherAlgorithms(&t);
    appendDirectAlgorithms(&t);
    return t;
  }();
  return table;
}

const AlgorithmInfo* defaultAlgorithm(const CollArgs& args, size_t elemSize) {
  (void)elemSize;
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == args.coll && !unsupportedReason(a, args)) return &a;
  return nullptr;
}

const AlgorithmInfo* findAlgorithm(Collective coll, const std::string& name) {
  for (const AlgorithmInfo& a : algorithms())
    if (a.coll == coll && !strcasecmp(a.name, name.c_str())) return &a;
  return nullptr;
}

}  // namespace braid
