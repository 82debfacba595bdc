// Calls ordered with a CUDA stream (braidStreamCreateCuda), on the stand-in runtime of
// fake_cuda.h: the call returns before the stream reaches it, runs after the work queued
// before it, and the work queued after it sees its result; a graph replays it; a failed call
// still lets the stream go on. Ranks as threads and as processes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "device/device.h"
#include "fake_cuda.h"
#include "test_util.h"

namespace braid::test {
namespace {

constexpr size_t kCount = 4097;  // floats: several pieces, and not a multiple of anything

// Device buffers of the stand-in runtime, freed at the end of the scope.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) {
    device::runtime().alloc(reinterpret_cast<void**>(&p), n * sizeof(float));
    for (size_t i = 0; i < n; ++i) p[i] = -1.0f;
  }
  ~DeviceFloats() { device::runtime().free(p); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* p = nullptr;
};

float input(int rank, size_t i, int round) {
  return static_cast<float>(rank + 1) * 0.5f + static_cast<float>(i % 13) + 100.0f * round;
}

// The all-reduce sum of input() over nranks ranks (exact: small integers and halves).
float sum(int nranks, size_t i, int round) {
  float s = 0;
  for (int r = 0; r < nranks; ++r) s += input(r, i, round);
  return s;
}

std::string checkSum(const std::vector<float>& seen, int nranks, int round, const char* what) {
  for (size_t i = 0; i < kCount; ++i)
    if (seen[i] != sum(nranks, i, round))
      return std::string(what) + ": element " + std::to_string(i) + " is " +
             std::to_string(seen[i]) + ", expected " + std::to_string(sum(nranks, i, round));
  return "";
}

// One rank: on a held stream, a "kernel" writes the input, the all-reduce and an all-gather
// are queued, and a "kernel" after them copies the results out. Nothing may have run when
// the calls return; once the stream is released, the kernels after the calls see their
// results.
std::string orderedOnStream(braidComm_t comm, int rank, int nranks) {
  FakeStream cuda;
  braidStream_t s = nullptr;
  if (braidStreamCreateCuda(&s, &cuda) != braidSuccess)
    return std::string("braidStreamCreateCuda: ") + braidGetLastError(nullptr);
  DeviceFloats in(kCount), out(kCount), gathered(static_cast<size_t>(nranks));
  std::vector<float> seenSum(kCount, -2.0f), seenGather(static_cast<size_t>(nranks), -2.0f);
  cuda.hold();
  cuda.push([&] {
    for (size_t i = 0; i < kCount; ++i) in.p[i] = input(rank, i, 0);
  });
  std::string e;
  if (braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, comm, s) != braidSuccess ||
      braidAllGather(out.p, gathered.p, 1, braidFloat32, comm, s) != braidSuccess)
    e = std::string("queueing: ") + braidGetLastError(comm);
  cuda.push([&] {
    std::memcpy(seenSum.data(), out.p, kCount * sizeof(float));
    std::memcpy(seenGather.data(), gathered.p, seenGather.size() * sizeof(float));
  });
  if (e.empty() && out.p[0] != -1.0f) e = "the all-reduce ran before its stream reached it";
  cuda.release();
  if (braidStreamSynchronize(s) != braidSuccess && e.empty())
    e = std::string("braidStreamSynchronize: ") + braidGetLastError(nullptr);
  if (e.empty()) e = checkSum(seenSum, nranks, 0, "the kernel after the all-reduce");
  for (int r = 0; e.empty() && r < nranks; ++r)
    if (seenGather[static_cast<size_t>(r)] != sum(nranks, 0, 0))
      e = "the kernel after the all-gather saw " + std::to_string(seenGather[r]) + " from rank " +
          std::to_string(r);
  braidStreamDestroy(s);
  return e;
}

class CudaStream : public ::testing::Test {
 protected:
  void SetUp() override { device::setRuntimeForTesting(&fakeCudaRuntime(false)); }
  void TearDown() override { device::setRuntimeForTesting(nullptr); }
};

class CudaStreamRanks : public CudaStream, public ::testing::WithParamInterface<int> {};

// One rank on one stand-in stream, with device buffers of kCount floats. What a test has not
// ended itself (it sets the member to NULL) ends with it.
struct OneRank {
  // legacy: on the legacy default stream (cudaStream_t NULL), which `cuda` then names.
  explicit OneRank(bool legacy = false) : cuda(legacy ? fakeLegacyStream() : own) {
    int dev = 0;
    if (braidCommInitAll(&comm, 1, &dev) != braidSuccess ||
        braidStreamCreateCuda(&s, legacy ? nullptr : &own) != braidSuccess)
      ADD_FAILURE() << "setup: " << braidGetLastError(nullptr);
  }
  ~OneRank() {
    if (s) EXPECT_EQ(braidStreamDestroy(s), braidSuccess) << braidGetLastError(nullptr);
    if (comm) EXPECT_EQ(braidCommDestroy(comm), braidSuccess) << braidGetLastError(nullptr);
  }
  braidResult_t allReduce() {
    return braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, comm, s);
  }
  braidComm_t comm = nullptr;
  FakeStream own;
  FakeStream& cuda;
  braidStream_t s = nullptr;
  DeviceFloats in{kCount}, out{kCount};
};

TEST_P(CudaStreamRanks, CallsAreOrderedWithTheStreamsKernelsThreads) {
  const int n = GetParam();
  auto errors = runThreads(n, [n](braidComm_t c, int r) { return orderedOnStream(c, r, n); });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

TEST_P(CudaStreamRanks, CallsAreOrderedWithTheStreamsKernelsProcesses) {
  const int n = GetParam();
  auto results = runProcesses(n, "ordered");
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

INSTANTIATE_TEST_SUITE_P(NRanks, CudaStreamRanks, ::testing::Values(1, 2, 3, 4));

// A graph captured once and launched three times runs the all-reduce three times, each on
// the input the kernel before it wrote in that replay. Captured calls are not counted as
// queued work, so destroying the communicators afterwards does not wait for more replays.
TEST_F(CudaStream, AGraphReplaysTheCall) {
  constexpr int kRanks = 2, kReplays = 3;
  auto errors = runThreads(kRanks, [](braidComm_t comm, int rank) -> std::string {
    FakeStream cuda;
    braidStream_t s = nullptr;
    if (braidStreamCreateCuda(&s, &cuda) != braidSuccess) return braidGetLastError(nullptr);
    DeviceFloats in(kCount), out(kCount);
    int replay = 0;
    std::vector<std::vector<float>> seen(kReplays, std::vector<float>(kCount, -2.0f));
    cuda.beginCapture();
    cuda.push([&] {
      for (size_t i = 0; i < kCount; ++i) in.p[i] = input(rank, i, replay);
    });
    braidResult_t res = braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, comm, s);
    cuda.push([&] { std::memcpy(seen[replay++].data(), out.p, kCount * sizeof(float)); });
    const std::vector<FakeStream::Op> graph = cuda.endCapture();
    std::string e = res == braidSuccess ? "" : std::string("capture: ") + braidGetLastError(comm);
    if (e.empty() && out.p[0] != -1.0f) e = "the captured all-reduce ran during capture";
    for (int k = 0; e.empty() && k < kReplays; ++k) cuda.launch(graph);
    if (braidStreamSynchronize(s) != braidSuccess && e.empty()) e = braidGetLastError(nullptr);
    for (int k = 0; e.empty() && k < kReplays; ++k)
      e = checkSum(seen[k], kRanks, k, ("replay " + std::to_string(k)).c_str());
    braidStreamDestroy(s);
    return e;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// A call that fails on the proxy (here its staging copy) still releases the stream: the work
// after it runs, braidStreamSynchronize reports the failure, and so does
// braidCommGetAsyncError.
TEST_F(CudaStream, AFailedCallStillReleasesTheStream) {
  OneRank one;
  for (size_t i = 0; i < kCount; ++i) one.in.p[i] = input(0, i, 0);
  fakeCudaStats().failCopies.store(1);
  bool after = false;
  EXPECT_EQ(one.allReduce(), braidSuccess);
  one.cuda.push([&] { after = true; });
  EXPECT_EQ(braidStreamSynchronize(one.s), braidUnhandledCudaError);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("fake CUDA: copy of"), std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_TRUE(after) << "the stream did not go on after the failed call";
  EXPECT_EQ(one.out.p[0], -1.0f);
  // No caller waited for it: it is the communicator's asynchronous error, as in NCCL.
  braidResult_t async = braidSuccess;
  EXPECT_EQ(braidCommGetAsyncError(one.comm, &async), braidSuccess);
  EXPECT_EQ(async, braidUnhandledCudaError);
  EXPECT_NE(std::string(braidGetLastError(one.comm)).find("fake CUDA: copy of"), std::string::npos)
      << braidGetLastError(one.comm);
  EXPECT_EQ(braidCommAbort(one.comm), braidSuccess);
  one.comm = nullptr;
}

// One thread, every rank's call in one group on one CUDA stream: one hand-off runs them side
// by side (queued one after the other, the first would wait for the others forever).
TEST_F(CudaStream, OneGroupOfEveryRankOnOneStream) {
  constexpr int kRanks = 3;
  braidComm_t comms[kRanks];
  const int devs[kRanks] = {0, 0, 0};
  ASSERT_EQ(braidCommInitAll(comms, kRanks, devs), braidSuccess);
  FakeStream cuda;
  braidStream_t s = nullptr;
  ASSERT_EQ(braidStreamCreateCuda(&s, &cuda), braidSuccess);
  std::vector<std::unique_ptr<DeviceFloats>> in, out;
  cuda.hold();
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  for (int r = 0; r < kRanks; ++r) {
    in.push_back(std::make_unique<DeviceFloats>(kCount));
    out.push_back(std::make_unique<DeviceFloats>(kCount));
    for (size_t i = 0; i < kCount; ++i) in[r]->p[i] = input(r, i, 0);
    braidAllReduce(in[r]->p, out[r]->p, kCount, braidFloat32, braidSum, comms[r], s);
  }
  const uint64_t syncBefore = fakeCudaStats().syncCopies.load();
  const uint64_t proxyBefore = fakeCudaStats().proxyCopies.load();
  ASSERT_EQ(braidGroupEnd(), braidSuccess) << braidGetLastError(nullptr);
  cuda.release();
  EXPECT_EQ(braidStreamSynchronize(s), braidSuccess) << braidGetLastError(nullptr);
  // Each rank's share ran on a thread of its own, staging as the proxy does: the copies that
  // wait for the whole device would wait for this very stream.
  EXPECT_EQ(fakeCudaStats().syncCopies.load(), syncBefore);
  EXPECT_GE(fakeCudaStats().proxyCopies.load(), proxyBefore + 2 * kRanks);
  for (int r = 0; r < kRanks; ++r) {
    std::vector<float> got(out[r]->p, out[r]->p + kCount);
    EXPECT_EQ(checkSum(got, kRanks, 0, "the all-reduce"), "") << "rank " << r;
  }
  EXPECT_EQ(braidStreamDestroy(s), braidSuccess);
  for (braidComm_t c : comms) EXPECT_EQ(braidCommDestroy(c), braidSuccess);
}

// A call that waits for a peer that never comes ends when its communicator is aborted from
// another thread: the stream goes on, braidCommAbort returns, and the stream reports why.
TEST_F(CudaStream, AbortEndsACallTheStreamWaitsFor) {
  braidComm_t comms[2];
  const int devs[2] = {0, 0};
  ASSERT_EQ(braidCommInitAll(comms, 2, devs), braidSuccess);
  FakeStream cuda;
  braidStream_t s = nullptr;
  ASSERT_EQ(braidStreamCreateCuda(&s, &cuda), braidSuccess);
  DeviceFloats in(kCount), out(kCount);
  bool after = false;
  // Rank 1 never joins this all-reduce.
  ASSERT_EQ(braidAllReduce(in.p, out.p, kCount, braidFloat32, braidSum, comms[0], s), braidSuccess);
  cuda.push([&] { after = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(after) << "the stream did not wait for the call";
  EXPECT_EQ(braidCommAbort(comms[0]), braidSuccess);
  EXPECT_NE(braidStreamSynchronize(s), braidSuccess);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("abort"), std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_TRUE(after);
  EXPECT_EQ(braidStreamDestroy(s), braidSuccess);
  EXPECT_EQ(braidCommAbort(comms[1]), braidSuccess);
}

// A communicator aborted while its call waits for the CUDA stream to reach it (here the
// stream is held, as behind a kernel that does not end): the abort does not wait for the
// stream, and when the stream gets there the call fails without touching the freed
// communicator, and lets the stream go on.
TEST_F(CudaStream, AbortDoesNotWaitForAStreamThatHasNotReachedTheCall) {
  OneRank one;
  one.cuda.hold();
  ASSERT_EQ(one.allReduce(), braidSuccess);
  bool after = false;
  one.cuda.push([&] { after = true; });
  EXPECT_EQ(braidCommAbort(one.comm), braidSuccess);  // returns with the call still queued
  one.comm = nullptr;
  one.cuda.release();
  EXPECT_EQ(braidStreamSynchronize(one.s), braidInvalidUsage);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("destroyed or aborted"), std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_TRUE(after);
  EXPECT_EQ(one.out.p[0], -1.0f);
}

// A wait that cannot be queued leaves the call running and its word set with no reset after
// it: the stream then refuses further calls rather than let them pass unordered.
TEST_F(CudaStream, AStreamThatCannotWaitRefusesLaterCalls) {
  OneRank one;
  fakeCudaStats().failWaits.store(1);
  EXPECT_EQ(one.allReduce(), braidUnhandledCudaError);
  EXPECT_EQ(one.allReduce(), braidInvalidUsage);
  EXPECT_NE(std::string(braidGetLastError(one.comm)).find("cuStreamWaitValue32 failed"),
            std::string::npos)
      << braidGetLastError(one.comm);
  EXPECT_EQ(braidStreamSynchronize(one.s), braidSuccess) << braidGetLastError(nullptr);
}

// A group whose work cannot be queued on its CUDA stream says so from braidGroupEnd; nothing
// is left queued for braidCommDestroy to wait for.
TEST_F(CudaStream, AGroupThatCannotBeQueuedFails) {
  OneRank one;
  fakeCudaStats().failHostFuncs.store(1);
  ASSERT_EQ(braidGroupStart(), braidSuccess);
  EXPECT_EQ(one.allReduce(), braidSuccess);
  EXPECT_EQ(braidGroupEnd(), braidUnhandledCudaError);
  EXPECT_NE(std::string(braidGetLastError(one.comm)).find("cudaLaunchHostFunc failed"),
            std::string::npos)
      << braidGetLastError(one.comm);
}

// Two threads queue calls on one Braid stream (one CUDA stream, each thread its own
// one-rank communicator): each call's hand-off, wait and reset stay together, or the two
// calls' waits could share one setting of the word and the later one wait forever.
TEST_F(CudaStream, TwoThreadsQueueOnOneStream) {
  FakeStream cuda;
  braidStream_t s = nullptr;
  ASSERT_EQ(braidStreamCreateCuda(&s, &cuda), braidSuccess);
  constexpr int kCalls = 2000;
  auto caller = [s](std::string* error) {
    braidComm_t comm = nullptr;
    int dev = 0;
    if (braidCommInitAll(&comm, 1, &dev) != braidSuccess) {
      *error = braidGetLastError(nullptr);
      return;
    }
    DeviceFloats buf(16);
    for (int i = 0; i < kCalls && error->empty(); ++i)
      if (braidAllReduce(buf.p, buf.p, 16, braidFloat32, braidSum, comm, s) != braidSuccess)
        *error = braidGetLastError(comm);
    if (braidStreamSynchronize(s) != braidSuccess && error->empty())
      *error = braidGetLastError(nullptr);
    braidCommDestroy(comm);
  };
  std::string e0, e1;
  std::thread other(caller, &e1);
  caller(&e0);
  other.join();
  EXPECT_EQ(e0, "");
  EXPECT_EQ(e1, "");
  EXPECT_EQ(braidStreamDestroy(s), braidSuccess);
}

// braidCommInitAll puts rank r on devlist[r], and refuses a device that cannot be selected
// before any rank starts (a rank that failed later would leave the others waiting).
TEST_F(CudaStream, InitAllPlacesRanksOnTheirDevices) {
  braidComm_t comms[2];
  const int good[2] = {1, 0};
  ASSERT_EQ(braidCommInitAll(comms, 2, good), braidSuccess) << braidGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    int dev = -1;
    EXPECT_EQ(braidCommCuDevice(comms[r], &dev), braidSuccess);
    EXPECT_EQ(dev, good[r]);
    EXPECT_EQ(braidCommDestroy(comms[r]), braidSuccess);
  }
  const int bad[2] = {0, kFakeDevices + 3};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(braidCommInitAll(comms, 2, bad), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("devlist[1] = 5"), std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(device::runtime().currentDevice(nullptr), 0) << "the caller's device changed";
}

// NULL is a CUDA stream too (the legacy default stream), not "no stream".
TEST_F(CudaStream, TheLegacyDefaultStreamOrdersCallsToo) {
  OneRank one(/*legacy=*/true);
  one.cuda.hold();
  one.cuda.push([&] {
    for (size_t i = 0; i < kCount; ++i) one.in.p[i] = input(0, i, 0);
  });
  EXPECT_EQ(one.allReduce(), braidSuccess);
  EXPECT_EQ(one.out.p[0], -1.0f) << "the call ran on the calling thread";
  one.cuda.release();
  EXPECT_EQ(braidStreamSynchronize(one.s), braidSuccess) << braidGetLastError(nullptr);
  std::vector<float> got(one.out.p, one.out.p + kCount);
  EXPECT_EQ(checkSum(got, 1, 0, "the all-reduce"), "");
}

TEST(CudaStreamArguments, RefusedClearly) {
  FakeStream cuda;
  EXPECT_EQ(braidStreamCreateCuda(nullptr, &cuda), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("stream is NULL"), std::string::npos);
  // The real runtime: without a device the stream is refused, saying so.
  std::string why;
  if (device::runtime().currentDevice(&why) >= 0) return;  // a machine with a GPU
  braidStream_t s = reinterpret_cast<braidStream_t>(&cuda);
  EXPECT_EQ(braidStreamCreateCuda(&s, &cuda), braidUnhandledCudaError);
  EXPECT_EQ(s, nullptr);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("braidStreamCreateCuda:"),
            std::string::npos)
      << braidGetLastError(nullptr);
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerChildRole("ordered", [](braidComm_t c, int r, int n) {
    std::string e = braid::test::orderedOnStream(c, r, n);
    if (!e.empty()) std::fprintf(stderr, "%s\n", e.c_str());
    return e.empty() ? 0 : 1;
  });
  return braid::test::fakeCudaTestMain(argc, argv);
}
