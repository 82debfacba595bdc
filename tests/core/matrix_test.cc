// The generated matrix: every (collective x algorithm) row of the algorithm table x dtype x
// op x nranks {1,2,3,4,5,7,8,13,16} x count x placement x root, ranks as threads; a sampled
// subset with ranks as processes, on one host and over 2 emulated hosts (network
// namespaces, scripts/cluster.sh; root only, else skipped). The algorithm is forced per
// call with braidCommSetAlgorithm, so every row runs whatever the default rule would pick.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "base/config.h"
#include "collective_cases.h"
#include "core/bootstrap.h"
#include "device/device.h"
#include "fake_cuda.h"
#include "test_scale.h"
#include "test_util.h"

namespace braid::test {
namespace {

// Instances named by their rank count ("2ranks"), so that the variants in meson.build select
// them by name.
std::string rankCountName(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "ranks";
}

// The share BRAID_TEST_SHARE names ("K/N"; unset: 0/1, every row) for BRAID_TEST_SAMPLED=share.
RowShare envShare() {
  static const RowShare share = [] {
    RowShare s;
    const char* v = std::getenv("BRAID_TEST_SHARE");
    if (v != nullptr && *v != '\0' && !parseRowShare(v, &s)) {
      std::fprintf(stderr, "BRAID_TEST_SHARE=\"%s\": expected K/N with 0 <= K < N <= 1024\n", v);
      std::exit(2);
    }
    return s;
  }();
  return share;
}

// The rows a run takes (collective_cases.h), from BRAID_TEST_SAMPLED (meson.build beside it says
// which run sets what): unset or "0", every row; "types", Rows::kTypes; "1", Rows::kSampled;
// "share" and "sampled-share", Rows::kShare and kSampledShare with BRAID_TEST_SHARE's share.
// Anything else stops the program before any test runs (main reads it first).
Rows envRows() {
  static const Rows rows = [] {
    const char* v = std::getenv("BRAID_TEST_SAMPLED");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return Rows::kEvery;
    if (std::strcmp(v, "1") == 0) return Rows::kSampled;
    if (std::strcmp(v, "types") == 0) return Rows::kTypes;
    if (std::strcmp(v, "share") == 0) return Rows::kShare;
    if (std::strcmp(v, "sampled-share") == 0) return Rows::kSampledShare;
    std::fprintf(stderr,
                 "BRAID_TEST_SAMPLED=\"%s\": expected 0, 1, types, share or sampled-share\n", v);
    std::exit(2);
  }();
  return rows;
}

// The cases of one run, printed once per rank count and row set (which rows ran is in the
// test's log: a share differs from commit to commit).
std::vector<Case> casesFor(int nranks, Rows rows) {
  static std::mutex mu;
  static std::set<std::pair<int, int>> printed;
  std::vector<Case> cases = matrixCases(nranks, rows, envShare());
  std::lock_guard<std::mutex> lock(mu);
  if (printed.insert({nranks, static_cast<int>(rows)}).second) {
    static const char* const kNames[] = {"every row", "types", "sampled", "share", "sampled share"};
    const bool share = rows == Rows::kShare || rows == Rows::kSampledShare;
    std::printf("matrix rows, nranks %d (%s", nranks, kNames[static_cast<int>(rows)]);
    if (share) std::printf(" %u of %u", envShare().index, envShare().of);
    std::printf("): %zu\n", cases.size());
    if (share)
      for (const Case& c : cases) std::printf("  %s\n", c.describe(nranks).c_str());
    std::fflush(stdout);
  }
  return cases;
}

std::string runAll(braidComm_t comm, int rank, int nranks, Rows rows) {
  for (const Case& c : casesFor(nranks, rows)) {
    std::string e = runCase(c, comm, rank, nranks);
    if (!e.empty()) return e;  // ranks are out of step after a failure
  }
  return "";
}

class MatrixThreads : public ::testing::TestWithParam<int> {};

// Above 8 ranks where sizes are reduced (a sanitizer build or BRAID_TEST_REDUCED=1,
// tests/test_scale.h), the sampled rows, or their share where a share is asked for: 13 and 16
// threads took 131 s of the ASan matrix's 353 with every count; the release build runs every
// row there.
Rows rowsFor(int nranks) {
  const Rows rows = envRows();
  if (!reducedSizes() || nranks <= 8) return rows;
  return rows == Rows::kShare || rows == Rows::kSampledShare ? Rows::kSampledShare : Rows::kSampled;
}

TEST_P(MatrixThreads, EveryRowOfTheTable) {
  const int n = GetParam();
  const Rows rows = rowsFor(n);
  auto errors = runThreads(n, [n, rows](braidComm_t c, int r) { return runAll(c, r, n, rows); });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

INSTANTIATE_TEST_SUITE_P(NRanks, MatrixThreads, ::testing::Values(1, 2, 3, 4, 5, 7, 8, 13, 16),
                         rankCountName);

class MatrixProcesses : public ::testing::TestWithParam<int> {};

TEST_P(MatrixProcesses, SampledRows) {
  const int n = GetParam();
  // A tiny pipelining grain forces the many-piece paths.
  auto results = runProcesses(n, "matrix", {"BRAID_CHUNKSIZE=256"});
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

INSTANTIATE_TEST_SUITE_P(NRanks, MatrixProcesses, ::testing::Values(2, 3, 5, 8), rankCountName);

// Device memory without a GPU: a stand-in runtime (fake_cuda.h) under which every buffer
// counts as device memory and the staging copies are memcpy, so each row of the table runs
// through the core's staging (device -> host copy, the collective on host memory, copy back),
// in place and out, rooted and not, with all-to-all-v's gaps. The sentinels around every
// buffer catch a copy that strays. Send/recv in a group is staged the same way.
std::string ringSendRecv(braidComm_t comm, int rank, int nranks, braidStream_t stream) {
  std::vector<int32_t> out(1000), in(1000, -1);
  for (size_t i = 0; i < out.size(); ++i) out[i] = rank * 100000 + static_cast<int32_t>(i);
  braidGroupStart();
  braidSend(out.data(), out.size(), braidInt32, (rank + 1) % nranks, comm, stream);
  braidRecv(in.data(), in.size(), braidInt32, (rank + nranks - 1) % nranks, comm, stream);
  if (braidGroupEnd() != braidSuccess) return std::string("send/recv: ") + braidGetLastError(comm);
  if (stream && braidStreamSynchronize(stream) != braidSuccess)
    return std::string("send/recv on the stream: ") + braidGetLastError(nullptr);
  const int from = (rank + nranks - 1) % nranks;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != from * 100000 + static_cast<int32_t>(i))
      return "send/recv: element " + std::to_string(i) + " is " + std::to_string(in[i]);
  return "";
}

class MatrixFakeDevice : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { device::setRuntimeForTesting(&fakeCudaRuntime(true)); }
  void TearDown() override { device::setRuntimeForTesting(nullptr); }
};

// On more than one rank the communicator is deviceDirect (every rank has a device and they
// share the host), so each row runs device to device (the CUDA IPC transport: in-place device
// pieces between threads, copies and reductions on the "device") and nothing is staged;
// with BRAID_CUDA_IPC=0 (the matrix_fake_device_staged run), and on one rank, it is staged.
TEST_P(MatrixFakeDevice, EveryRowOnDeviceBuffers) {
  const int n = GetParam();
  const bool direct = n > 1 && config().cudaIpc;
  const FakeCudaStats& st = fakeCudaStats();
  const uint64_t syncBefore = st.syncCopies.load(), reducesBefore = st.deviceReduces.load();
  auto errors = runThreads(n, [n](braidComm_t c, int r) {
    std::string e = runAll(c, r, n, rowsFor(n));
    return e.empty() ? ringSendRecv(c, r, n, nullptr) : e;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  if (direct) {
    EXPECT_EQ(st.syncCopies.load(), syncBefore) << "a call was staged on a deviceDirect comm";
    EXPECT_GT(st.deviceReduces.load(), reducesBefore) << "no reduction ran on the device";
    EXPECT_EQ(st.ipcExports.load(), 0u) << "threads of one process exported their memory";
  } else {
    EXPECT_GT(st.syncCopies.load(), syncBefore) << "nothing was staged";
  }
}

// Every row again, each call queued on a CUDA stream (braidStreamCreateCuda, one stand-in
// stream per rank): the stream hands it to the proxy when it reaches it, the proxy stages
// on its own stream (copyOnOwnStream, never the synchronous copies) and releases the stream.
TEST_P(MatrixFakeDevice, EveryRowOnACudaStream) {
  const int n = GetParam();
  const uint64_t syncBefore = fakeCudaStats().syncCopies.load();
  const uint64_t proxyBefore = fakeCudaStats().proxyCopies.load();
  const uint64_t deviceSyncsBefore = fakeCudaStats().deviceSyncs.load();
  auto errors = runThreads(n, [n](braidComm_t c, int r) -> std::string {
    FakeStream cuda;
    braidStream_t s = nullptr;
    if (braidStreamCreateCuda(&s, &cuda) != braidSuccess)
      return std::string("braidStreamCreateCuda: ") + braidGetLastError(nullptr);
    std::string e;
    for (const Case& k : casesFor(n, rowsFor(n))) {
      e = runCase(k, c, r, n, s);
      if (!e.empty()) break;
    }
    if (e.empty()) e = ringSendRecv(c, r, n, s);
    braidStreamDestroy(s);
    return e;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_GT(fakeCudaStats().proxyCopies.load(), proxyBefore) << "the proxy staged nothing";
  EXPECT_EQ(fakeCudaStats().syncCopies.load(), syncBefore)
      << "a call on a CUDA stream used the copies that wait for the whole device";
  EXPECT_EQ(fakeCudaStats().deviceSyncs.load(), deviceSyncsBefore)
      << "a call on a CUDA stream waited for the whole device";
}

// The device path between processes, on buffers that cannot be exported (the matrix's own
// vectors, which the stand-in counts as device memory but cannot share): every piece goes
// through the shared FIFO's host memory, copied in and out by the device, and nothing is
// staged. The child checks its own counters.
class MatrixFakeDeviceProcesses : public ::testing::TestWithParam<int> {};

TEST_P(MatrixFakeDeviceProcesses, SampledRows) {
  const int n = GetParam();
  const auto results = runProcesses(n, "matrix-device", {"BRAID_CHUNKSIZE=256"});
  EXPECT_EQ(failedChildren(results), "");
  EXPECT_TRUE(shmLeftovers(results).empty());
}

INSTANTIATE_TEST_SUITE_P(NRanks, MatrixFakeDeviceProcesses, ::testing::Values(2, 3), rankCountName);

INSTANTIATE_TEST_SUITE_P(NRanks, MatrixFakeDevice, ::testing::Values(1, 2, 3, 4, 5), rankCountName);

// This process's network namespace, e.g. "net:[4026531833]".
std::string netnsId() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/ns/net", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
}

// The IPv4 address of eth0, or "none".
std::string eth0Address() {
  ifaddrs* list = nullptr;
  std::string out = "none";
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (it->ifa_addr && it->ifa_addr->sa_family == AF_INET && std::string(it->ifa_name) == "eth0") {
      char text[INET_ADDRSTRLEN] = {0};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text,
                sizeof(text));
      out = text;
      break;
    }
  }
  freeifaddrs(list);
  return out;
}

// The launch alone, without a communicator: where this rank runs, then one bootstrap
// all-gather through braidrun's root (so the root is reachable from inside every host).
int clusterProbe(int rank, int nranks) {
  const RankEnv env = rankEnv();
  const std::string me = env.hostId + "@" + eth0Address();
  braidUniqueId id;
  std::unique_ptr<Bootstrap> boot;
  std::vector<std::string> all;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess ||
      Bootstrap::join(id, rank, nranks, &boot) != braidSuccess ||
      boot->allGather(me, &all) != braidSuccess || boot->barrier() != braidSuccess) {
    std::fprintf(stderr, "probe rank=%d: bootstrap failed: %s\n", rank, braidGetLastError(nullptr));
    return 1;
  }
  boot->close();
  std::string peers;
  for (const std::string& p : all) peers += (peers.empty() ? "" : ",") + p;
  std::printf("probe rank=%d local=%d/%d host=%s netns=%s addr=%s peers=%s\n", env.rank,
              env.localRank, env.localSize, env.hostId.c_str(), netnsId().c_str(),
              eth0Address().c_str(), peers.c_str());
  return 0;
}

// The value after "key=" in text, up to the next blank.
std::string field(const std::string& text, const std::string& key) {
  const size_t at = text.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t start = at + key.size() + 2;
  return text.substr(start, text.find_first_of(" \n", start) - start);
}

// The plumbing: namespaces up, each rank inside its host's namespace with its host's
// variables, every rank through the bootstrap, nothing left afterwards. Links shaped, so
// cluster.sh's tc path runs too.
TEST(MatrixCluster, RanksStartInsideTheirHosts) {
  const ClusterResult res = runInCluster(2, 2, "cluster-probe", {}, "1gbit");
  if (!res.skipReason.empty()) GTEST_SKIP() << res.skipReason;
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_TRUE(clusterLeftovers().empty());
  const std::string peers =
      "braid-h0@10.77.0.1,braid-h0@10.77.0.1,braid-h1@10.77.0.2,braid-h1@10.77.0.2";
  std::vector<std::string> netns(4);
  for (int r = 0; r < 4; ++r) {
    const std::string& out = res.ranks[r].output;
    EXPECT_EQ(res.ranks[r].status, 0) << "rank " << r << ":\n" << out;
    EXPECT_EQ(field(out, "rank"), std::to_string(r)) << out;
    EXPECT_EQ(field(out, "local"), std::to_string(r % 2) + "/2") << out;
    EXPECT_EQ(field(out, "host"), "braid-h" + std::to_string(r / 2)) << out;
    EXPECT_EQ(field(out, "addr"), "10.77.0." + std::to_string(r / 2 + 1)) << out;
    EXPECT_EQ(field(out, "peers"), peers) << out;
    netns[r] = field(out, "netns");
    EXPECT_NE(netns[r], netnsId()) << "rank " << r << " runs in the test's own namespace";
  }
  EXPECT_EQ(netns[0], netns[1]);
  EXPECT_EQ(netns[2], netns[3]);
  EXPECT_NE(netns[0], netns[2]);
}

// The sampled rows over 2 emulated hosts x 2 ranks: shared memory within a host, the
// network transport between them.
TEST(MatrixCluster, TwoHostsTwoRanks) {
  const ClusterResult res = runInCluster(2, 2, "matrix", {"BRAID_CHUNKSIZE=256"});
  if (!res.skipReason.empty()) GTEST_SKIP() << res.skipReason;
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(res.ranks[r].status, 0) << "rank " << r << ":\n" << res.ranks[r].output;
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_TRUE(shmLeftovers(res.ranks).empty());
  EXPECT_TRUE(clusterLeftovers().empty());
}

// The same over UCX for every pair (BRAID_TRANSPORT=ucx), where Braid was built with it.
TEST(MatrixCluster, TwoHostsTwoRanksUcx) {
#ifndef BRAID_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  const ClusterResult res =
      runInCluster(2, 2, "matrix", {"BRAID_CHUNKSIZE=256", "BRAID_TRANSPORT=ucx"});
  if (!res.skipReason.empty()) GTEST_SKIP() << res.skipReason;
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(res.ranks[r].status, 0) << "rank " << r << ":\n" << res.ranks[r].output;
  EXPECT_EQ(res.status, 0) << res.output;
  EXPECT_TRUE(clusterLeftovers().empty());
}

// The shares the sanitizer builds take: each holds every algorithm row of the table, and 16
// successive shares run every row of the full matrix (of the sampled rows for the sampled
// share), each row outside the base in exactly one share.
TEST(Matrix, SharesSplitEveryRow) {
  for (const auto& [rows, pool] :
       {std::pair{Rows::kShare, Rows::kEvery}, std::pair{Rows::kSampledShare, Rows::kSampled}})
    for (int n : {1, 4, 13}) {
      const std::vector<Case> all = matrixCases(n, pool);
      std::set<const AlgorithmInfo*> every;  // the algorithms with a row at n ranks
      for (const Case& c : all) every.insert(c.algo);
      std::map<std::string, int> seen;  // row -> the number of shares that took it
      for (unsigned k = 0; k < 16; ++k) {
        std::set<const AlgorithmInfo*> algos;
        for (const Case& c : matrixCases(n, rows, RowShare{k, 16})) {
          ++seen[c.describe(n)];
          algos.insert(c.algo);
        }
        EXPECT_EQ(algos, every) << "share " << k << " nranks " << n;
      }
      size_t base = 0;
      for (const Case& c : all) {
        const int times = seen[c.describe(n)];
        EXPECT_TRUE(times == 1 || times == 16) << c.describe(n) << " in " << times << " shares";
        base += times == 16;
      }
      EXPECT_EQ(seen.size(), all.size()) << "nranks " << n;
      EXPECT_GE(base, every.size());
      EXPECT_LT(base, all.size() / 4) << "nranks " << n;
    }
  RowShare s;
  EXPECT_TRUE(parseRowShare("15/16", &s));
  EXPECT_EQ(s.index, 15u);
  EXPECT_EQ(s.of, 16u);
  for (const char* bad : {"16/16", "1/0", "-1/16", "1/", "/16", "1/16x", "1 /16", "", "1/2000"})
    EXPECT_FALSE(parseRowShare(bad, &s)) << bad;
}

TEST(Matrix, EveryCollectiveHasARow) {
  for (int c = 0; c < kNumCollectives; ++c) {
    int rows = 0;
    for (const AlgorithmInfo& a : algorithms()) rows += static_cast<int>(a.coll) == c;
    EXPECT_GT(rows, 0) << collectiveName(static_cast<Collective>(c)) << " has no algorithm";
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("matrix", [](braidComm_t c, int r, int n) {
    std::string e = braid::test::runAll(c, r, n, braid::test::Rows::kSampled);
    if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
    return e.empty() ? 0 : 1;
  });
  braid::test::registerChildRole("matrix-device", [](braidComm_t c, int r, int n) {
    std::string e = braid::test::runAll(c, r, n, braid::test::Rows::kSampled);
    if (e.empty()) e = braid::test::ringSendRecv(c, r, n, nullptr);
    const braid::test::FakeCudaStats& st = braid::test::fakeCudaStats();
    if (e.empty() && braid::config().cudaIpc && (st.syncCopies != 0 || st.deviceReduces == 0))
      e = "staged " + std::to_string(st.syncCopies) + " copies, reduced " +
          std::to_string(st.deviceReduces) + " times on the device: not the device path";
    if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
    return e.empty() ? 0 : 1;
  });
  braid::test::registerRawChildRole("cluster-probe", braid::test::clusterProbe);
  // That role's ranks run under the stand-in runtime, set before they join the communicator.
  if (argc > 1 && std::strcmp(argv[1], "--braid-child=matrix-device") == 0)
    braid::device::setRuntimeForTesting(&braid::test::fakeCudaRuntime(true));
  // A bad BRAID_TEST_SAMPLED or BRAID_TEST_SHARE stops here, on one thread.
  braid::test::envRows();
  braid::test::envShare();
  int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
