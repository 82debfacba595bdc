// A communicator's end: braidCommAbort from another thread while a call is blocked (the call
// returns, peers on the host fail at once naming the aborted rank), braidCommGetAsyncError
// after a failure, braidCommFinalize before braidCommDestroy. Ranks as threads and as
// processes. An exception inside an entry point (out of memory, a thread that cannot start)
// becomes an error code, never a crash.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/host_mem.h"
#include "test_util.h"

namespace braid::test {
namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rank 0 blocks in an all-reduce of 4 MiB rank 1 has not joined; after 0.3 s another thread
// aborts rank 0's communicator: its call returns "aborted" at once. Then rank 1 calls, gets
// what rank 0 sent before (the first half of the exchange) but not the rest, and fails within
// 2 s (BRAID_TIMEOUT is 300) naming rank 0; its communicator reports that as its
// asynchronous error, and braidCommFinalize returns it too.
constexpr size_t kCount = size_t{1} << 20;
TEST(Abort, BlockedCallReturnsAndPeersFailNamingTheRank) {
  braidComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(braidCommInitAll(comms, 2, nullptr), braidSuccess) << braidGetLastError(nullptr);
  braidResult_t res0 = braidSuccess;
  std::string msg0;
  double secs0 = 0;
  std::thread rank0([&] {
    std::vector<float> x(kCount, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    res0 = braidAllReduce(x.data(), x.data(), kCount, braidFloat32, braidSum, comms[0], nullptr);
    secs0 = since(t0);
    msg0 = braidGetLastError(nullptr);  // the thread's: comms[0] is freed by the abort
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(braidCommAbort(comms[0]), braidSuccess) << braidGetLastError(nullptr);
  rank0.join();
  EXPECT_EQ(res0, braidInvalidUsage);
  EXPECT_NE(msg0.find("aborted"), std::string::npos) << msg0;
  EXPECT_LT(secs0, 2.0);

  std::vector<float> y(kCount, 1.0f);
  const auto t1 = std::chrono::steady_clock::now();
  const braidResult_t res1 =
      braidAllReduce(y.data(), y.data(), kCount, braidFloat32, braidSum, comms[1], nullptr);
  const std::string msg1 = braidGetLastError(comms[1]);
  EXPECT_EQ(res1, braidRemoteError) << msg1;
  EXPECT_NE(msg1.find("rank 0"), std::string::npos) << msg1;
  EXPECT_LT(since(t1), 2.0);
  braidResult_t async = braidSuccess;
  EXPECT_EQ(braidCommGetAsyncError(comms[1], &async), braidSuccess);
  EXPECT_EQ(async, braidRemoteError);
  EXPECT_EQ(braidCommFinalize(comms[1]), braidRemoteError);
  EXPECT_EQ(braidCommDestroy(comms[1]), braidSuccess);
}

// Finalize waits for the work queued on streams, then refuses further calls; the
// asynchronous error stays braidSuccess; destroy follows.
TEST(Finalize, FinishesQueuedWorkThenRefusesCalls) {
  braidComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(braidCommInitAll(comms, 2, nullptr), braidSuccess) << braidGetLastError(nullptr);
  std::vector<std::string> errors(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      braidComm_t comm = comms[r];
      braidStream_t stream = nullptr;
      std::vector<int32_t> buf(1000, r + 1);
      if (braidStreamCreate(&stream) != braidSuccess) {
        errors[r] = "braidStreamCreate failed";
        return;
      }
      for (int i = 0; i < 3; ++i)
        braidAllReduce(buf.data(), buf.data(), buf.size(), braidInt32, braidSum, comm, stream);
      if (braidCommFinalize(comm) != braidSuccess) {
        errors[r] = std::string("finalize: ") + braidGetLastError(comm);
        braidStreamDestroy(stream);
        return;
      }
      // 1 + 2 = 3, then 6, then 12: all three calls ran before finalize returned.
      if (buf[0] != 12)
        errors[r] = "finalize returned before the queued work: " + std::to_string(buf[0]);
      if (braidAllReduce(buf.data(), buf.data(), 1, braidInt32, braidSum, comm, nullptr) !=
              braidInvalidUsage ||
          std::string(braidGetLastError(comm)).find("finalized") == std::string::npos)
        errors[r] += "; a call after finalize was not refused as finalized";
      braidResult_t async = braidInProgress;
      if (braidCommGetAsyncError(comm, &async) != braidSuccess || async != braidSuccess)
        errors[r] += "; the asynchronous error is not braidSuccess";
      braidStreamDestroy(stream);
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(errors[r].empty()) << "rank " << r << ": " << errors[r];
    EXPECT_EQ(braidCommDestroy(comms[r]), braidSuccess);
  }
  braidResult_t async = braidSuccess;
  EXPECT_EQ(braidCommGetAsyncError(nullptr, &async), braidInvalidArgument);
}

// braidCommInitRankConfig: a communicator's own timeout bounds its calls (1 s here, while
// BRAID_TIMEOUT is 300); a config not made by BRAID_CONFIG_INITIALIZER or with a bad
// timeout is refused naming the field.
TEST(Config, PerCommunicatorTimeoutAndBadConfigs) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  braidComm_t comms[2] = {nullptr, nullptr};
  std::vector<std::thread> ranks;
  std::vector<braidResult_t> init(2, braidSuccess);
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      braidConfig_t config = BRAID_CONFIG_INITIALIZER;
      config.timeoutSec = 1;
      init[r] = braidCommInitRankConfig(&comms[r], 2, id, r, &config);
    });
  for (auto& t : ranks) t.join();
  ASSERT_EQ(init[0], braidSuccess) << braidGetLastError(nullptr);
  ASSERT_EQ(init[1], braidSuccess) << braidGetLastError(nullptr);
  std::vector<float> x(1 << 20, 1.0f);  // rank 1 never joins this call
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(braidAllReduce(x.data(), x.data(), x.size(), braidFloat32, braidSum, comms[0], nullptr),
            braidTimeout);
  const double secs = since(t0);
  EXPECT_GE(secs, 0.9);
  EXPECT_LT(secs, 5.0);
  EXPECT_NE(std::string(braidGetLastError(comms[0])).find("rank 1"), std::string::npos);
  EXPECT_EQ(braidCommDestroy(comms[0]), braidSuccess);
  EXPECT_EQ(braidCommDestroy(comms[1]), braidSuccess);

  braidComm_t comm = nullptr;
  braidConfig_t bad = BRAID_CONFIG_INITIALIZER;
  bad.size = 8;
  EXPECT_EQ(braidCommInitRankConfig(&comm, 1, id, 0, &bad), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("config->size"), std::string::npos);
  bad = BRAID_CONFIG_INITIALIZER;
  bad.timeoutSec = -1;
  EXPECT_EQ(braidCommInitRankConfig(&comm, 1, id, 0, &bad), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("config->timeoutSec"), std::string::npos);
}

// config.checkCalls = 1 is BRAID_CHECK for one communicator (the environment has none here):
// a count that differs on one rank fails every rank with the list of calls. A config of the
// layout before the field (its size) is still accepted, and reads as the environment's.
TEST(Config, CheckCallsPerCommunicator) {
  ASSERT_EQ(std::getenv("BRAID_CHECK"), nullptr);
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.checkCalls = 1;
  std::vector<braidResult_t> res(3, braidSuccess);
  std::vector<std::string> msg(3);
  auto errors = runThreadsWithConfig(3, config, [&](braidComm_t comm, int rank) -> std::string {
    std::vector<float> buf(16, 1.0f);
    res[rank] = braidAllReduce(buf.data(), buf.data(), rank == 1 ? 0 : 10, braidFloat32, braidSum,
                               comm, nullptr);
    msg[rank] = braidGetLastError(comm);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(res[r], braidInvalidUsage) << "rank " << r;
    EXPECT_NE(msg[r].find("rank 1: all-reduce count 0 float op sum"), std::string::npos) << msg[r];
  }

  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  braidConfig_t old = BRAID_CONFIG_INITIALIZER;
  old.size = offsetof(braidConfig_t, checkCalls);
  braidComm_t comm = nullptr;
  ASSERT_EQ(braidCommInitRankConfig(&comm, 1, id, 0, &old), braidSuccess)
      << braidGetLastError(nullptr);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
}

// The abort as processes: rank 0 aborts from a second thread while its main thread is
// blocked; rank 1 calls 1 s later and must fail within 2 s naming rank 0.
int abortChild(int rank, int nranks) {
  braidUniqueId id;
  braidComm_t comm = nullptr;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess ||
      braidCommInitRank(&comm, nranks, id, rank) != braidSuccess) {
    std::printf("init: %s\n", braidGetLastError(nullptr));
    return 3;
  }
  std::vector<float> x(kCount, 1.0f);
  auto call = [&] {
    return braidAllReduce(x.data(), x.data(), kCount, braidFloat32, braidSum, comm, nullptr);
  };
  if (rank == 0) {
    std::thread aborter([comm] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      braidCommAbort(comm);
    });
    const braidResult_t res = call();
    aborter.join();
    std::printf("rank 0: %s: %s\n", braidGetErrorString(res), braidGetLastError(nullptr));
    return res == braidInvalidUsage ? 0 : 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  const braidResult_t res = call();
  const std::string msg = braidGetLastError(comm);
  const double secs = since(t0);
  std::printf("rank 1: %s after %.2f s: %s\n", braidGetErrorString(res), secs, msg.c_str());
  braidCommDestroy(comm);
  return res == braidRemoteError && msg.find("rank 0") != std::string::npos && secs < 2 ? 0 : 1;
}

// The cache a call's footprint is weighed against (streaming stores, single copy from
// braidMemAllocHost buffers): sysfs's figure as it is; without one, CPUID's through sysconf,
// which a hypervisor may make up, at most 32 MiB.
TEST(Config, AssumedCacheTrustsSysfsAndBoundsCpuid) {
  constexpr size_t MiB = size_t{1} << 20;
  EXPECT_EQ(assumedCacheBytes(96 * MiB, 508 * static_cast<long>(MiB)), 96 * MiB);  // X3D
  EXPECT_EQ(assumedCacheBytes(1 * MiB, 0), 1 * MiB);
  EXPECT_EQ(assumedCacheBytes(0, 508 * static_cast<long>(MiB)), 32 * MiB);  // made up
  EXPECT_EQ(assumedCacheBytes(0, 16 * static_cast<long>(MiB)), 16 * MiB);
  EXPECT_EQ(assumedCacheBytes(0, 0), kUnlistedCacheBytes);
  EXPECT_EQ(assumedCacheBytes(0, -1), kUnlistedCacheBytes);  // sysconf: unknown
}

// braidMemAllocHost's memory: page aligned, zeroed, writable; bad pointers and sizes are
// refused with messages naming the argument, and nothing is freed twice.
TEST(HostMemory, AllocatesFreesAndRefusesBadInput) {
  EXPECT_EQ(braidMemAllocHost(nullptr, 8), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("ptr is NULL"), std::string::npos);
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(braidMemAllocHost(&p, 0), braidSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(braidMemAllocHost(&p, size_t{1} << 50), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("size"), std::string::npos);
  ASSERT_EQ(braidMemAllocHost(&p, 10000), braidSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  auto* bytes = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < 10000; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  for (size_t i = 0; i < 10000; ++i) bytes[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(bytes[9999], static_cast<unsigned char>(9999));
  EXPECT_EQ(braidMemFreeHost(bytes + 1), braidInvalidArgument);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("not the start"), std::string::npos);
  int onStack = 0;
  EXPECT_EQ(braidMemFreeHost(&onStack), braidInvalidArgument);
  EXPECT_EQ(braidMemFreeHost(p), braidSuccess);
  EXPECT_EQ(braidMemFreeHost(p), braidInvalidArgument);  // freed already
  EXPECT_EQ(braidMemFreeHost(nullptr), braidSuccess);
}

// The receiver's side of a braidMemAllocHost buffer (hostmem::mapPeer and friends), with
// this process as the peer: a live allocation maps and reads back its bytes; a piece that
// names a closed descriptor, another file or a freed allocation is refused with a message
// saying which, never mapped; a probe that holds other bytes is refused.
TEST(HostMemory, MapsLiveAllocationsAndRefusesStaleOnes) {
  const int me = static_cast<int>(getpid());
  void* p = nullptr;
  ASSERT_EQ(braidMemAllocHost(&p, 3 * 4096), braidSuccess);
  auto* bytes = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < 3 * 4096; ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  hostmem::Ref ref;
  ASSERT_TRUE(hostmem::find(bytes + 4096, 100, &ref));
  EXPECT_EQ(ref.offset, 4096u);
  EXPECT_EQ(ref.bytes, 3u * 4096);
  EXPECT_FALSE(hostmem::find(bytes + 3 * 4096 - 10, 11, &ref)) << "past the end";
  ASSERT_TRUE(hostmem::find(bytes, 3 * 4096, &ref));

  std::string error;
  const char* base = hostmem::mapPeer(me, ref, &error);
  ASSERT_NE(base, nullptr) << error;
  EXPECT_NE(base, reinterpret_cast<const char*>(p)) << "a second mapping of the same memfd";
  for (size_t i = 0; i < 3 * 4096; ++i)
    ASSERT_EQ(static_cast<unsigned char>(base[i]), static_cast<unsigned char>(i * 7)) << i;
  bytes[5] = 99;  // shared, not a copy
  EXPECT_EQ(base[5], 99);
  hostmem::unmapPeer(base, ref.bytes);
  EXPECT_TRUE(hostmem::peerStillHolds(me, ref.fd, ref.ino));

  hostmem::Ref other = ref;
  other.ino += 1;  // the descriptor now names another file
  EXPECT_EQ(hostmem::mapPeer(me, other, &error), nullptr);
  EXPECT_NE(error.find("no longer the allocation"), std::string::npos) << error;
  other = ref;
  other.bytes += 4096;  // a size the allocation does not have
  EXPECT_EQ(hostmem::mapPeer(me, other, &error), nullptr);
  EXPECT_NE(error.find("no longer the allocation"), std::string::npos) << error;
  other = ref;
  other.fd = 1 << 20;  // no such descriptor
  EXPECT_EQ(hostmem::mapPeer(me, other, &error), nullptr);
  EXPECT_NE(error.find("cannot open its buffer through /proc"), std::string::npos) << error;

  std::string why;
  EXPECT_FALSE(hostmem::canMapPeer(me, -1, 1, &why));
  EXPECT_NE(why.find("no probe"), std::string::npos) << why;
  EXPECT_FALSE(hostmem::canMapPeer(me, ref.fd, 0x5eed5eed5eed5eedull, &why));
  EXPECT_NE(why.find("other bytes"), std::string::npos) << why;

  const uint32_t epoch = hostmem::freeEpoch();
  ASSERT_EQ(braidMemFreeHost(p), braidSuccess);
  EXPECT_NE(hostmem::freeEpoch(), epoch);
  EXPECT_FALSE(hostmem::peerStillHolds(me, ref.fd, ref.ino));
  EXPECT_EQ(hostmem::mapPeer(me, ref, &error), nullptr) << "a freed allocation";
  EXPECT_FALSE(error.empty());
}

// Mappings of braidMemAllocHost allocations in this process (its own and its peers'),
// from /proc/self/maps.
int hostMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("memfd:braid-host") != std::string::npos) ++n;
  return n;
}

// A child of two processes that read each other's braidMemAllocHost buffers in place
// (BRAID_CACHE_BYTES=1): each maps the peer's send and receive buffer; an unrelated free in
// the peer keeps those mappings, the peer's freeing its buffers drops them at its next piece.
int sharedMappingsChild(braidComm_t comm, int rank, int nranks) {
  const size_t count = 64 << 10;
  void *send = nullptr, *recv = nullptr, *other = nullptr;
  if (braidMemAllocHost(&send, count * 4) != braidSuccess ||
      braidMemAllocHost(&recv, count * 4) != braidSuccess)
    return 10;
  for (size_t i = 0; i < count; ++i) static_cast<float*>(send)[i] = static_cast<float>(rank + i);
  if (braidAllReduce(send, recv, count, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
    return 11;
  for (size_t i = 0; i < count; ++i)
    if (static_cast<float*>(recv)[i] != static_cast<float>(2 * i + (nranks - 1))) return 12;
  const int afterCall = hostMappings();
  if (afterCall != 4) {
    std::fprintf(stderr, "rank %d: %d braid-host mappings after the call, not 4\n", rank,
                 afterCall);
    return 13;
  }
  // An unrelated allocation, freed: the peer's mappings of the live buffers stay.
  if (braidMemAllocHost(&other, 4096) != braidSuccess || braidMemFreeHost(other) != braidSuccess)
    return 14;
  if (braidBarrier(comm, nullptr) != braidSuccess) return 15;
  if (hostMappings() != 4) {
    std::fprintf(stderr, "rank %d: %d mappings after an unrelated free, not 4\n", rank,
                 hostMappings());
    return 16;
  }
  // The peer checks its mappings on this rank's barrier piece: it must have done so before
  // this rank frees them (it has once this second barrier ends).
  if (braidBarrier(comm, nullptr) != braidSuccess) return 20;
  // Both free their buffers; the barrier's pieces carry the new epoch.
  if (braidMemFreeHost(send) != braidSuccess || braidMemFreeHost(recv) != braidSuccess) return 17;
  if (braidBarrier(comm, nullptr) != braidSuccess) return 18;
  if (hostMappings() != 0) {
    std::fprintf(stderr, "rank %d: %d mappings left after the peer freed its buffers\n", rank,
                 hostMappings());
    return 19;
  }
  return 0;
}

TEST(HostMemory, PeersMapLiveBuffersAndLetFreedOnesGo) {
  auto results =
      runProcesses(2, "shared-mappings", {"BRAID_CACHE_BYTES=1", "BRAID_SINGLE_COPY=shared"});
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

TEST(Abort, AsProcesses) {
  auto results = runProcesses(2, "abort", {});
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

TEST(Guard, ExceptionsBecomeCodesWithMessages) {
  EXPECT_EQ(guardApi("braidTest", []() -> braidResult_t { throw std::bad_alloc(); }),
            braidSystemError);
  EXPECT_NE(std::string(lastError()).find("braidTest: out of memory"), std::string::npos)
      << lastError();
  EXPECT_EQ(guardApi("braidTest", []() -> braidResult_t { throw std::runtime_error("odd"); }),
            braidInternalError);
  EXPECT_NE(std::string(lastError()).find("braidTest: unexpected exception: odd"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(guardApi("braidTest", []() -> braidResult_t { throw 42; }), braidInternalError);
  EXPECT_EQ(guardApi("braidTest", []() -> braidResult_t { return braidRemoteError; }),
            braidRemoteError);
}

// With its address space capped just above what it maps, a process cannot start a stream's
// worker thread (an 8 MiB stack): braidStreamCreate returns braidSystemError naming itself
// instead of ending the process through std::terminate.
int outOfMemoryChild(int, int) {
  size_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t cap =
      static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{1} << 20);
  const rlimit limit{cap, cap};
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 2;
  braidStream_t stream = nullptr;
  const braidResult_t res = braidStreamCreate(&stream);
  const std::string msg = braidGetLastError(nullptr);
  std::printf("result %d: %s\n", static_cast<int>(res), msg.c_str());
  return res == braidSystemError && !stream && msg.find("braidStreamCreate") != std::string::npos
             ? 0
             : 1;
}

// AddressSanitizer and ThreadSanitizer reserve terabytes of shadow address space, which an
// address-space limit cannot hold.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BRAID_SHADOW_MEMORY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BRAID_SHADOW_MEMORY 1
#endif
#endif

TEST(Guard, OutOfMemoryInAnEntryPointIsAnError) {
#ifdef BRAID_SHADOW_MEMORY
  GTEST_SKIP() << "under a sanitizer: RLIMIT_AS cannot hold its shadow memory";
#endif
  auto results = runProcesses(1, "out-of-memory", {});
  EXPECT_EQ(results[0].status, 0) << results[0].output;
}

// A byte setting that does not parse warns with what is used instead: words where the default
// is Braid's choice (0 inside), not "using 0".
int configWarningsChild(int, int) {
  (void)config();
  return 0;
}

TEST(Config, BadByteSettingsNameWhatIsUsed) {
  auto results =
      runProcesses(1, "config-warnings", {"BRAID_CACHE_BYTES=lots", "BRAID_SINGLE_COPY_BYTES=0"});
  ASSERT_EQ(results[0].status, 0) << results[0].output;
  EXPECT_NE(results[0].output.find("BRAID_CACHE_BYTES=\"lots\" is not a byte count in [0, "
                                   "1099511627776]; using the detected last-level cache"),
            std::string::npos)
      << results[0].output;
  EXPECT_NE(results[0].output.find("BRAID_SINGLE_COPY_BYTES=\"0\" is not a byte count in [1, "
                                   "1099511627776]; using the default (64K for"),
            std::string::npos)
      << results[0].output;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerRawChildRole("config-warnings", braid::test::configWarningsChild);
  braid::test::registerRawChildRole("abort", braid::test::abortChild);
  braid::test::registerChildRole("shared-mappings", braid::test::sharedMappingsChild);
  braid::test::registerRawChildRole("out-of-memory", braid::test::outOfMemoryChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
