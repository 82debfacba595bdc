// sendrecv_perf: nccl-tests' sendrecv_perf on Braid (flags and table: see common.h).
//
// In one group, every rank sends count elements to rank + 1 and receives count elements
// from rank - 1 (mod n), so every link of the ring carries one message at once. busbw =
// algbw (nccl-tests doc/PERFORMANCE.md). Like nccl-tests, there is no in-place form (the
// send would race with the receive into the same buffer): the in-place columns say N/A.
// Messages are compared bit for bit.
#include <cstddef>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  const int from = (args.rank + args.nranks - 1) % args.nranks;
  braid::perf::FillPattern(expected, c.recv_count, 0, args, from);
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int /*root*/, braidComm_t comm, braidStream_t stream) {
  int rank = 0, nranks = 1;
  if (const braidResult_t r = braidCommUserRank(comm, &rank); r != braidSuccess) return r;
  if (const braidResult_t r = braidCommCount(comm, &nranks); r != braidSuccess) return r;
  braidResult_t first = braidGroupStart();
  if (first != braidSuccess) return first;
  first = braidSend(send, c.param_count, dtype, (rank + 1) % nranks, comm, stream);
  const braidResult_t recv_result =
      braidRecv(recv, c.param_count, dtype, (rank + nranks - 1) % nranks, comm, stream);
  if (first == braidSuccess) first = recv_result;
  const braidResult_t end = braidGroupEnd();  // always: the group must close
  return first != braidSuccess ? first : end;
}

const braid::perf::Collective kSendRecv = {
    .name = "sendrecv_perf",
    .collective = "sendrecv",
    .call = "braidSend/braidRecv",
    .has_algorithms = false,
    .uses_op = false,
    .uses_root = false,
    .in_place = false,
    .bitwise = true,
    .counts = braid::perf::WholeCounts,
    .busbw_factor = braid::perf::BusBwOne,
    .fill_send = braid::perf::FillSendPattern,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kSendRecv); }
