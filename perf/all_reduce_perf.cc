// all_reduce_perf: nccl-tests' all_reduce_perf on Braid (flags and table: see common.h).
//
// Every rank sends and receives count elements; in place, send and receive are the same
// buffer. busbw = algbw * 2 (n - 1) / n: a ring all-reduce moves 2 (n - 1) / n of the
// data over each rank's link (nccl-tests doc/PERFORMANCE.md).
#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

double BusBwFactor(int nranks) { return 2.0 * (nranks - 1) / nranks; }

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  braid::perf::FillReduced(expected, c.recv_count, 0, args);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t op, int /*root*/, braidComm_t comm, braidStream_t stream) {
  return braidAllReduce(send, recv, c.param_count, dtype, op, comm, stream);
}

const braid::perf::Collective kAllReduce = {
    .name = "all_reduce_perf",
    .collective = "allreduce",
    .call = "braidAllReduce",
    .has_algorithms = true,
    .uses_op = true,
    .uses_root = false,
    .in_place = true,
    .bitwise = false,
    .counts = braid::perf::WholeCounts,
    .busbw_factor = BusBwFactor,
    .fill_send = braid::perf::FillSendInput,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllReduce); }
