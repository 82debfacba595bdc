// all_gather_perf: nccl-tests' all_gather_perf on Braid (flags and table: see common.h).
//
// Each rank contributes count / n elements and receives all n blocks; in place, a rank's
// block already lies at its slot of the receive buffer. algbw counts the n blocks each
// rank ends with; busbw = algbw * (n - 1) / n, since a rank receives all but its own
// block (nccl-tests doc/PERFORMANCE.md). Blocks are compared bit for bit.
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int /*root*/, braidComm_t comm, braidStream_t stream) {
  return braidAllGather(send, recv, c.param_count, dtype, comm, stream);
}

const braid::perf::Collective kAllGather = {
    .name = "all_gather_perf",
    .collective = "allgather",
    .call = "braidAllGather",
    .has_algorithms = true,
    .uses_op = false,
    .uses_root = false,
    .in_place = true,
    .bitwise = true,
    .counts = braid::perf::GatherCounts,
    .busbw_factor = braid::perf::BusBwAllButOwn,
    .fill_send = braid::perf::FillSendPattern,
    .fill_expected = braid::perf::FillBlocksByRank,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllGather); }
