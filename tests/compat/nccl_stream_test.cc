// The NCCL drop-in on device communicators: each cudaStream_t an application passes gets a
// Braid stream ordered with it, so ncclAllReduce and ncclSend/ncclRecv return at once and the
// application's next kernel on that stream sees the result, with cudaStreamSynchronize alone
// (no Braid call) as the wait. Runs libnccl.so.2 over libbraid.so, on the stand-in CUDA
// runtime of fake_cuda.h installed in libbraid.so.
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "device/device.h"
#include "fake_cuda.h"

namespace braid::test {
namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = 1027;

TEST(NcclDropIn, CallsAreOrderedOnTheCallersCudaStream) {
  device::setRuntimeForTesting(&fakeCudaRuntime(false));
  ncclComm_t comms[kRanks];
  const int devs[kRanks] = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    int dev = -1;
    ASSERT_EQ(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    ASSERT_EQ(dev, 0) << "not a device communicator";
  }
  FakeStream streams[kRanks];
  float* in[kRanks];
  float* out[kRanks];
  float* peer[kRanks];
  std::vector<float> seen[kRanks], seenPeer[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    for (float** p : {&in[r], &out[r], &peer[r]}) {
      ASSERT_EQ(ncclMemAlloc(reinterpret_cast<void**>(p), kCount * sizeof(float)), ncclSuccess);
      std::fill(*p, *p + kCount, -1.0f);
    }
    seen[r].assign(kCount, -2.0f);
    seenPeer[r].assign(kCount, -2.0f);
    streams[r].hold();
    streams[r].push([r, &in] {
      for (size_t i = 0; i < kCount; ++i) in[r][i] = static_cast<float>(r * 1000 + i % 17);
    });
  }
  // nccl-tests' pattern: one thread, a group over every rank's communicator.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    auto s = reinterpret_cast<cudaStream_t>(&streams[r]);
    EXPECT_EQ(ncclAllReduce(in[r], out[r], kCount, ncclFloat32, ncclSum, comms[r], s), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    auto s = reinterpret_cast<cudaStream_t>(&streams[r]);
    EXPECT_EQ(ncclSend(in[r], kCount, ncclFloat32, (r + 1) % kRanks, comms[r], s), ncclSuccess);
    EXPECT_EQ(ncclRecv(peer[r], kCount, ncclFloat32, (r + 1) % kRanks, comms[r], s), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(out[r][0], -1.0f) << "rank " << r << "'s all-reduce ran before its stream reached it";
    streams[r].push([r, &out, &peer, &seen, &seenPeer] {
      std::memcpy(seen[r].data(), out[r], kCount * sizeof(float));
      std::memcpy(seenPeer[r].data(), peer[r], kCount * sizeof(float));
    });
    streams[r].release();
  }
  for (int r = 0; r < kRanks; ++r) streams[r].synchronize();  // cudaStreamSynchronize
  for (int r = 0; r < kRanks; ++r) {
    const int from = (r + 1) % kRanks;
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(seen[r][i], static_cast<float>(1000 + 2 * (i % 17))) << "rank " << r << " at " << i;
      ASSERT_EQ(seenPeer[r][i], static_cast<float>(from * 1000 + i % 17))
          << "rank " << r << " at " << i;
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    for (float* p : {in[r], out[r], peer[r]}) EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  }
  device::setRuntimeForTesting(nullptr);
}

// Two threads, each driving its rank on its own GPU, both on the NULL stream: NULL names a
// different stream on each device, so each rank's calls go to its own Braid stream (one
// shared one would run rank 0's call on the worker that rank 1's call waits behind).
TEST(NcclDropIn, TheNullStreamOfEachDeviceIsItsOwn) {
  device::setRuntimeForTesting(&fakeCudaRuntime(false));
  ncclComm_t comms[kRanks];
  const int devs[kRanks] = {0, 1};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  std::string errors[kRanks];
  auto rank = [&](int r) {
    device::runtime().setDevice(r);  // cudaSetDevice
    float* buf = nullptr;
    if (ncclMemAlloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float)) != ncclSuccess) {
      errors[r] = ncclGetLastError(nullptr);
      return;
    }
    for (int call = 0; call < 3; ++call) {
      std::fill(buf, buf + kCount, 0.0f);
      fakeLegacyStream(r).synchronize();
      std::fill(buf, buf + kCount, static_cast<float>(r + 1));
      if (ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comms[r], nullptr) != ncclSuccess)
        errors[r] = ncclGetLastError(comms[r]);
      fakeLegacyStream(r).synchronize();  // cudaStreamSynchronize(0)
      if (errors[r].empty() && buf[kCount - 1] != 3.0f)
        errors[r] = "call " + std::to_string(call) + ": " + std::to_string(buf[kCount - 1]);
    }
    ncclMemFree(buf);
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
  device::setRuntimeForTesting(nullptr);
}

// A call that fails on the proxy (its staging copy, here) is the communicator's
// asynchronous error, with its message from ncclGetLastError, as NCCL reports a failed kernel.
TEST(NcclDropIn, AFailedCallOnAStreamIsTheAsyncError) {
  device::setRuntimeForTesting(&fakeCudaRuntime(false));
  ncclComm_t comm;
  const int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess) << ncclGetLastError(nullptr);
  FakeStream stream;
  float* buf = nullptr;
  ASSERT_EQ(ncclMemAlloc(reinterpret_cast<void**>(&buf), kCount * sizeof(float)), ncclSuccess);
  fakeCudaStats().failCopies.store(1);
  EXPECT_EQ(ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comm,
                          reinterpret_cast<cudaStream_t>(&stream)),
            ncclSuccess);
  stream.synchronize();  // cudaStreamSynchronize: it does not hang
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclUnhandledCudaError);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("fake CUDA: copy of"), std::string::npos)
      << ncclGetLastError(comm);
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(ncclMemFree(buf), ncclSuccess);
  device::setRuntimeForTesting(nullptr);
}

}  // namespace
}  // namespace braid::test
