// alltoallv_perf: nccl-tests' alltoallv_perf on Braid (flags and table: see common.h).
//
// Sizes, algbw and busbw follow nccl-tests' alltoallv: the buffers hold n blocks of
// block = count / n elements and busbw = algbw * (n - 1) / n. Unlike nccl-tests, whose
// blocks are all equal, the counts vary per pair so that the call is a real all-to-all-v:
// rank i sends rank j
//     c(i, j) = floor(2 * block * ((i + j + 1) mod (n + 1)) / (n + 1))
// elements. For a fixed i (or j) the residues are n distinct values of 0..n, so every
// rank sends and receives at most n * block elements, the totals differ between ranks,
// and every pair with i + j = n sends nothing (as does any pair when block is small).
// Blocks sit in the send buffer in rank order and in the receive buffer in reverse rank
// order, each followed by an equal share of the spare room, so displacements are neither
// packed nor monotone; the check requires the gaps between received blocks to come back
// unchanged. All-to-all-v has no in-place form here, so the in-place columns say N/A.
#include <cstddef>
#include <vector>

#include "braid/braid.h"
#include "common.h"

namespace {

using braid::perf::CheckArgs;
using braid::perf::CollCounts;

size_t PairCount(size_t block, int from, int to, int nranks) {
  const auto n1 = static_cast<size_t>(nranks) + 1;
  const size_t k = (static_cast<size_t>(from) + static_cast<size_t>(to) + 1) % n1;
  return static_cast<size_t>(static_cast<unsigned __int128>(2 * k) * block / n1);
}

// One rank's arguments to braidAllToAllv, in elements.
struct Layout {
  std::vector<size_t> send_counts, send_displs, recv_counts, recv_displs;
};

Layout MakeLayout(size_t block, int rank, int nranks) {
  const auto n = static_cast<size_t>(nranks);
  Layout l;
  l.send_counts.resize(n);
  l.send_displs.resize(n);
  l.recv_counts.resize(n);
  l.recv_displs.resize(n);
  size_t sent = 0, received = 0;
  for (int p = 0; p < nranks; ++p) {
    l.send_counts[p] = PairCount(block, rank, p, nranks);
    l.recv_counts[p] = PairCount(block, p, rank, nranks);
    sent += l.send_counts[p];
    received += l.recv_counts[p];
  }
  const size_t send_gap = (n * block - sent) / n;
  const size_t recv_gap = (n * block - received) / n;
  size_t at = 0;
  for (int p = 0; p < nranks; ++p) {
    l.send_displs[p] = at;
    at += l.send_counts[p] + send_gap;
  }
  at = 0;
  for (int p = nranks - 1; p >= 0; --p) {
    l.recv_displs[p] = at;
    at += l.recv_counts[p] + recv_gap;
  }
  return l;
}

// Element e of rank i's send buffer is pattern element e of rank i.
void FillExpected(void* expected, const CollCounts& c, const CheckArgs& args) {
  auto* out = static_cast<char*>(expected);
  const size_t es = braid::perf::ElementSize(args.dtype);
  const Layout mine = MakeLayout(c.param_count, args.rank, args.nranks);
  for (int i = 0; i < args.nranks; ++i) {
    const Layout theirs = MakeLayout(c.param_count, i, args.nranks);
    braid::perf::FillPattern(out + mine.recv_displs[i] * es, mine.recv_counts[i],
                             theirs.send_displs[args.rank], args, i);
  }
}

braidResult_t Run(const void* send, void* recv, const CollCounts& c, braidDataType_t dtype,
                  braidRedOp_t /*op*/, int /*root*/, braidComm_t comm, braidStream_t stream) {
  int rank = 0, nranks = 1;
  if (const braidResult_t r = braidCommUserRank(comm, &rank); r != braidSuccess) return r;
  if (const braidResult_t r = braidCommCount(comm, &nranks); r != braidSuccess) return r;
  // Built once per size, outside the timed calls that follow.
  thread_local Layout layout;
  thread_local size_t layout_block = ~size_t{0};
  thread_local int layout_rank = -1, layout_nranks = -1;
  if (layout_block != c.param_count || layout_rank != rank || layout_nranks != nranks) {
    layout = MakeLayout(c.param_count, rank, nranks);
    layout_block = c.param_count;
    layout_rank = rank;
    layout_nranks = nranks;
  }
  return braidAllToAllv(send, layout.send_counts.data(), layout.send_displs.data(), recv,
                        layout.recv_counts.data(), layout.recv_displs.data(), dtype, comm, stream);
}

const braid::perf::Collective kAllToAllv = {
    .name = "alltoallv_perf",
    .collective = "alltoallv",
    .call = "braidAllToAllv",
    .has_algorithms = true,
    .uses_op = false,
    .uses_root = false,
    .in_place = false,
    .bitwise = true,
    .counts = braid::perf::AllToAllCounts,
    .busbw_factor = braid::perf::BusBwAllButOwn,
    .fill_send = braid::perf::FillSendPattern,
    .fill_expected = FillExpected,
    .run = Run,
};

}  // namespace

int main(int argc, char** argv) { return braid::perf::PerfMain(argc, argv, kAllToAllv); }
