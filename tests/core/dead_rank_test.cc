// Each of 4 ranks in turn killed with SIGKILL during init, inside an all-reduce, or between
// all-reduces, over shared memory and over tcp: every surviving rank returns braidRemoteError
// or braidTimeout within BRAID_TIMEOUT (4 s here, set by main), naming the dead rank; nothing
// of the job stays in /dev/shm and no process is left. Ranks as processes (a thread cannot be
// killed alone).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "test_scale.h"
#include "test_util.h"

namespace braid::test {
namespace {

constexpr int kRanks = 4;
constexpr double kTimeoutSec = 4;

// The rank that dies (BRAID_TEST_DEAD_RANK, set by the test for its children).
int deadRank() {
  const char* v = std::getenv("BRAID_TEST_DEAD_RANK");
  return v ? std::atoi(v) : 1;
}

// A survivor's verdict on its first failed call: exit 0 when it is the error the issue asks
// for (remote error or timeout, naming the dead rank, within the timeout), else 1.
int judge(const char* call, braidResult_t res, double seconds, const std::string& msg) {
  std::printf("%s: %s after %.2f s: %s\n", call, braidGetErrorString(res), seconds, msg.c_str());
  const bool kind = res == braidRemoteError || res == braidTimeout;
  const int dead = deadRank();
  // "rank N" as a whole word, N the dead rank (never "rank 12" for rank 1).
  bool named = false;
  const std::string want = "rank " + std::to_string(dead);
  for (size_t at = msg.find(want); at != std::string::npos && !named; at = msg.find(want, at + 1))
    named = at + want.size() == msg.size() ||
            !std::isdigit(static_cast<unsigned char>(msg[at + want.size()]));
  const bool soon = seconds < kTimeoutSec + 3;
  if (!kind) std::printf("wrong result code\n");
  if (!named) std::printf("the message does not name rank %d\n", dead);
  if (!soon) std::printf("too late: BRAID_TIMEOUT is %.0f s\n", kTimeoutSec);
  return kind && named && soon ? 0 : 1;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// After judging, a survivor stays until every survivor has judged (each leaves a file named
// for its rank in BRAID_TEST_JUDGED_DIR): a survivor that exits becomes, to a rank still
// waiting, one more peer gone, and may be the one it names. At most as long as judge allows a
// verdict to take (BRAID_TIMEOUT + 3 s), saying so when that runs out.
void awaitOtherSurvivors(int rank) {
  const char* dir = std::getenv("BRAID_TEST_JUDGED_DIR");
  if (dir == nullptr) return;
  const std::string mine = std::string(dir) + "/" + std::to_string(rank);
  if (FILE* f = std::fopen(mine.c_str(), "w")) std::fclose(f);
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int judged = 0;
    for (int r = 0; r < kRanks; ++r) {
      struct stat st;
      judged += stat((std::string(dir) + "/" + std::to_string(r)).c_str(), &st) == 0;
    }
    if (judged >= kRanks - 1) return;
    if (since(t0) > kTimeoutSec + 3) {
      std::printf("rank %d: only %d survivors judged within %.0f s\n", rank, judged,
                  kTimeoutSec + 3);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// BRAID_TEST_DIE_AT = init | inside | between: where rank BRAID_TEST_DEAD_RANK kills itself.
int dieChild(int rank, int nranks) {
  const std::string at = std::getenv("BRAID_TEST_DIE_AT") ? std::getenv("BRAID_TEST_DIE_AT") : "";
  const bool dies = rank == deadRank();
  if (dies && at == "init") raise(SIGKILL);
  braidUniqueId id;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess) return 2;
  auto t0 = std::chrono::steady_clock::now();
  braidComm_t comm = nullptr;
  braidResult_t res = braidCommInitRank(&comm, nranks, id, rank);
  if (res != braidSuccess) {
    const int verdict = judge("init", res, since(t0), braidGetLastError(nullptr));
    awaitOtherSurvivors(rank);
    return verdict;
  }
  if (at == "init") {
    std::printf("init succeeded without rank %d\n", deadRank());
    return 1;
  }
  std::vector<float> buf(size_t{4} << 20, 1.0f);  // 16 MiB: a call that takes a while
  auto once = [&] {
    return braidAllReduce(buf.data(), buf.data(), buf.size(), braidFloat32, braidSum, comm,
                          nullptr);
  };
  if (dies && at == "inside") {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      raise(SIGKILL);
    }).detach();
    for (;;) once();
  }
  if (at == "between") {
    if (once() != braidSuccess) {
      std::printf("the first call failed: %s\n", braidGetLastError(comm));
      return 1;
    }
    if (dies) raise(SIGKILL);
  }
  for (int i = 0; i < 1000; ++i) {
    t0 = std::chrono::steady_clock::now();
    res = once();
    if (res != braidSuccess) {
      const int verdict = judge("all-reduce", res, since(t0), braidGetLastError(comm));
      awaitOtherSurvivors(rank);
      braidCommDestroy(comm);
      return verdict;
    }
  }
  std::printf("1000 calls succeeded without rank %d\n", deadRank());
  return 1;
}

// (where it dies, which rank, transport)
using Fault = std::tuple<const char*, int, const char*>;
class DeadRank : public ::testing::TestWithParam<Fault> {};

TEST_P(DeadRank, SurvivorsFailNamingItWithinTheTimeout) {
  const auto [at, dead, transport] = GetParam();
  char judged[] = "/tmp/braid-dead-rank-XXXXXX";  // mkdtemp's template
  ASSERT_NE(mkdtemp(judged), nullptr);
  auto results = runProcesses(
      kRanks, "die",
      {std::string("BRAID_TEST_DIE_AT=") + at, "BRAID_TEST_DEAD_RANK=" + std::to_string(dead),
       std::string("BRAID_TRANSPORT=") + transport,
       std::string("BRAID_TEST_JUDGED_DIR=") + judged});
  std::error_code ignored;
  std::filesystem::remove_all(judged, ignored);
  for (int r = 0; r < kRanks; ++r) {
    if (r == dead)
      EXPECT_EQ(results[r].status, 128 + SIGKILL) << "rank " << r << ":\n" << results[r].output;
    else
      EXPECT_EQ(results[r].status, 0) << "rank " << r << ":\n" << results[r].output;
    // runProcesses reaps every child; none may still run (pid reused only after reaping).
    EXPECT_NE(kill(results[r].pid, 0), 0)
        << "rank " << r << " (pid " << results[r].pid << ") is still running";
  }
  EXPECT_TRUE(shmLeftovers(results).empty());
}

INSTANTIATE_TEST_SUITE_P(
    At, DeadRank,
    ::testing::Combine(
        ::testing::Values("init", "inside", "between"),
        // Under a sanitizer (test_scale.h) the first and the last rank die, not each in turn.
        reducedSizes() ? ::testing::ValuesIn(std::vector<int>{0, kRanks - 1})
                       : ::testing::ValuesIn(std::vector<int>{0, 1, 2, 3}),
        ::testing::Values("shm", "tcp")),
    [](const ::testing::TestParamInfo<Fault>& info) {
      return std::string(std::get<0>(info.param)) + "_rank" +
             std::to_string(std::get<1>(info.param)) + "_" + std::get<2>(info.param);
    });

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  // For the children and for this process, which runs the bootstrap root (runProcesses makes
  // the unique id here), so that it gives up on a missing rank as soon as they do.
  setenv("BRAID_TIMEOUT", "4", 1);
  braid::test::registerRawChildRole("die", braid::test::dieChild);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
