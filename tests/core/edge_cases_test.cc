// ../shared/EDGE_CASES.md: inputs that broke other collective libraries, each a test here.
// (#1 group self-sends: p2p_test; #2 count 0 and #3 one rank: every row of matrix_test.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"
#include "braid/braid.h"
#include "collective_cases.h"
#include "test_util.h"

namespace braid::test {
namespace {

// #4: AVG on float32 at nranks 3, 5, 7, 15, 28 with every reducing algorithm. Braid
// post-divides: the exact sum, divided once in fp32 (integers truncate toward zero).
TEST(EdgeCases, AvgAtOddRankCountsEveryAlgorithm) {
  for (int n : {3, 5, 7, 15, 28}) {
    auto errors = runThreads(n, [n](braidComm_t comm, int rank) -> std::string {
      for (const AlgorithmInfo& a : algorithms()) {
        if (!isReducing(a.coll)) continue;
        for (size_t count : {size_t{1}, size_t{1000}}) {
          Case c{&a, braidFloat32, braidAvg, count, false, n - 1};
          std::string e = runCase(c, comm, rank, n);
          if (!e.empty()) return e;
        }
      }
      return "";
    });
    for (const auto& e : errors) ADD_FAILURE() << e;
  }
}

// #5: int8 120 + 100 = -36 and uint8 200 + 100 = 44 on 2 ranks; products wrap too.
TEST(EdgeCases, NarrowIntegersWrapAround) {
  auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    int8_t s = rank == 0 ? 120 : 100, sr = 0;
    uint8_t u = rank == 0 ? 200 : 100, ur = 0;
    int8_t p = rank == 0 ? 16 : 9, pr = 0;  // 144 wraps to -112
    if (braidAllReduce(&s, &sr, 1, braidInt8, braidSum, comm, nullptr) != braidSuccess ||
        braidAllReduce(&u, &ur, 1, braidUint8, braidSum, comm, nullptr) != braidSuccess ||
        braidAllReduce(&p, &pr, 1, braidInt8, braidProd, comm, nullptr) != braidSuccess)
      return braidGetLastError(comm);
    if (sr != -36) return "int8 sum " + std::to_string(sr);
    if (ur != 44) return "uint8 sum " + std::to_string(ur);
    if (pr != -112) return "int8 prod " + std::to_string(pr);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// #7: a collective entered by rank 0 only: rank 0 times out naming rank 1 and the call's
// sequence number (processes, so BRAID_TIMEOUT can be short for this job alone).
TEST(EdgeCases, CollectiveEnteredByOneRankTimesOutNamingThePeer) {
  auto results = runProcesses(2, "lonely", {"BRAID_TIMEOUT=2"});
  EXPECT_EQ(results[0].status, 0) << results[0].output;
  EXPECT_EQ(results[1].status, 0) << results[1].output;
}

// A peer process that exits is named at once, not at the timeout.
TEST(EdgeCases, ExitedPeerIsNamedBeforeTheTimeout) {
  auto results = runProcesses(2, "deadpeer", {"BRAID_TIMEOUT=60"});
  EXPECT_EQ(results[0].status, 0) << results[0].output;
}

// Ranks in different calls (all-reduce against broadcast of the same size): the rank that
// sees the other's message is told it is a different call; afterwards the communicator
// refuses further use instead of mixing data.
TEST(EdgeCases, DifferentCallsAreNamedAndTheCommIsRetired) {
  auto results = runProcesses(2, "mismatch", {"BRAID_TIMEOUT=3"});
  EXPECT_EQ(results[0].status, 0) << results[0].output;
  EXPECT_EQ(results[1].status, 0) << results[1].output;
}

TEST(EdgeCases, AllToAllvInPlaceRefusedAndEmptyWithNullBuffersAccepted) {
  auto errors = runThreads(2, [](braidComm_t comm, int) -> std::string {
    std::vector<size_t> counts = {3, 3}, displs = {0, 3}, zeros = {0, 0}, far = {7, 9};
    std::vector<int32_t> buf(6, 1);
    if (braidAllToAllv(buf.data(), counts.data(), displs.data(), buf.data(), counts.data(),
                       displs.data(), braidInt32, comm, nullptr) != braidInvalidArgument)
      return "in-place all-to-all-v was accepted";
    if (braidAllToAllv(nullptr, zeros.data(), far.data(), nullptr, zeros.data(), far.data(),
                       braidInt32, comm, nullptr) != braidSuccess)
      return std::string("all-zero counts with NULL buffers refused: ") + braidGetLastError(comm);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// Buffers that overlap without being the collective's in-place form are refused on every
// rank (before anything is sent), naming both buffers; the in-place forms still run, and the
// communicator stays usable. Before the check, braidAllReduce(buf, buf + 1, ...) returned
// success with wrong sums.
TEST(EdgeCases, OverlappingBuffersRefusedUnlessInPlace) {
  // One rank, where every rank is the root: each call is refused on its own (with more ranks
  // a call that ran on would wait for the refused ones).
  auto refused = runThreads(1, [](braidComm_t comm, int) -> std::string {
    const size_t count = 4;
    std::vector<int32_t> buf(64, 1);
    int32_t* b = buf.data();
    std::vector<size_t> counts = {count}, displs = {0};
    // Each collective with recvbuff one element past sendbuff: overlapping, and in place for
    // none of them (reduce-scatter's and all-gather's forms are a whole block apart).
    const std::vector<std::pair<const char*, std::function<braidResult_t()>>> calls = {
        {"all-reduce",
         [&] { return braidAllReduce(b, b + 1, count, braidInt32, braidSum, comm, nullptr); }},
        {"reduce-scatter",
         [&] { return braidReduceScatter(b, b + 1, count, braidInt32, braidSum, comm, nullptr); }},
        {"all-gather", [&] { return braidAllGather(b + 1, b, count, braidInt32, comm, nullptr); }},
        {"broadcast",
         [&] { return braidBroadcast(b, b + 1, count, braidInt32, 0, comm, nullptr); }},
        {"reduce",
         [&] { return braidReduce(b, b + 1, count, braidInt32, braidSum, 0, comm, nullptr); }},
        {"all-to-all", [&] { return braidAllToAll(b, b + 1, count, braidInt32, comm, nullptr); }},
        {"all-to-all-v",
         [&] {
           return braidAllToAllv(b, counts.data(), displs.data(), b + 1, counts.data(),
                                 displs.data(), braidInt32, comm, nullptr);
         }},
        {"gather", [&] { return braidGather(b + 1, b, count, braidInt32, 0, comm, nullptr); }},
        {"scatter", [&] { return braidScatter(b, b + 1, count, braidInt32, 0, comm, nullptr); }},
    };
    for (const auto& [name, call] : calls) {
      const braidResult_t got = call();
      if (got != braidInvalidArgument)
        return std::string(name) + " with overlapping buffers returned " + braidGetErrorString(got);
      const std::string msg = braidGetLastError(comm);
      if (msg.find("overlap") == std::string::npos || msg.find("recvbuff") == std::string::npos)
        return std::string(name) + ": the message does not name the overlap: " + msg;
      if (buf[1] != 1) return std::string(name) + " wrote before refusing";
    }
    return "";
  });
  for (const auto& e : refused) ADD_FAILURE() << e;

  auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    const size_t count = 4;
    std::vector<int32_t> buf(64, rank + 1);
    int32_t* b = buf.data();
    // Off the root, broadcast's sendbuff and reduce's recvbuff are unused: no overlap counts.
    if (braidBroadcast(b, rank == 0 ? b : b + 1, count, braidInt32, 0, comm, nullptr) !=
        braidSuccess)
      return std::string("broadcast, overlapping pointers off the root: ") +
             braidGetLastError(comm);
    if (rank == 1 && buf[1] != 1)
      return "broadcast off the root delivered " + std::to_string(buf[1]);
    std::fill(buf.begin(), buf.end(), rank + 1);
    if (braidReduce(b, rank == 0 ? b : b + 1, count, braidInt32, braidSum, 0, comm, nullptr) !=
        braidSuccess)
      return std::string("reduce, overlapping pointers off the root: ") + braidGetLastError(comm);
    if (rank == 0 && buf[0] != 3) return "reduce at the root summed " + std::to_string(buf[0]);
    // The in-place forms run, with exact results.
    std::fill(buf.begin(), buf.end(), rank + 1);
    if (braidAllReduce(b, b, count, braidInt32, braidSum, comm, nullptr) != braidSuccess)
      return std::string("in-place all-reduce: ") + braidGetLastError(comm);
    if (buf[0] != 3 || buf[count - 1] != 3)
      return "in-place all-reduce sum " + std::to_string(buf[0]);
    std::fill(buf.begin(), buf.end(), rank + 1);
    if (braidReduceScatter(b, b + rank * count, count, braidInt32, braidSum, comm, nullptr) !=
        braidSuccess)
      return std::string("in-place reduce-scatter: ") + braidGetLastError(comm);
    if (buf[rank * count] != 3)
      return "in-place reduce-scatter sum " + std::to_string(buf[rank * count]);
    std::fill(buf.begin(), buf.end(), rank + 1);
    if (braidAllGather(b + rank * count, b, count, braidInt32, comm, nullptr) != braidSuccess)
      return std::string("in-place all-gather: ") + braidGetLastError(comm);
    if (buf[0] != 1 || buf[count] != 2) return "in-place all-gather gathered wrong blocks";
    // Gather and scatter with the root's block at its own slot (nccl-tests' in place).
    for (int root = 0; root < 2; ++root) {
      std::fill(buf.begin(), buf.end(), rank + 1);
      int32_t* own = b + rank * count;
      if (braidGather(own, b, count, braidInt32, root, comm, nullptr) != braidSuccess)
        return std::string("gather at the root's slot: ") + braidGetLastError(comm);
      if (rank == root && (buf[0] != 1 || buf[count] != 2)) return "gather gathered wrong blocks";
      std::fill(buf.begin(), buf.end(), rank + 1);
      if (rank == root) std::fill(b, b + 2 * count, 0), std::fill(b + count, b + 2 * count, 7);
      if (braidScatter(b, own, count, braidInt32, root, comm, nullptr) != braidSuccess)
        return std::string("scatter to the root's slot: ") + braidGetLastError(comm);
      if (*own != (rank == 0 ? 0 : 7)) return "scatter delivered " + std::to_string(*own);
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// BRAID_ALGO is rank 0's on every rank, but every rank's own is checked at init (issue 38: it
// would fail on a layout where that rank is rank 0). main below gives one rank a spec that does
// not parse: either way init fails on both ranks with the parser's message, the other rank
// included (it does not wait for a rank that left), naming the rank whose setting it is.
TEST(EdgeCases, BadBraidAlgoFailsInitOnEveryRankAlike) {
  for (int bad : {0, 1}) {
    auto results =
        runProcesses(2, bad == 0 ? "algo_bad_on_0" : "algo_bad_on_1", {"BRAID_TIMEOUT=60"});
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(results[r].status, 3) << results[r].output;
      EXPECT_NE(results[r].output.find("item 2 is empty"), std::string::npos) << results[r].output;
    }
    EXPECT_NE(results[1 - bad].output.find("rank " + std::to_string(bad) + "'s settings fail"),
              std::string::npos)
        << results[1 - bad].output;
  }
}

// Ranks with different BRAID_BUFFSIZE / BRAID_CHUNKSIZE: each sends into the peer's FIFO
// laid out the peer's way (rank 1 sets its own values before init, in main below).
TEST(EdgeCases, RanksWithDifferentBufferSettingsAgree) {
  auto results = runProcesses(2, "geometry");
  EXPECT_EQ(results[0].status, 0) << results[0].output;
  EXPECT_EQ(results[1].status, 0) << results[1].output;
}

// #8: a flat buffer of segments 8 + 0 + 24 elements reduced segment by segment, and 57
// elements padded to 60 for a reduce-scatter over 2 ranks.
TEST(EdgeCases, ZeroLengthSegmentsAndPaddedReduceScatter) {
  auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    std::vector<float> flat(32, static_cast<float>(rank + 1));
    size_t offset = 0;
    for (size_t len : {size_t{8}, size_t{0}, size_t{24}}) {
      if (braidAllReduce(flat.data() + offset, flat.data() + offset, len, braidFloat32, braidSum,
                         comm, nullptr) != braidSuccess)
        return braidGetLastError(comm);
      offset += len;
    }
    for (float v : flat)
      if (v != 3.0f) return "segment sum " + std::to_string(v);
    std::vector<float> padded(60, 0.0f), out(30, -1.0f);
    for (size_t i = 0; i < 57; ++i) padded[i] = static_cast<float>(i);
    if (braidReduceScatter(padded.data(), out.data(), 30, braidFloat32, braidSum, comm, nullptr) !=
        braidSuccess)
      return braidGetLastError(comm);
    for (size_t i = 0; i < 30; ++i) {
      size_t g = rank * 30 + i;
      float want = g < 57 ? 2.0f * g : 0.0f;
      if (out[i] != want) return "padded reduce-scatter element " + std::to_string(g);
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("lonely", [](braidComm_t comm, int rank, int) {
    if (rank == 1) {
      // Never enters the all-reduce; waits until rank 0 has given up, then leaves.
      std::this_thread::sleep_for(std::chrono::seconds(4));
      return 0;
    }
    float x = 1, y = 0;
    braidResult_t res = braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comm, nullptr);
    std::string msg = braidGetLastError(comm);
    bool ok = res == braidTimeout && msg.find("rank 1") != std::string::npos &&
              msg.find("#1") != std::string::npos;
    if (!ok) std::fprintf(stderr, "got %s: %s\n", braidGetErrorString(res), msg.c_str());
    return ok ? 0 : 1;
  });
  braid::test::registerChildRole("deadpeer", [](braidComm_t comm, int rank, int) {
    if (rank == 1) _exit(0);  // gone without a word
    float x = 1, y = 0;
    auto t0 = std::chrono::steady_clock::now();
    braidResult_t res = braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comm, nullptr);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string msg = braidGetLastError(comm);
    bool ok = res == braidRemoteError && msg.find("rank 1") != std::string::npos && s < 10;
    if (!ok)
      std::fprintf(stderr, "got %s after %.1f s: %s\n", braidGetErrorString(res), s, msg.c_str());
    return ok ? 0 : 1;
  });
  braid::test::registerChildRole("mismatch", [](braidComm_t comm, int rank, int) {
    std::vector<float> x(100, 1.0f), y(100, 0.0f);
    braidCommSetAlgorithm(comm, "broadcast", "binomial");
    braidResult_t res =
        rank == 0 ? braidAllReduce(x.data(), y.data(), 100, braidFloat32, braidSum, comm, nullptr)
                  : braidBroadcast(nullptr, y.data(), 100, braidFloat32, 0, comm, nullptr);
    std::string msg = braidGetLastError(comm);
    bool ok = res != braidSuccess;
    if (rank == 1)
      ok = ok && res == braidInvalidUsage && msg.find("different call") != std::string::npos;
    braidResult_t again =
        braidAllReduce(x.data(), y.data(), 100, braidFloat32, braidSum, comm, nullptr);
    ok = ok && again == braidInvalidUsage &&
         std::string(braidGetLastError(comm)).find("cannot be used again") != std::string::npos;
    if (!ok)
      std::fprintf(stderr, "rank %d got %s: %s / then %s\n", rank, braidGetErrorString(res),
                   msg.c_str(), braidGetLastError(comm));
    return ok ? 0 : 1;
  });
  auto allReduceRuns = [](braidComm_t comm, int, int) {
    float x = 1, y = 0;
    if (braidAllReduce(&x, &y, 1, braidFloat32, braidSum, comm, nullptr) == braidSuccess && y == 2)
      return 0;
    std::fprintf(stderr, "all-reduce: %s, %g\n", braidGetLastError(comm), y);
    return 1;
  };
  for (const char* rank : {"0", "1"}) {
    const std::string role = std::string("--braid-child=algo_bad_on_") + rank;
    const char* me = std::getenv("BRAID_RANK");
    for (int i = 1; i < argc; ++i)
      if (me && std::string(me) == rank && argv[i] == role) setenv("BRAID_ALGO", "ring;;tree", 1);
    braid::test::registerChildRole(std::string("algo_bad_on_") + rank, allReduceRuns);
  }
  if (const char* r = std::getenv("BRAID_RANK"); r && std::string(r) == "1") {
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "--braid-child=geometry") {
        setenv("BRAID_BUFFSIZE", "8M", 1);
        setenv("BRAID_CHUNKSIZE", "1M", 1);
      }
  }
  braid::test::registerChildRole("geometry", [](braidComm_t comm, int, int) {
    std::vector<float> x(5u << 20, 1.0f), y(5u << 20, 0.0f);
    if (braidAllReduce(x.data(), y.data(), x.size(), braidFloat32, braidSum, comm, nullptr) !=
        braidSuccess) {
      std::fprintf(stderr, "%s\n", braidGetLastError(comm));
      return 1;
    }
    for (float v : y)
      if (v != 2.0f) return 1;
    return 0;
  });
  int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
