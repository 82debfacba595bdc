// Diagnosis of wrong and stuck jobs: BRAID_CHECK's comparison of the ranks' calls, and
// BRAID_STALL_WARN's line naming the peer a rank waits on, and rank 0's summary of where the
// ranks are. Ranks as threads and processes. Its main sets BRAID_CHECK=1 and BRAID_STALL_WARN=1
// (unless set) before Braid reads its configuration.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "test_util.h"

namespace braid::test {
namespace {

// Each rank's all-reduce of `count(rank)` floats: the result code and message.
struct Outcome {
  braidResult_t res = braidSuccess;
  std::string message;
};

TEST(Check, DifferentCountsFailEveryRankWithTheirList) {
  std::vector<Outcome> out(3);
  auto errors = runThreads(3, [&](braidComm_t comm, int rank) -> std::string {
    std::vector<float> buf(16, 1.0f);
    const size_t count = rank == 2 ? 11 : 10;
    out[rank].res =
        braidAllReduce(buf.data(), buf.data(), count, braidFloat32, braidSum, comm, nullptr);
    out[rank].message = braidGetLastError(comm);
    // The check left the communicator usable: a matching call goes through.
    if (braidAllReduce(buf.data(), buf.data(), 4, braidFloat32, braidSum, comm, nullptr) !=
        braidSuccess)
      return std::string("the next call failed: ") + braidGetLastError(comm);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].res, braidInvalidUsage) << "rank " << r;
    EXPECT_NE(out[r].message.find("BRAID_CHECK"), std::string::npos) << out[r].message;
    EXPECT_NE(out[r].message.find("rank 0: all-reduce count 10 float op sum"), std::string::npos)
        << out[r].message;
    EXPECT_NE(out[r].message.find("rank 2: all-reduce count 11 float op sum"), std::string::npos)
        << out[r].message;
  }
}

// The same as processes: rank 1 of 3 calls with another count; each child prints its message
// and exits 0 only on braidInvalidUsage with the list.
int mismatchChild(braidComm_t comm, int rank, int) {
  std::vector<float> buf(16, 1.0f);
  const braidResult_t res = braidAllReduce(buf.data(), buf.data(), rank == 1 ? 7 : 10, braidFloat32,
                                           braidSum, comm, nullptr);
  const std::string msg = braidGetLastError(comm);
  std::fprintf(stderr, "%s\n", msg.c_str());
  return res == braidInvalidUsage && msg.find("rank 1: all-reduce count 7") != std::string::npos
             ? 0
             : 1;
}

TEST(Check, DifferentCountsAsProcesses) {
  auto results = runProcesses(3, "check-mismatch", {});
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

TEST(Check, DifferentCollectivesAndRootsAreListed) {
  std::vector<Outcome> out(2);
  auto errors = runThreads(2, [&](braidComm_t comm, int rank) -> std::string {
    std::vector<float> buf(8, 1.0f);
    out[rank].res =
        rank == 0
            ? braidBroadcast(buf.data(), buf.data(), 8, braidFloat32, 0, comm, nullptr)
            : braidReduce(buf.data(), buf.data(), 8, braidFloat32, braidMax, 1, comm, nullptr);
    out[rank].message = braidGetLastError(comm);
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].res, braidInvalidUsage) << "rank " << r;
    EXPECT_NE(out[r].message.find("rank 0: broadcast count 8 float root 0"), std::string::npos)
        << out[r].message;
    EXPECT_NE(out[r].message.find("rank 1: reduce count 8 float op max root 1"), std::string::npos)
        << out[r].message;
  }
}

TEST(Check, MatchingCallsRunAsUsual) {
  auto errors = runThreads(4, [](braidComm_t comm, int rank) -> std::string {
    std::vector<int32_t> buf(1000, rank + 1);
    if (braidAllReduce(buf.data(), buf.data(), buf.size(), braidInt32, braidSum, comm, nullptr) !=
        braidSuccess)
      return braidGetLastError(comm);
    for (int32_t v : buf)
      if (v != 10) return "all-reduce gave " + std::to_string(v) + ", not 10";
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// Rank 1 comes 2.5 s late to an all-reduce: rank 0, after BRAID_STALL_WARN (1 s) without
// progress, logs what it waits for, naming rank 1; the call then completes. Then rank 1 comes
// 1.5 s late to a send of 6 bytes, whose wait rank 0 counts in bytes.
TEST(Stall, WarnsNamingThePeerItWaitsOn) {
  testing::internal::CaptureStderr();
  auto errors = runThreads(2, [](braidComm_t comm, int rank) -> std::string {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    float x = 1.0f;
    if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
      return braidGetLastError(comm);
    if (x != 2.0f) return "wrong sum";
    char bytes[6] = "late";
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return braidSend(bytes, sizeof(bytes), braidUint8, 0, comm, nullptr) == braidSuccess
                 ? ""
                 : braidGetLastError(comm);
    }
    if (braidRecv(bytes, sizeof(bytes), braidUint8, 1, comm, nullptr) != braidSuccess)
      return braidGetLastError(comm);
    return "";
  });
  const std::string log = testing::internal::GetCapturedStderr();
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_NE(log.find("has made no progress for "), std::string::npos) << log;
  EXPECT_NE(log.find("waiting to receive from rank 1"), std::string::npos) << log;
  EXPECT_EQ(log.find("waiting to receive from rank 0"), std::string::npos) << log;
  EXPECT_NE(log.find("send/recv group #2 has made no progress for "), std::string::npos) << log;
  EXPECT_NE(log.find("(step 1 of 1, recv of 6 bytes)"), std::string::npos) << log;
}

// The lines of `log` that hold rank 0's stall summary.
std::string summaryLines(const std::string& log) {
  std::string lines, line;
  for (size_t at = 0; at < log.size();) {
    size_t end = log.find('\n', at);
    if (end == std::string::npos) end = log.size();
    line = log.substr(at, end - at);
    if (line.find("STALL summary") != std::string::npos) lines += line + "\n";
    at = end + 1;
  }
  return lines;
}

// Rank 1 of 3 stays in user code 1.5 s before its second all-reduce. Rank 0, after its own
// stall (BRAID_STALL_WARN 0.3 s through braidConfig_t), logs one summary naming rank 1 as
// behind, not in a call and last done with call #1, and itself and rank 2 in call #2 (with
// BRAID_CHECK, call #2, the all-reduce, is stuck in its exchange, reported as the all-reduce it
// precedes); the call then completes.
TEST(Stall, RootSummaryNamesTheRankBehind) {
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.stallWarnSec = 0.3;
  testing::internal::CaptureStderr();
  auto errors = runThreadsWithConfig(3, config, [](braidComm_t comm, int rank) -> std::string {
    float x = 1.0f;
    for (int call = 0; call < 2; ++call) {
      if (rank == 1 && call == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
        return braidGetLastError(comm);
    }
    return x == 9.0f ? "" : "wrong sum " + std::to_string(x);
  });
  const std::string log = testing::internal::GetCapturedStderr();
  for (const auto& e : errors) ADD_FAILURE() << e;
  const std::string summary = summaryLines(log);
  // One line, from rank 0, once.
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 1) << log;
  EXPECT_NE(summary.find("[0] BRAID WARN STALL summary of all-reduce #2 on 3 ranks"),
            std::string::npos)
      << log;
  EXPECT_NE(summary.find("behind: rank 1 not in a call (last completed #1); then ranks 0,2 at "
                         "all-reduce #2"),
            std::string::npos)
      << log;
}

// The same as processes, over shared memory and over tcp: rank 0's output holds the summary
// naming rank 1 as behind. Over tcp on one machine rank 0 maps its peers' segments for their
// positions as well, so the summary reads the same.
int stallChild(braidComm_t comm, int rank, int) {
  float x = 1.0f;
  for (int call = 0; call < 2; ++call) {
    if (rank == 1 && call == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidSuccess) {
      std::fprintf(stderr, "%s\n", braidGetLastError(comm));
      return 1;
    }
  }
  return x == 9.0f ? 0 : 1;
}

TEST(Stall, RootSummaryAsProcessesOverShm) {
  auto results = runProcesses(3, "stall", {"BRAID_STALL_WARN=0.3"});
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  const std::string summary = summaryLines(results[0].output);
  EXPECT_NE(summary.find("behind: rank 1 not in a call (last completed #1); then ranks 0,2 at "
                         "all-reduce #2"),
            std::string::npos)
      << results[0].output;
  for (int r = 1; r < 3; ++r) EXPECT_EQ(summaryLines(results[r].output), "") << "rank " << r;
  EXPECT_TRUE(shmLeftovers(results).empty());
}

TEST(Stall, RootSummaryAsProcessesOverTcp) {
  auto results = runProcesses(3, "stall", {"BRAID_STALL_WARN=0.3", "BRAID_TRANSPORT=tcp"});
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
  const std::string summary = summaryLines(results[0].output);
  // Peers over tcp on this machine publish their position too (their segment is mapped for
  // it); "sent no report" remains for peers on other machines.
  EXPECT_NE(summary.find("behind: rank 1 not in a call (last completed #1); then ranks 0,2 at "
                         "all-reduce #2"),
            std::string::npos)
      << results[0].output;
}

// Rank 1 refuses an all-reduce (a datatype that is none), makes it again fixed, refuses the
// next one and stays away. Rank 0, left waiting in that call, says in its stall line and in
// its timeout error that rank 1 refused it and why, and its summary says so of rank 1 (ranks
// of one host read each other's published refusal); of the first refusal, made good, nothing
// is said.
constexpr const char* kRefusedBy1 =
    "rank 1 has not entered call #2: it refused its all-reduce of that number before the call "
    "started (braidAllReduce: datatype 42 is not a braidDataType_t";
std::string refusedRank(braidComm_t comm, int rank) {
  float x = 1.0f;
  const auto bad = static_cast<braidDataType_t>(42);
  if (rank == 1) {
    if (braidAllReduce(&x, &x, 1, bad, braidSum, comm, nullptr) != braidInvalidArgument)
      return "rank 1: a datatype of 42 was not refused";
    if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
      return std::string("rank 1, made again fixed: ") + braidGetLastError(comm);
    if (braidAllReduce(&x, &x, 1, bad, braidSum, comm, nullptr) != braidInvalidArgument)
      return "rank 1: a datatype of 42 was not refused the second time";
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // rank 0 times out first
    return "";
  }
  if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidSuccess)
    return std::string("rank 0, call #1: ") + braidGetLastError(comm);
  if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidTimeout)
    return std::string("rank 0: not a timeout: ") + braidGetLastError(comm);
  const std::string msg = braidGetLastError(comm);
  return msg.find(kRefusedBy1) == std::string::npos ? "rank 0's timeout: " + msg : "";
}

TEST(Stall, PeerNamesTheCallARankRefused) {
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.stallWarnSec = 0.3;
  config.timeoutSec = 1.5;
  testing::internal::CaptureStderr();
  auto errors = runThreadsWithConfig(2, config, refusedRank);
  const std::string log = testing::internal::GetCapturedStderr();
  for (const auto& e : errors) ADD_FAILURE() << e;
  // Rank 0's stall line names the refusal on that line, and its wait in tenths of a second;
  // it waits in BRAID_CHECK's exchange before the call (main sets BRAID_CHECK=1).
  const size_t stall =
      log.find("BRAID_CHECK's exchange before all-reduce #2 has made no progress for 0.");
  ASSERT_NE(stall, std::string::npos) << log;
  EXPECT_LT(log.find(" s (BRAID_STALL_WARN): waiting to receive from rank 1 (step ", stall),
            log.find('\n', stall))
      << log;
  EXPECT_LT(log.find(kRefusedBy1, stall), log.find('\n', stall)) << log;
  EXPECT_NE(summaryLines(log).find("behind: rank 1 not in a call (last completed #1) (rank 1 "
                                   "refused its all-reduce #2: braidAllReduce: datatype 42"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("#1: it refused"), std::string::npos) << log;
  // Rank 1's own line for its refusal carries its rank, as its lines in a call do.
  EXPECT_NE(log.find("[1] BRAID WARN rank 1: braidAllReduce: datatype 42"), std::string::npos)
      << log;
}

// Durations in messages keep the tenths a sub-second BRAID_STALL_WARN needs.
TEST(Stall, DurationsInMessages) {
  EXPECT_EQ(secondsText(0.004), "0.004 s");
  EXPECT_EQ(secondsText(0.04), "0.04 s");
  EXPECT_EQ(secondsText(0.099), "0.1 s");
  EXPECT_EQ(secondsText(9.97), "10 s");
  EXPECT_EQ(secondsText(0.31), "0.3 s");
  EXPECT_EQ(secondsText(2.5), "2.5 s");
  EXPECT_EQ(secondsText(12.4), "12 s");
  EXPECT_EQ(secondsText(600), "600 s");
}

// Rank 1 refuses its first call and stays away; rank 0's first call is a send/recv to itself,
// which needs no peer, and its second waits on rank 1: rank 0 says rank 1 has made no call
// since its refusal of #1, though it waits at #2.
TEST(Stall, PeerNamesAnEarlierRefusalItsRankNeverMadeGood) {
  braidConfig_t config = BRAID_CONFIG_INITIALIZER;
  config.timeoutSec = 1.5;
  auto errors = runThreadsWithConfig(2, config, [](braidComm_t comm, int rank) -> std::string {
    float x = 1.0f, y = 0.0f;
    if (rank == 1) {
      if (braidAllReduce(&x, &x, 1, static_cast<braidDataType_t>(42), braidSum, comm, nullptr) !=
          braidInvalidArgument)
        return "rank 1: a datatype of 42 was not refused";
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // rank 0 times out first
      return "";
    }
    braidGroupStart();
    braidSend(&x, 1, braidFloat32, 0, comm, nullptr);
    braidRecv(&y, 1, braidFloat32, 0, comm, nullptr);
    if (braidGroupEnd() != braidSuccess || y != 1.0f)
      return std::string("rank 0, send/recv to itself: ") + braidGetLastError(comm);
    if (braidAllReduce(&x, &x, 1, braidFloat32, braidSum, comm, nullptr) != braidTimeout)
      return std::string("rank 0: not a timeout: ") + braidGetLastError(comm);
    const std::string msg = braidGetLastError(comm);
    return msg.find("#2 timed out after ") != std::string::npos &&
                   msg.find(
                       "rank 1 has entered no call since it refused its all-reduce #1 before "
                       "it started (braidAllReduce: datatype 42") != std::string::npos
               ? ""
               : "rank 0's timeout: " + msg;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

int refusedChild(braidComm_t comm, int rank, int) {
  const std::string error = refusedRank(comm, rank);
  if (!error.empty()) std::fprintf(stderr, "%s\n", error.c_str());
  return error.empty() ? 0 : 1;
}

// As processes, with and without BRAID_CHECK's exchange before the call.
TEST(Stall, PeerNamesTheCallARankRefusedAsProcesses) {
  for (const char* check : {"BRAID_CHECK=1", "BRAID_CHECK=0"}) {
    auto results = runProcesses(2, "refused", {"BRAID_STALL_WARN=0.3", "BRAID_TIMEOUT=1.5", check});
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(results[r].status, 0) << check << ", rank " << r << ":\n" << results[r].output;
    EXPECT_NE(results[0].output.find(kRefusedBy1), std::string::npos) << results[0].output;
    // With BRAID_CHECK rank 0 waits in the exchange before the call, and says so; without,
    // in the call, whose arguments it gives.
    EXPECT_NE(results[0].output.find(std::string(check) == "BRAID_CHECK=1"
                                         ? "BRAID_CHECK's exchange before all-reduce #2 has "
                                           "made no progress for 0."
                                         : "all-reduce #2 (count 1 of float, op sum) has made "
                                           "no progress for 0."),
              std::string::npos)
        << results[0].output;
    EXPECT_TRUE(shmLeftovers(results).empty());
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  setenv("BRAID_STALL_WARN", "1", 0);  // a child keeps the one its test gave it
  braid::test::registerChildRole("check-mismatch", braid::test::mismatchChild);
  braid::test::registerChildRole("stall", braid::test::stallChild);
  braid::test::registerChildRole("refused", braid::test::refusedChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  // The test process, whatever the caller exported; a child keeps the one its test gave it
  // (BRAID_CHECK=0), else inherits this.
  setenv("BRAID_CHECK", "1", 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
