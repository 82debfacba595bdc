// reduce_scatter_perf: nccl-tests' reduce_scatter_perf on Braid (flags and table: see
// common.h).
//
// Each rank sends n blocks of count / n elements and receives the reduction of its own
// block; in place, it reads its result at its block of the send buffer. algbw counts the
// n blocks each rank sends; busbw = algbw * (n - 1) / n, since a rank sends all but the
// block it keeps (nccl-tests doc/PERFORMANCE.md).
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  braid::perf::FillReduced(expected, c.recv_count, c.recv_count * args.rank, args);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t op, int /*root*/, braidComm_t comm, braidStream_t stream) {
  return braidReduceScatter(send, recv, c.param_count, dtype, op, comm, stream);
}

const braid::perf::Collective kReduceScatter = {
    .name = "reduce_scatter_perf",
    .collective = "reducescatter",
    .call = "braidReduceScatter",
    .has_algorithms = true,
    .uses_op = true,
    .uses_root = false,
    .in_place = true,
    .bitwise = false,
    .counts = braid::perf::ScatterCounts,
    .busbw_factor = braid::perf::BusBwAllButOwn,
    .fill_send = braid::perf::FillSendInput,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kReduceScatter); }
