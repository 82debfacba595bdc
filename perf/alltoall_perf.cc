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

// Element k of block j of rank i's input is pattern element j * block + k of rank i.
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
    .counts = braid::perf::AllToAllCounts,
    .busbw_factor = braid::perf::BusBwAllButOwn,
    .fill_send = braid::perf::FillSendPattern,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllToAll); }
