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

CollCounts Counts(size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  CollCounts c;
  c.send_count = count / n;
  c.recv_count = count / n * n;
  c.param_count = count / n;
  c.send_inplace_offset = count / n;
  return c;
}

double BusBwFactor(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

void FillSend(void* send, const CollCounts& c, const CheckArgs& args) {
  braid::perf::FillPattern(send, c.send_count, 0, args, args.rank);
}

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  auto* out = static_cast<char*>(expected);
  const size_t block_bytes = c.param_count * braid::perf::ElementSize(args.dtype);
  for (int j = 0; j < args.nranks; ++j) {
    braid::perf::FillPattern(out + j * block_bytes, c.param_count, 0, args, j);
  }
}

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
    .counts = Counts,
    .busbw_factor = BusBwFactor,
    .fill_send = FillSend,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllGather); }
