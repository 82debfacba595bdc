// scatter_perf: nccl-tests' scatter_perf on Braid (flags and table: see common.h).
//
// Block j (count / n elements) of the root's send buffer lands on rank j (-r picks the
// root, -r all each in turn); in place, a rank's block is received at its slot of the
// buffer the root sends from. algbw counts the n blocks the root sends; busbw = algbw *
// (n - 1) / n, since one block stays on the root (nccl-tests' scatter.cu; its recent
// 16-byte rounding of the block is for GPU kernels and is not applied here). Blocks are
// compared bit for bit.
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

// Only the root's input is read (braid.h), so only the root writes one, as nccl-tests does.
void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  braid::perf::FillPattern(expected, c.recv_count, c.recv_count * args.rank, args, args.root);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int root, braidComm_t comm, braidStream_t stream) {
  return braidScatter(send, recv, c.param_count, dtype, root, comm, stream);
}

const braid::perf::Collective kScatter = {
    .name = "scatter_perf",
    .collective = "scatter",
    .call = "braidScatter",
    .has_algorithms = true,
    .uses_op = false,
    .uses_root = true,
    .in_place = true,
    .bitwise = true,
    .counts = braid::perf::ScatterCounts,
    .busbw_factor = braid::perf::BusBwAllButOwn,
    .fill_send = braid::perf::FillSendRootPattern,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kScatter); }
