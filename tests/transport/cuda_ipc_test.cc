// The CUDA IPC transport, on the stand-in runtime of fake_cuda.h: a communicator whose ranks
// all have a device and share the host is deviceDirect, and its calls on device buffers go
// device to device. Between processes each rank opens its peers' buffers (the stand-in's IPC
// handles name their memfds); between threads it reads them in place. Copies and reductions
// run on the "device", nothing is staged through host memory, and a rank that passes host
// buffers still gets exact results. Ranks as threads and as processes.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "braid/braid.h"
#include "device/device.h"
#include "fake_cuda.h"
#include "test_util.h"

namespace braid::test {
namespace {

// Floats per rank: several pieces at the default 128 KiB grain.
constexpr size_t kCount = 100003;

// n floats of device memory (the runtime's), or of host memory for a rank that passes host
// buffers; every element -1.
struct Buffer {
  Buffer(size_t n, bool host) : host_(host) {
    if (host) {
      vec_.assign(n, -1.0f);
      p = vec_.data();
    } else {
      device::runtime().alloc(reinterpret_cast<void**>(&p), n * sizeof(float));
      for (size_t i = 0; i < n; ++i) p[i] = -1.0f;
    }
  }
  ~Buffer() {
    if (!host_) device::runtime().free(p);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* p = nullptr;

 private:
  bool host_;
  std::vector<float> vec_;
};

float input(int rank, size_t i) {
  return static_cast<float>(rank + 1) * 0.5f + static_cast<float>(i % 29);
}

// The first element of n at got that differs from want(i), as a message, or "".
template <typename Want>
std::string check(const char* what, const float* got, size_t n, const Want& want) {
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want(i))
      return std::string(what) + ": element " + std::to_string(i) + " is " +
             std::to_string(got[i]) + ", expected " + std::to_string(want(i));
  return "";
}

// All-reduce (out of place and in place), reduce-scatter, all-gather, broadcast and a ring
// of send/recv on one rank, each checked exactly. hostRank: this rank passes host buffers.
std::string exchange(braidComm_t comm, int rank, int nranks, bool hostRank) {
  const size_t n = static_cast<size_t>(nranks);
  auto sum = [nranks](size_t i) {
    float s = 0;
    for (int r = 0; r < nranks; ++r) s += input(r, i);
    return s;
  };
  Buffer in(kCount * n, hostRank), out(kCount * n, hostRank);
  for (size_t i = 0; i < kCount * n; ++i) in.p[i] = input(rank, i);
  std::string e;
  if (braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
    return std::string("all-reduce: ") + braidGetLastError(comm);
  if (!(e = check("all-reduce", out.p, kCount, sum)).empty()) return e;
  if (braidAllReduce(in.p, in.p, kCount, braidFloat32, braidMax, comm, nullptr) != braidSuccess)
    return std::string("in-place all-reduce: ") + braidGetLastError(comm);
  if (!(e = check("in-place all-reduce (max)", in.p, kCount, [nranks](size_t i) {
          return input(nranks - 1, i);
        })).empty())
    return e;
  for (size_t i = 0; i < kCount * n; ++i) in.p[i] = input(rank, i);
  if (braidReduceScatter(in.p, out.p, kCount, braidFloat32, braidSum, comm, nullptr) !=
      braidSuccess)
    return std::string("reduce-scatter: ") + braidGetLastError(comm);
  const size_t mine = static_cast<size_t>(rank) * kCount;
  if (!(e = check("reduce-scatter", out.p, kCount, [&](size_t i) {
          return sum(mine + i);
        })).empty())
    return e;
  if (braidAllGather(in.p, out.p, kCount, braidFloat32, comm, nullptr) != braidSuccess)
    return std::string("all-gather: ") + braidGetLastError(comm);
  if (!(e = check("all-gather", out.p, kCount * n, [](size_t i) {
          return input(static_cast<int>(i / kCount), i % kCount);
        })).empty())
    return e;
  const int root = nranks - 1;
  if (braidBroadcast(in.p, out.p, kCount, braidFloat32, root, comm, nullptr) != braidSuccess)
    return std::string("broadcast: ") + braidGetLastError(comm);
  if (!(e = check("broadcast", out.p, kCount, [root](size_t i) { return input(root, i); })).empty())
    return e;
  braidGroupStart();
  braidSend(in.p, kCount, braidFloat32, (rank + 1) % nranks, comm, nullptr);
  braidRecv(out.p, kCount, braidFloat32, (rank + nranks - 1) % nranks, comm, nullptr);
  if (braidGroupEnd() != braidSuccess) return std::string("send/recv: ") + braidGetLastError(comm);
  const int from = (rank + nranks - 1) % nranks;
  return check("send/recv", out.p, kCount, [from](size_t i) { return input(from, i); });
}

// What the counters of a rank run as a process must show after its exchange, or "": device
// memory went to and from its peers (exported, opened), nothing was staged.
std::string checkPath() {
  const FakeCudaStats& st = fakeCudaStats();
  const auto counts = " (staged copies " + std::to_string(st.syncCopies) + ", device reductions " +
                      std::to_string(st.deviceReduces) + ", exports " +
                      std::to_string(st.ipcExports) + ", opens " + std::to_string(st.ipcOpens) +
                      ")";
  if (!config().cudaIpc) {
    if (st.syncCopies == 0 || st.ipcOpens != 0) return "BRAID_CUDA_IPC=0 did not stage" + counts;
    return "";
  }
  if (st.syncCopies != 0) return "a call was staged" + counts;
  if (st.deviceReduces == 0) return "no reduction ran on the device" + counts;
  if (st.ipcExports == 0 || st.ipcOpens == 0)
    return "no device memory went between the processes" + counts;
  return "";
}

// The children's settings where a test needs the device path whatever the caller's
// environment says (the counters it checks depend on it).
const std::vector<std::string> kIpcOn = {"BRAID_CUDA_IPC=1", "BRAID_CHUNKSIZE=131072"};

class CudaIpc : public ::testing::Test {
 protected:
  void SetUp() override { device::setRuntimeForTesting(&fakeCudaRuntime(false)); }
  void TearDown() override { device::setRuntimeForTesting(nullptr); }
};

class CudaIpcRanks : public CudaIpc, public ::testing::WithParamInterface<int> {};

TEST_P(CudaIpcRanks, DeviceToDeviceBetweenThreads) {
  const int n = GetParam();
  const FakeCudaStats& st = fakeCudaStats();
  const uint64_t staged = st.syncCopies, reduced = st.deviceReduces, opened = st.ipcOpens;
  auto errors = runThreads(n, [n](braidComm_t c, int r) { return exchange(c, r, n, false); });
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(st.ipcOpens, opened) << "threads of one process opened each other's memory";
  if (!config().cudaIpc) {  // BRAID_CUDA_IPC=0 in the environment: staged
    EXPECT_GT(st.syncCopies, staged) << "BRAID_CUDA_IPC=0 did not stage";
    return;
  }
  EXPECT_EQ(st.syncCopies, staged) << "a call was staged through host memory";
  EXPECT_GT(st.deviceReduces, reduced) << "no reduction ran on the device";
}

TEST_P(CudaIpcRanks, DeviceToDeviceBetweenProcesses) {
  const int n = GetParam();
  const auto results = runProcesses(n, "ipc", kIpcOn);
  EXPECT_EQ(failedChildren(results), "");
  EXPECT_TRUE(shmLeftovers(results).empty());
}

// BRAID_CUDA_IPC=0: the same calls are staged through host memory, with the same results.
TEST_P(CudaIpcRanks, StagedWhenTurnedOff) {
  const int n = GetParam();
  const auto results = runProcesses(n, "ipc", {"BRAID_CUDA_IPC=0"});
  EXPECT_EQ(failedChildren(results), "");
}

// Rank 0 passes host buffers while its peers pass device memory: it receives device pieces
// and sends host ones, and every rank's results are still exact.
TEST_P(CudaIpcRanks, OneRankWithHostBuffers) {
  const int n = GetParam();
  auto errors = runThreads(n, [n](braidComm_t c, int r) { return exchange(c, r, n, r == 0); });
  for (const auto& e : errors) ADD_FAILURE() << e;
  const auto results = runProcesses(n, "ipc-host0");
  EXPECT_EQ(failedChildren(results), "");
}

INSTANTIATE_TEST_SUITE_P(NRanks, CudaIpcRanks, ::testing::Values(2, 3, 4));

// Two thread ranks on two devices: with peer access each reads the other's memory in place;
// without it (as between GPUs that cannot reach each other) device memory goes through the
// FIFO's host memory. Exact results either way.
TEST_F(CudaIpc, RanksOnTwoDevicesWithAndWithoutPeerAccess) {
  for (bool peerAccess : {true, false}) {
    fakeCudaStats().noPeerAccess.store(!peerAccess);
    braidComm_t comms[2];
    const int devs[2] = {0, 1};
    ASSERT_EQ(braidCommInitAll(comms, 2, devs), braidSuccess) << braidGetLastError(nullptr);
    std::string errors[2];
    {
      std::vector<std::jthread> ranks;
      for (int r = 0; r < 2; ++r)
        ranks.emplace_back([&, r] { errors[r] = exchange(comms[r], r, 2, false); });
    }
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(errors[r], "") << (peerAccess ? "with" : "without") << " peer access";
      EXPECT_EQ(braidCommDestroy(comms[r]), braidSuccess);
    }
  }
  fakeCudaStats().noPeerAccess.store(false);
}

// Calls on CUDA streams through more shapes than the plan cache holds, with an algorithm that
// needs scratch: the device scratch is the communicator's, grown (never freed) on the proxy,
// and all of it is freed with the communicators.
TEST_F(CudaIpc, DeviceScratchIsFreedWithTheCommunicator) {
  const size_t live = fakeLiveAllocations();
  auto errors = runThreads(2, [](braidComm_t c, int r) -> std::string {
    if (braidCommSetAlgorithm(c, "allreduce", "recursive_doubling") != braidSuccess)
      return std::string("braidCommSetAlgorithm: ") + braidGetLastError(c);
    FakeStream cuda;
    braidStream_t s = nullptr;
    if (braidStreamCreateCuda(&s, &cuda) != braidSuccess)
      return std::string("braidStreamCreateCuda: ") + braidGetLastError(nullptr);
    Buffer in(1000, false), out(1000, false);
    for (size_t i = 0; i < 1000; ++i) in.p[i] = input(r, i);
    std::string e;
    for (size_t n = 700; n < 1000 && e.empty(); ++n)  // 300 shapes: the cache clears once
      if (braidAllReduce(in.p, out.p, n, braidFloat32, braidSum, c, s) != braidSuccess)
        e = std::string("all-reduce: ") + braidGetLastError(c);
    if (braidStreamSynchronize(s) != braidSuccess && e.empty())
      e = std::string("braidStreamSynchronize: ") + braidGetLastError(nullptr);
    braidStreamDestroy(s);
    if (e.empty())
      e = check("the last all-reduce", out.p, 999,
                [](size_t i) { return input(0, i) + input(1, i); });
    return e;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_EQ(fakeLiveAllocations(), live) << "device memory left after the communicators went";
}

// braidCommMemStats counts the device scratch and staging block a device-to-device all-reduce
// grew (recursive doubling on 3 ranks: the rank outside the power of two needs scratch);
// braidCommSuspend with BRAID_SUSPEND_MEM frees them (0 bytes, "suspended", calls refused),
// braidCommResume allocates them again at the same size and calls run again.
TEST_F(CudaIpc, SuspendReleasesTheDeviceMemoryAndResumeRestoresIt) {
  std::atomic<int> holding{0};  // ranks whose call grew device memory (not every rank's does)
  auto errors = runThreads(3, [&holding](braidComm_t c, int r) -> std::string {
    if (braidCommSetAlgorithm(c, "allreduce", "recursive_doubling") != braidSuccess)
      return std::string("braidCommSetAlgorithm: ") + braidGetLastError(c);
    Buffer in(kCount, false), out(kCount, false);
    for (size_t i = 0; i < kCount; ++i) in.p[i] = input(r, i);
    auto reduce = [&] {
      return braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, c, nullptr);
    };
    auto stat = [&](braidCommMemStat_t s) {
      uint64_t v = ~0ull;
      return braidCommMemStats(c, s, &v) == braidSuccess ? v : ~0ull;
    };
    if (reduce() != braidSuccess) return std::string("all-reduce: ") + braidGetLastError(c);
    const uint64_t held = stat(braidStatGpuMemTotal);
    std::string e;
    holding += held > 0;
    if (held == ~0ull || stat(braidStatGpuMemSuspend) != held ||
        stat(braidStatGpuMemPersist) != 0 || stat(braidStatGpuMemSuspended) != 0)
      e += "figures before suspending: total " + std::to_string(held) + ", releasable " +
           std::to_string(stat(braidStatGpuMemSuspend)) + "; ";
    if (braidCommSuspend(c, 2) != braidInvalidArgument) e += "flags 2 accepted; ";
    if (braidCommResume(c) != braidInvalidUsage) e += "resume while running accepted; ";
    if (braidCommSuspend(c, BRAID_SUSPEND_MEM) != braidSuccess)
      return e + "suspend: " + braidGetLastError(c);
    if (stat(braidStatGpuMemTotal) != 0 || stat(braidStatGpuMemSuspended) != 1)
      e += "figures while suspended; ";
    if (braidCommSuspend(c, 0) != braidInvalidUsage) e += "a second suspend accepted; ";
    if (reduce() != braidInvalidUsage) e += "a call ran while suspended; ";
    if (braidCommResume(c) != braidSuccess) return e + "resume: " + braidGetLastError(c);
    if (stat(braidStatGpuMemTotal) != held || stat(braidStatGpuMemSuspended) != 0)
      e += "figures after resuming; ";
    if (reduce() != braidSuccess) return e + "all-reduce after resuming: " + braidGetLastError(c);
    return e + check("the all-reduce after resuming", out.p, kCount,
                     [](size_t i) { return input(0, i) + input(1, i) + input(2, i); });
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_GT(holding.load(), 0) << "no rank held device memory to release";
}

// Cells too small for an IPC handle (BRAID_CHUNKSIZE=64): device memory goes through the
// FIFO's host memory instead, with the same results.
TEST_F(CudaIpc, CellsTooSmallForAHandleCopyThroughHostMemory) {
  const auto results =
      runProcesses(2, "ipc-unchecked", {"BRAID_CHUNKSIZE=64", "BRAID_BUFFSIZE=64K"});
  EXPECT_EQ(failedChildren(results), "");
}

// Each rank's connections close the handles they opened when the communicator goes.
TEST_F(CudaIpc, HandlesAreClosedWithTheCommunicator) {
  const auto results = runProcesses(2, "ipc-closes", kIpcOn);
  EXPECT_EQ(failedChildren(results), "");
}

// A rank that cannot open its peer's buffer fails its call, naming CUDA IPC, and so does the
// peer, which would otherwise wait for it: neither hangs.
TEST_F(CudaIpc, AHandleThatCannotBeOpenedFailsBothRanks) {
  const auto results =
      runProcesses(2, "ipc-open-fails", {"BRAID_TIMEOUT=20", kIpcOn[0], kIpcOn[1]});
  EXPECT_EQ(failedChildren(results), "");
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  using braid::test::Buffer;
  using braid::test::exchange;
  using braid::test::kCount;
  // host0: rank 0 passes host buffers; checked: the counters must show the device path.
  auto role = [](bool host0, bool checked) {
    return [host0, checked](braidComm_t c, int r, int n) {
      std::string e = exchange(c, r, n, host0 && r == 0);
      if (e.empty() && checked) e = braid::test::checkPath();
      if (!e.empty()) std::fprintf(stderr, "rank %d: %s\n", r, e.c_str());
      return e.empty() ? 0 : 1;
    };
  };
  braid::test::registerChildRole("ipc", role(false, true));
  braid::test::registerChildRole("ipc-host0", role(true, false));
  braid::test::registerChildRole("ipc-unchecked", role(false, false));
  // The exchange, then the communicator destroyed: every handle opened is closed.
  braid::test::registerRawChildRole("ipc-closes", [](int r, int n) {
    braidUniqueId id;
    braidComm_t c = nullptr;
    if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess ||
        braidCommInitRank(&c, n, id, r) != braidSuccess) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", r, braidGetLastError(nullptr));
      return 3;
    }
    std::string e = exchange(c, r, n, false);
    const braid::test::FakeCudaStats& st = braid::test::fakeCudaStats();
    if (braidCommDestroy(c) != braidSuccess && e.empty())
      e = std::string("braidCommDestroy: ") + braidGetLastError(nullptr);
    if (e.empty() && (st.ipcOpens == 0 || st.ipcCloses != st.ipcOpens))
      e = "opened " + std::to_string(st.ipcOpens) + " handles, closed " +
          std::to_string(st.ipcCloses);
    if (!e.empty()) std::fprintf(stderr, "rank %d: %s\n", r, e.c_str());
    return e.empty() ? 0 : 1;
  });
  // Rank 1's first open fails.
  braid::test::registerChildRole("ipc-open-fails", [](braidComm_t c, int r, int) {
    if (r == 1) braid::test::fakeCudaStats().failOpens.store(1);
    Buffer in(kCount, false), out(kCount, false);
    const braidResult_t res =
        braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, c, nullptr);
    const std::string msg = braidGetLastError(c);
    if (res == braidSuccess) {
      std::fprintf(stderr, "rank %d: the all-reduce succeeded\n", r);
      return 1;
    }
    if (r == 1 && msg.find("CUDA IPC") == std::string::npos) {
      std::fprintf(stderr, "rank 1: the message does not name CUDA IPC: %s\n", msg.c_str());
      return 1;
    }
    return 0;
  });
  return braid::test::fakeCudaTestMain(argc, argv);
}
