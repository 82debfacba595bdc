// gather_perf: nccl-tests' gather_perf on Braid (flags and table: see common.h).
//
// Each rank's count / n elements land in its block of the root's receive buffer (-r picks
// the root, -r all each in turn); in place, a rank's block already lies at its slot of
// its own receive buffer. algbw counts the n blocks the root ends with; busbw = algbw *
// (n - 1) / n, since the root receives all but its own block (nccl-tests'
// gather.cu). Blocks are compared bit for bit, and every other rank's receive buffer must
// come back unchanged (braid.h: it is used only on the root).
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  if (args.rank == args.root) braid::perf::FillBlocksByRank(expected, c, args);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int root, braidComm_t comm, braidStream_t stream) {
  return braidGather(send, recv, c.param_count, dtype, root, comm, stream);
}

const braid::perf::Collective kGather = {
    .name = "gather_perf",
    .collective = "gather",
    .call = "braidGather",
    .has_algorithms = true,
    .uses_op = false,
    .uses_root = true,
    .in_place = true,
    .bitwise = true,
    .counts = braid::perf::GatherCounts,
    .busbw_factor = braid::perf::BusBwAllButOwn,
    .fill_send = braid::perf::FillSendPattern,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kGather); }
