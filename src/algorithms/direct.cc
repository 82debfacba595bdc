#include "algorithms/schedule.h"

namespace braid {

void appendDirectAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
