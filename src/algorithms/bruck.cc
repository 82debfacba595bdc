#include "algorithms/schedule.h"

namespace braid {

void appendBruckAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
