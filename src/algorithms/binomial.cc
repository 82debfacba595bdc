#include "algorithms/schedule.h"

namespace braid {

void appendBinomialAlgorithms(std::vector<AlgorithmInfo>* table) { (void)table; }

}  // namespace braid
