// broadcast_perf: nccl-tests' broadcast_perf on Braid (flags and table: see common.h).
//
// The root's count elements land on every rank (-r picks the root, -r all each in turn);
// in place, send and receive are the same buffer. busbw = algbw: a pipelined broadcast
// moves the whole vector over each rank's link once (nccl-tests doc/PERFORMANCE.md).
// Results are compared bit for bit against the root's pattern.
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

// Only the root's input is read (braid.h), so only the root writes one, as nccl-tests does.
void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  braid::perf::FillPattern(expected, c.recv_count, 0, args, args.root);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int root, braidComm_t comm, braidStream_t stream) {
  return braidBroadcast(send, recv, c.param_count, dtype, root, comm, stream);
}

const braid::perf::Collective kBroadcast = {
    .name = "broadcast_perf",
    .collective = "broadcast",
    .call = "braidBroadcast",
    .has_algorithms = true,
    .uses_op = false,
    .uses_root = true,
    .in_place = true,
    .bitwise = true,
    .counts = braid::perf::WholeCounts,
    .busbw_factor = braid::perf::BusBwOne,
    .fill_send = braid::perf::FillSendRootPattern,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kBroadcast); }
