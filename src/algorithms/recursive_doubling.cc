#include "algorithms/schedule.h"

namespace braid {

void appendRecursiveDoublingAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
