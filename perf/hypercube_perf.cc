// hypercube_perf: nccl-tests' hypercube_perf on Braid (flags and table: see common.h).
//
// An all-gather built from point-to-point calls: in step k = 0 .. log2(n) - 1 rank r
// exchanges, in one group, the 2^k blocks it holds with rank r ^ 2^k (mask = 2^k), so
// after log2(n) steps every rank holds all n blocks. Like nccl-tests' hypercube.cu: the
// block is count / n rounded down to a multiple of 4 elements, algbw counts the (n - 1)
// blocks each rank receives, busbw = algbw, and a rank count that is not a power of 2 is
// skipped (exit 0). Blocks are compared bit for bit.
#include <cstddef>
#include <cstring>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

constexpr size_t kAlign = 4;  // elements, as nccl-tests' ALIGN

CollCounts Counts(size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  const size_t block = count / (kAlign * n) * kAlign;
  CollCounts c;
  c.send_count = block;
  c.recv_count = block * n;
  c.param_count = block;
  c.send_inplace_offset = block;
  return c;
}

double AlgBwBytes(const CollCounts& c, size_t elem_size, int nranks) {
  return static_cast<double>(c.param_count * elem_size) * (nranks - 1);
}

const char* SkipReason(int nranks) {
  return (nranks & (nranks - 1)) == 0 ? nullptr : "is not a power of 2";
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int /*root*/, braidComm_t comm, braidStream_t stream) {
  int rank = 0, nranks = 1;
  if (const braidResult_t r = braidCommUserRank(comm, &rank); r != braidSuccess) return r;
  if (const braidResult_t r = braidCommCount(comm, &nranks); r != braidSuccess) return r;
  const size_t block_bytes = c.param_count * braid::perf::ElementSize(dtype);
  char* blocks = static_cast<char*>(recv);
  if (blocks + rank * block_bytes != send) memcpy(blocks + rank * block_bytes, send, block_bytes);
  for (int mask = 1; mask < nranks; mask <<= 1) {
    const int peer = rank ^ mask;
    const int mine = rank & ~(mask - 1);  // first of the `mask` blocks this rank holds
    const int theirs = mine ^ mask;
    const size_t count = c.param_count * static_cast<size_t>(mask);
    braidResult_t first = braidGroupStart();
    if (first != braidSuccess) return first;
    first = braidSend(blocks + mine * block_bytes, count, dtype, peer, comm, stream);
    const braidResult_t recv_result =
        braidRecv(blocks + theirs * block_bytes, count, dtype, peer, comm, stream);
    if (first == braidSuccess) first = recv_result;
    const braidResult_t end = braidGroupEnd();  // always: the group must close
    if (first != braidSuccess) return first;
    if (end != braidSuccess) return end;
  }
  return braidSuccess;
}

const braid::perf::Collective kHyperCube = {
    .name = "hypercube_perf",
    .collective = "hypercube",
    .call = "braidSend/braidRecv (hypercube all-gather)",
    .has_algorithms = false,
    .uses_op = false,
    .uses_root = false,
    .in_place = true,
    .bitwise = true,
    .counts = Counts,
    .busbw_factor = braid::perf::BusBwOne,
    .fill_send = braid::perf::FillSendPattern,
    .fill_expected = braid::perf::FillBlocksByRank,
    .run = Run,
    .algbw_bytes = AlgBwBytes,
    .skip_reason = SkipReason,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kHyperCube); }
