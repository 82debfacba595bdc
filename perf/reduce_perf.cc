// reduce_perf: nccl-tests' reduce_perf on Braid (flags and table: see common.h).
//
// Every rank's count elements are reduced into the root's receive buffer (-r picks the
// root, -r all each in turn); in place, send and receive are the same buffer. busbw =
// algbw: a pipelined reduce moves the whole vector over each rank's link once (nccl-tests
// doc/PERFORMANCE.md). The check also requires every other rank's receive buffer to come
// back unchanged (braid.h: it is written only on the root).
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  if (args.rank == args.root) braid::perf::FillReduced(expected, c.recv_count, 0, args);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t op, int root, braidComm_t comm, braidStream_t stream) {
  return braidReduce(send, recv, c.param_count, dtype, op, root, comm, stream);
}

const braid::perf::Collective kReduce = {
    .name = "reduce_perf",
    .collective = "reduce",
    .call = "braidReduce",
    .has_algorithms = true,
    .uses_op = true,
    .uses_root = true,
    .in_place = true,
    .bitwise = false,
    .counts = braid::perf::WholeCounts,
    .busbw_factor = braid::perf::BusBwOne,
    .fill_send = braid::perf::FillSendInput,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kReduce); }
