// Non-blocking communicators (braidConfig_t::blocking = 0, NCCL's semantics): init returns
// braidInProgress with the handle set, braidCommGetAsyncError says braidInProgress until init
// ends and then braidSuccess or init's error, calls on a communicator still initialising are
// refused (never run, never hang), braidCommAbort and braidCommDestroy stop an init whose peers
// never come, and bad arguments are refused at once. Ranks as threads and as processes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace braid::test {
namespace {

using Clock = std::chrono::steady_clock;

braidConfig_t nonBlocking() {
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// One rank: a non-blocking init, braidCommGetAsyncError polled until init ends (every state
// seen before that must be braidInProgress), then an all-reduce of int32 whose sum is exact.
// Returns "" or what went wrong.
std::string initPollAllReduce(const braidUniqueId& id, int rank, int nranks) {
  braidConfig_t config = nonBlocking();
  braidComm_t comm = nullptr;
  const braidResult_t started = braidCommInitRankConfig(&comm, nranks, id, rank, &config);
  if (started != braidInProgress && started != braidSuccess)
    return std::string("init returned ") + braidGetErrorString(started) + ": " +
           braidGetLastError(nullptr);
  if (!comm) return "init returned " + std::string(braidGetErrorString(started)) + " but no comm";
  braidResult_t state = braidInProgress;
  int polls = 0;
  const auto giveUp = Clock::now() + std::chrono::seconds(120);
  while (true) {
    if (braidCommGetAsyncError(comm, &state) != braidSuccess)
      return std::string("braidCommGetAsyncError failed: ") + braidGetLastError(nullptr);
    ++polls;
    if (state != braidInProgress) break;
    if (Clock::now() > giveUp) return "init still in progress after 120 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (started == braidSuccess && polls != 1) return "init said braidSuccess, then in progress";
  if (state != braidSuccess)
    return std::string("init ended with ") + braidGetErrorString(state) + ": " +
           braidGetLastError(comm);
  int count = -1, me = -1;
  if (braidCommCount(comm, &count) != braidSuccess || count != nranks ||
      braidCommUserRank(comm, &me) != braidSuccess || me != rank)
    return "count or rank wrong after init";
  constexpr size_t kCount = 4099;
  std::vector<int32_t> x(kCount);
  for (size_t i = 0; i < kCount; ++i) x[i] = static_cast<int32_t>((rank + 1) * 1000 + i % 97);
  if (braidAllReduce(x.data(), x.data(), kCount, braidInt32, braidSum, comm, nullptr) !=
      braidSuccess)
    return std::string("all-reduce failed: ") + braidGetLastError(comm);
  for (size_t i = 0; i < kCount; ++i) {
    const int32_t want =
        static_cast<int32_t>(1000 * nranks * (nranks + 1) / 2 + nranks * static_cast<int>(i % 97));
    if (x[i] != want)
      return "element " + std::to_string(i) + " is " + std::to_string(x[i]) + ", want " +
             std::to_string(want);
  }
  if (braidCommDestroy(comm) != braidSuccess)
    return std::string("destroy failed: ") + braidGetLastError(nullptr);
  return "";
}

class NonBlockingRanks : public testing::TestWithParam<int> {};

TEST_P(NonBlockingRanks, ThreadsInitPollThenAllReduceExactly) {
  const int nranks = GetParam();
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess) << braidGetLastError(nullptr);
  std::vector<std::string> errors(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] { errors[r] = initPollAllReduce(id, r, nranks); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST_P(NonBlockingRanks, ProcessesInitPollThenAllReduceExactly) {
  const auto results = runProcesses(GetParam(), "nonblocking-init");
  EXPECT_EQ(failedChildren(results), "");
}

INSTANTIATE_TEST_SUITE_P(NRanks, NonBlockingRanks, testing::Values(2, 3),
                         [](const testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "ranks";
                         });

int nonBlockingInitChild(int rank, int nranks) {
  braidUniqueId id;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess) {
    std::printf("id: %s\n", braidGetLastError(nullptr));
    return 3;
  }
  const std::string error = initPollAllReduce(id, rank, nranks);
  if (!error.empty()) std::printf("rank %d: %s\n", rank, error.c_str());
  return error.empty() ? 0 : 1;
}

// Rank 0 of 2 starts alone (rank 1 never comes): init stays in progress, calls on the
// communicator are refused naming that state, and `stop` (braidCommAbort or braidCommDestroy)
// returns braidSuccess within a few seconds, having stopped and freed the init (ASan's leak
// check sees the rest).
void startAloneThenStop(braidResult_t (*stop)(braidComm_t)) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess) << braidGetLastError(nullptr);
  braidConfig_t config = nonBlocking();
  braidComm_t comm = nullptr;
  ASSERT_EQ(braidCommInitRankConfig(&comm, 2, id, 0, &config), braidInProgress)
      << braidGetLastError(nullptr);
  ASSERT_NE(comm, nullptr);
  for (int i = 0; i < 5; ++i) {
    braidResult_t state = braidSuccess;
    ASSERT_EQ(braidCommGetAsyncError(comm, &state), braidSuccess);
    EXPECT_EQ(state, braidInProgress) << "poll " << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int32_t x = 1;
  EXPECT_EQ(braidAllReduce(&x, &x, 1, braidInt32, braidSum, comm, nullptr), braidInvalidArgument);
  const std::string msg = braidGetLastError(comm);
  EXPECT_NE(msg.find("braidAllReduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("init is still in progress"), std::string::npos) << msg;
  EXPECT_NE(msg.find("braidCommGetAsyncError"), std::string::npos) << msg;
  EXPECT_EQ(x, 1);  // nothing ran
  int count = 0;
  EXPECT_EQ(braidCommCount(comm, &count), braidInvalidArgument);
  EXPECT_EQ(braidCommFinalize(comm), braidInvalidArgument);
  braidComm_t child = nullptr;
  EXPECT_EQ(braidCommSplit(comm, 0, 0, &child, nullptr), braidInvalidArgument);
  EXPECT_EQ(child, nullptr);
  // On a thread of its own, so that a stop that hangs fails the test instead of hanging it
  // (the process then exits: the thread cannot be joined).
  std::promise<braidResult_t> done;
  std::future<braidResult_t> stopped = done.get_future();
  std::thread stopper([stop, comm, &done] { done.set_value(stop(comm)); });
  if (stopped.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    std::fprintf(stderr,
                 "FAIL: braidCommAbort/Destroy did not return within 10 s while init "
                 "waited for rank 1\n");
    std::_Exit(1);
  }
  stopper.join();
  EXPECT_EQ(stopped.get(), braidSuccess) << braidGetLastError(nullptr);
}

TEST(NonBlockingAbort, AbortStopsAnInitWhosePeerNeverComes) { startAloneThenStop(braidCommAbort); }

TEST(NonBlockingAbort, DestroyStopsAnInitWhosePeerNeverComes) {
  startAloneThenStop(braidCommDestroy);
}

// The same with ranks as processes: rank 1's process never calls init; rank 0's aborts its
// init (an alarm kills it, failing the test, if the abort hangs).
int abortAloneChild(int rank, int nranks) {
  if (rank != 0) return 0;
  braidUniqueId id;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess) return 3;
  braidConfig_t config = nonBlocking();
  braidComm_t comm = nullptr;
  if (braidCommInitRankConfig(&comm, nranks, id, rank, &config) != braidInProgress || !comm) {
    std::printf("init did not start: %s\n", braidGetLastError(nullptr));
    return 1;
  }
  for (int i = 0; i < 5; ++i) {
    braidResult_t state = braidSuccess;
    if (braidCommGetAsyncError(comm, &state) != braidSuccess || state != braidInProgress) {
      std::printf("poll %d: %s\n", i, braidGetErrorString(state));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int32_t x = 1;
  if (braidAllReduce(&x, &x, 1, braidInt32, braidSum, comm, nullptr) != braidInvalidArgument) {
    std::printf("a call on an initialising communicator was not refused\n");
    return 1;
  }
  alarm(10);
  const braidResult_t res = braidCommAbort(comm);
  alarm(0);
  std::printf("abort: %s\n", braidGetErrorString(res));
  return res == braidSuccess ? 0 : 1;
}

TEST(NonBlockingAbort, ProcessesAbortAnInitWhosePeerNeverComes) {
  const auto results = runProcesses(2, "nonblocking-abort-alone");
  EXPECT_EQ(failedChildren(results), "");
}

// Init's own failure arrives through braidCommGetAsyncError: rank 0 of 2 alone with a 0.3 s
// timeout ends with braidTimeout, whose message braidGetLastError(comm) gives; calls are then
// refused with that error, and braidCommDestroy frees the half-made communicator.
TEST(NonBlockingErrors, InitFailureIsTheAsyncError) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess) << braidGetLastError(nullptr);
  braidConfig_t config = nonBlocking();
  config.timeoutSec = 0.3;
  braidComm_t comm = nullptr;
  ASSERT_EQ(braidCommInitRankConfig(&comm, 2, id, 0, &config), braidInProgress);
  ASSERT_NE(comm, nullptr);
  braidResult_t state = braidInProgress;
  const auto giveUp = Clock::now() + std::chrono::seconds(60);
  while (state == braidInProgress && Clock::now() < giveUp) {
    ASSERT_EQ(braidCommGetAsyncError(comm, &state), braidSuccess);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(state, braidTimeout) << braidGetLastError(comm);
  EXPECT_NE(std::string(braidGetLastError(comm)).find("BRAID_TIMEOUT"), std::string::npos)
      << braidGetLastError(comm);
  int32_t x = 1;
  EXPECT_EQ(braidAllReduce(&x, &x, 1, braidInt32, braidSum, comm, nullptr), braidTimeout);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("non-blocking init failed"),
            std::string::npos)
      << braidGetLastError(nullptr);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess) << braidGetLastError(nullptr);
}

// Bad arguments are refused by the call itself, at once: no communicator, no thread.
TEST(NonBlockingErrors, BadArgumentsAreRefusedSynchronously) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess) << braidGetLastError(nullptr);
  braidConfig_t config = nonBlocking();
  braidComm_t comm = reinterpret_cast<braidComm_t>(0x1);
  EXPECT_EQ(braidCommInitRankConfig(nullptr, 2, id, 0, &config), braidInvalidArgument);
  EXPECT_EQ(braidCommInitRankConfig(&comm, 0, id, 0, &config), braidInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("nranks is 0"), std::string::npos);
  EXPECT_EQ(braidCommInitRankConfig(&comm, 2, id, 2, &config), braidInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(braidGetLastError(nullptr)).find("rank 2 is out of range"),
            std::string::npos);
  braidUniqueId corrupt = id;
  corrupt.internal[40] ^= 1;
  EXPECT_EQ(braidCommInitRankConfig(&comm, 2, corrupt, 0, &config), braidInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  braidConfig_t unmade = config;
  unmade.magic = 0;
  EXPECT_EQ(braidCommInitRankConfig(&comm, 2, id, 0, &unmade), braidInvalidArgument);
  braidConfig_t badTimeout = config;
  badTimeout.timeoutSec = -1;
  EXPECT_EQ(braidCommInitRankConfig(&comm, 2, id, 0, &badTimeout), braidInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  braidResult_t state;
  EXPECT_EQ(braidCommGetAsyncError(nullptr, &state), braidInvalidArgument);
}

// One rank: init may finish at once; either way the polls end in braidSuccess and the
// communicator works. The config is the caller's to reuse or free as soon as the call returns.
TEST(NonBlockingRanks1, OneRankAndTheConfigIsCopied) {
  braidUniqueId id;
  ASSERT_EQ(braidGetUniqueId(&id), braidSuccess);
  auto config = std::make_unique<braidConfig_t>(nonBlocking());
  braidComm_t comm = nullptr;
  const braidResult_t res = braidCommInitRankConfig(&comm, 1, id, 0, config.get());
  config.reset();
  ASSERT_TRUE(res == braidInProgress || res == braidSuccess) << braidGetErrorString(res);
  braidResult_t state = braidInProgress;
  while (state == braidInProgress) {
    ASSERT_EQ(braidCommGetAsyncError(comm, &state), braidSuccess);
    std::this_thread::yield();
  }
  ASSERT_EQ(state, braidSuccess) << braidGetLastError(comm);
  double v = 2.5;
  EXPECT_EQ(braidAllReduce(&v, &v, 1, braidFloat64, braidSum, comm, nullptr), braidSuccess);
  EXPECT_EQ(v, 2.5);
  EXPECT_EQ(braidCommFinalize(comm), braidSuccess);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
}

// braidCommSplit with blocking = 0 on the new communicator finishes before it returns, with
// braidSuccess (documented; NCCL may complete a non-blocking call at once too).
TEST(NonBlockingSplit, SplitWithBlockingZeroFinishesBeforeReturning) {
  const auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    braidConfig_t config = nonBlocking();
    braidComm_t half = nullptr;
    const braidResult_t res = braidCommSplit(comm, 0, rank, &half, &config);
    if (res != braidSuccess)
      return std::string("split: ") + braidGetErrorString(res) + ": " + braidGetLastError(comm);
    braidResult_t state = braidInProgress;
    if (braidCommGetAsyncError(half, &state) != braidSuccess || state != braidSuccess)
      return "the new communicator is not ready on return";
    int32_t x = rank + 1;
    if (braidAllReduce(&x, &x, 1, braidInt32, braidSum, half, nullptr) != braidSuccess || x != 3)
      return "all-reduce on the new communicator: " + std::to_string(x);
    return braidCommDestroy(half) == braidSuccess ? "" : "destroy failed";
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  braid::test::registerRawChildRole("nonblocking-init", braid::test::nonBlockingInitChild);
  braid::test::registerRawChildRole("nonblocking-abort-alone", braid::test::abortAloneChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
