#include "algorithms/schedule.h"

namespace braid {

void appendPairwiseAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
