#include "algorithms/schedule.h"

namespace braid {

void appendTreeAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
