// alltoall_perf: nccl-tests' alltoall_perf on Braid (flags and table: see common.h).
//
// Each rank sends block j of count / n elements to rank j and receives block i from rank
// i. algbw counts the n blocks each rank sends; busbw = algbw * (n - 1) / n, since one
// block stays local (nccl-tests doc/PERFORMANCE.md). All-to-all has no in-place form
// (braid.h), so the in-place columns say N/A. Blocks are compared bit for bit.
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

CollCounts Counts(size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.send_count = count / n * n;
  c.recv_count = count / n * n;
  c.param_count = count / n;
  return c;
}

double BusBwFactor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

// Element k of block j of rank i's input is pattern element j * block + k of rank i.
void FillSend(void* send, const CollCounts& c, const CheckArgs& args) {
  braid::perf::FillPattern(send, c.send_count, 0, args, args.rank);
}

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  auto* out = static_cast<char*>(expected);
  const size_t block = c.param_count;
  const size_t block_bytes = block * braid::perf::ElementSize(args.dtype);
  for (int i = 0; i < args.nranks; ++i) {
    braid::perf::FillPattern(out + i * block_bytes, block, block * args.rank, args, i);
  }
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int /*root*/, braidComm_t comm, braidStream_t stream) {
  return braidAllToAll(send, recv, c.param_count, dtype, comm, stream);
}

const braid::perf::Collective kAllToAll = {
    .name = "alltoall_perf",
    .collective = "alltoall",
    .call = "braidAllToAll",
    .has_algorithms = true,
    .uses_op = false,
    .uses_root = false,
    .in_place = false,
    .bitwise = true,
    .counts = Counts,
    .busbw_factor = BusBwFactor,
    .fill_send = FillSend,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllToAll); }
