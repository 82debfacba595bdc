// The building blocks of the perf binaries' Collective descriptors (common.h): nccl-tests'
// getCollByteCount shapes, its busbw factors, and the fills they share.
#include <cstddef>

#include "common.h"
#include "verifiable.h"

namespace braid::perf {

CollCounts WholeCounts(size_t count, int /*nranks*/) {
  CollCounts c;
  c.send_count = c.recv_count = c.param_count = count;
  return c;
}

CollCounts GatherCounts(size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.send_count = c.param_count = c.send_inplace_offset = count / n;
  c.recv_count = count / n * n;
  return c;
}

CollCounts ScatterCounts(size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.send_count = count / n * n;
  c.recv_count = c.param_count = c.recv_inplace_offset = count / n;
  return c;
}

CollCounts AllToAllCounts(size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.send_count = c.recv_count = count / n * n;
  c.param_count = count / n;
  return c;
}

double BusBwOne(int /*nranks*/) { return 1.0; }
double BusBwAllButOwn(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

void FillSendInput(void* send, const CollCounts& c, const CheckArgs& args) {
  FillInput(send, c.send_count, 0, args, args.rank);
}

void FillSendPattern(void* send, const CollCounts& c, const CheckArgs& args) {
  FillPattern(send, c.send_count, 0, args, args.rank);
}

void FillSendRootPattern(void* send, const CollCounts& c, const CheckArgs& args) {
  if (args.rank == args.root) FillPattern(send, c.send_count, 0, args, args.root);
}

void FillBlocksByRank(void* expected, const CollCounts& c, const CheckArgs& args) {
  auto* out = static_cast<char*>(expected);
  const size_t block_bytes = c.param_count * ElementSize(args.dtype);
  for (int j = 0; j < args.nranks; ++j)
    FillPattern(out + j * block_bytes, c.param_count, 0, args, j);
}

}  // namespace braid::perf
