#include "algorithms/schedule.h"

namespace braid {

void appendRhdAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
