// Settings are checked at init on every rank, whatever transport the job uses (issue 38). A
// one-host job runs over shared memory alone, yet a socket interface that matches nothing, a
// transport this build lacks, an unknown algorithm, a ring that is not a permutation, a file
// that does not load or a number out of range must fail init on every rank, naming the
// variable as the user set it (BRAID_X or NCCL_X) and its value: the same job would fail
// once it spans hosts, or once another rank is rank 0.
//
// config() is read once per process, so every case runs in a child process with the case's
// environment: its ranks as processes (one each), and as threads of one child.
#include <gtest/gtest.h>
#include <net/if.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "test_util.h"
#include "transport/net.h"

namespace braid::test {
namespace {

constexpr int kRanks = 3;

// SETTINGS_ONLY_RANK=R SETTINGS_BAD=VAR=VALUE: only rank R sets the variable (before anything
// reads the configuration); the others keep the test's environment.
void applyRankOnly(int rank) {
  const char* only = std::getenv("SETTINGS_ONLY_RANK");
  const char* bad = std::getenv("SETTINGS_BAD");
  if (only && bad && std::atoi(only) == rank) putenv(const_cast<char*>(bad));
}

// One rank of a process job: "INIT <code> | <message>".
int initProcess(int rank, int nranks) {
  applyRankOnly(rank);
  braidUniqueId id;
  braidComm_t comm = nullptr;
  braidResult_t rc = braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id);
  if (rc == braidSuccess) rc = braidCommInitRank(&comm, nranks, id, rank);
  std::printf("\nINIT %d | %s\n", static_cast<int>(rc),
              rc == braidSuccess ? "" : braidGetLastError(nullptr));
  std::fflush(stdout);
  if (comm) braidCommDestroy(comm);
  return 0;
}

// kRanks ranks as threads of this one process, joining through runProcesses' id: one line per
// rank, "INIT <code> | <message>".
int initThreads(int, int) {
  braidUniqueId id;
  if (braidUniqueIdFromString(std::getenv("BRAID_UNIQUE_ID"), &id) != braidSuccess) return 2;
  std::vector<braidResult_t> codes(kRanks);
  std::vector<std::string> msgs(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      braidComm_t comm = nullptr;
      codes[r] = braidCommInitRank(&comm, kRanks, id, r);
      if (codes[r] != braidSuccess) msgs[r] = braidGetLastError(nullptr);
      if (comm) braidCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r)
    std::printf("\nINIT %d | %s\n", static_cast<int>(codes[r]), msgs[r].c_str());
  std::fflush(stdout);
  return 0;
}

struct RankOutcome {
  int code = -1;  // -1: no INIT line
  std::string message;
};

// The INIT lines of one child's output, in order.
std::vector<RankOutcome> outcomes(const std::string& output) {
  std::vector<RankOutcome> out;
  for (size_t at = output.find("\nINIT "); at != std::string::npos;
       at = output.find("\nINIT ", at + 1)) {
    RankOutcome o;
    std::sscanf(output.c_str() + at, "\nINIT %d", &o.code);
    const size_t bar = output.find(" | ", at);
    const size_t end = output.find('\n', at + 1);
    if (bar != std::string::npos && bar < end) o.message = output.substr(bar + 3, end - bar - 3);
    out.push_back(o);
  }
  return out;
}

// Every rank's init, as processes and as threads, under env.
std::vector<std::pair<std::string, std::vector<RankOutcome>>> runBoth(
    const std::vector<std::string>& env) {
  std::vector<std::pair<std::string, std::vector<RankOutcome>>> all;
  std::vector<RankOutcome> procs;
  for (const ChildResult& c : runProcesses(kRanks, "init-process", env)) {
    auto o = outcomes(c.output);
    procs.push_back(o.empty() ? RankOutcome{-1, c.output} : o[0]);
  }
  all.emplace_back("processes", procs);
  const auto threads = runProcesses(1, "init-threads", env);
  auto t = outcomes(threads[0].output);
  if (t.size() != kRanks) t.assign(kRanks, RankOutcome{-1, threads[0].output});
  all.emplace_back("threads", t);
  return all;
}

// Init fails with braidInvalidArgument on every rank, as processes and as threads, and each
// message holds `named` (VAR="VALUE") and not `absent` (BRAID_X where NCCL_X was set).
void expectEveryRankFails(const std::vector<std::string>& env, const std::string& named,
                          const std::string& absent = "") {
  for (const auto& [how, ranks] : runBoth(env)) {
    ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks)) << how;
    for (int r = 0; r < kRanks; ++r) {
      const RankOutcome& o = ranks[r];
      EXPECT_EQ(o.code, braidInvalidArgument)
          << env[0] << ", " << how << ", rank " << r << ": " << o.message;
      EXPECT_NE(o.message.find(named), std::string::npos)
          << env[0] << ", " << how << ", rank " << r << ": " << o.message;
      if (!absent.empty()) {
        EXPECT_EQ(o.message.find(absent), std::string::npos)
            << env[0] << ", " << how << ", rank " << r << ": " << o.message;
      }
    }
  }
}

// This machine's interface names, "^a,b,c": a spec that excludes every one of them.
std::string excludeAll() {
  std::string spec = "^";
  if (struct if_nameindex* list = if_nameindex()) {
    for (struct if_nameindex* i = list; i->if_index != 0; ++i)
      spec += std::string(spec.size() == 1 ? "" : ",") + i->if_name;
    if_freenameindex(list);
  }
  return spec;
}

TEST(SettingsCheck, SocketInterface) {
  expectEveryRankFails({"BRAID_SOCKET_IFNAME=nosuch0"},
                       "BRAID_SOCKET_IFNAME=\"nosuch0\": no interface matches (interfaces here: ");
  expectEveryRankFails({"NCCL_SOCKET_IFNAME=nosuch0"}, "NCCL_SOCKET_IFNAME=\"nosuch0\"",
                       "BRAID_SOCKET_IFNAME");
  // "=l": exactly "l", which "lo" is not (as a prefix it would match).
  expectEveryRankFails({"NCCL_SOCKET_IFNAME==l"}, "NCCL_SOCKET_IFNAME=\"=l\": no interface",
                       "BRAID_SOCKET_IFNAME");
  const std::string all = excludeAll();
  expectEveryRankFails({"BRAID_SOCKET_IFNAME=" + all},
                       "BRAID_SOCKET_IFNAME=\"" + all + "\": no interface");
}

TEST(SettingsCheck, Transport) {
  if (ucxBuilt()) GTEST_SKIP() << "this Braid has UCX: BRAID_TRANSPORT=ucx is a usable value";
  expectEveryRankFails({"BRAID_TRANSPORT=ucx"}, "BRAID_TRANSPORT=\"ucx\": this Braid was built");
}

TEST(SettingsCheck, AlgorithmName) {
  expectEveryRankFails({"BRAID_ALGO=allreduce:nosuch"}, "BRAID_ALGO=allreduce:nosuch");
  expectEveryRankFails({"BRAID_ALGO=nosuch"}, "BRAID_ALGO=nosuch");
  // Neither Braid's nor NCCL's (NCCL's own names that Braid lacks, NVLS, stay a warning).
  expectEveryRankFails({"NCCL_ALGO=Ring,Rign"}, "NCCL_ALGO=\"Ring,Rign\": \"rign\" is neither",
                       "BRAID_ALGO");
}

TEST(SettingsCheck, Ring) {
  expectEveryRankFails({"BRAID_RING=0 1 1"}, "BRAID_RING=\"0 1 1\": rank 1 appears twice");
  expectEveryRankFails({"NCCL_RINGS=0 2"}, "NCCL_RINGS=\"0 2\": rank 1 of this 3-rank",
                       "BRAID_RING");
}

TEST(SettingsCheck, Files) {
  expectEveryRankFails({"BRAID_TUNE_FILE=/nonexistent/tune.txt"},
                       "BRAID_TUNE_FILE=\"/nonexistent/tune.txt\"");
  expectEveryRankFails({"BRAID_TUNE_TABLE=/dev/null"}, "BRAID_TUNE_TABLE=\"/dev/null\"");
  expectEveryRankFails({"BRAID_TOPO_FILE=/nonexistent/topo.xml"},
                       "BRAID_TOPO_FILE=\"/nonexistent/topo.xml\"");
  expectEveryRankFails({"NCCL_TOPO_FILE=/nonexistent/topo.xml"},
                       "NCCL_TOPO_FILE=\"/nonexistent/topo.xml\"", "BRAID_TOPO_FILE");
  expectEveryRankFails({"BRAID_TRACE_DIR=/dev/null/traces"},
                       "BRAID_TRACE_DIR=\"/dev/null/traces\": cannot make folders in /dev/null "
                       "(not a folder)");
  expectEveryRankFails(
      {"NCCL_TOPO_DUMP_FILE=/nonexistent/dump.xml"},
      "NCCL_TOPO_DUMP_FILE=\"/nonexistent/dump.xml\": cannot write in /nonexistent");
}

TEST(SettingsCheck, SizesOutOfRange) {
  expectEveryRankFails({"BRAID_NSOCKS_PERPEER=0"},
                       "BRAID_NSOCKS_PERPEER=\"0\" is not a whole number in [1, 16]");
  expectEveryRankFails({"BRAID_CHUNKSIZE=16"}, "BRAID_CHUNKSIZE=\"16\" is not a byte count in");
  expectEveryRankFails({"NCCL_CHUNKSIZE=1T"}, "NCCL_CHUNKSIZE=\"1T\" is not a byte count in",
                       "BRAID_CHUNKSIZE");
  expectEveryRankFails({"NCCL_BUFFSIZE=2G"}, "NCCL_BUFFSIZE=\"2G\"", "BRAID_BUFFSIZE");
  expectEveryRankFails({"BRAID_TRACE_BUFFER=0"}, "BRAID_TRACE_BUFFER=\"0\" is not a count");
}

// A malformed value stays NCCL's warning: the default is kept and init succeeds.
TEST(SettingsCheck, MalformedValuesStillWarn) {
  for (const auto& [how, ranks] : runBoth({"BRAID_CHUNKSIZE=lots", "BRAID_NSOCKS_PERPEER=x"}))
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(ranks[r].code, braidSuccess) << how << ", rank " << r << ": " << ranks[r].message;
}

// Values that work pass: an interface that exists, a ring of every rank.
TEST(SettingsCheck, GoodValuesPass) {
  for (const auto& [how, ranks] :
       runBoth({"BRAID_SOCKET_IFNAME=lo", "NCCL_RINGS=2 0 1", "BRAID_ALGO=allreduce:ring"}))
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(ranks[r].code, braidSuccess) << how << ", rank " << r << ": " << ranks[r].message;
}

// Only one rank's setting fails: every rank fails promptly, the others naming that rank, not
// after waiting for it (BRAID_TIMEOUT is 4 s here).
TEST(SettingsCheck, OneRanksSettingFailsEveryRank) {
  for (int bad : {0, 2}) {
    const auto children = runProcesses(
        kRanks, "init-process",
        {"SETTINGS_ONLY_RANK=" + std::to_string(bad), "SETTINGS_BAD=NCCL_SOCKET_IFNAME=nosuch0"});
    for (int r = 0; r < kRanks; ++r) {
      const auto o = outcomes(children[r].output);
      ASSERT_EQ(o.size(), 1u) << "rank " << r << ": " << children[r].output;
      EXPECT_EQ(o[0].code, braidInvalidArgument) << "rank " << r << ": " << o[0].message;
      EXPECT_NE(o[0].message.find("NCCL_SOCKET_IFNAME=\"nosuch0\""), std::string::npos)
          << "rank " << r << ": " << o[0].message;
      if (r != bad) {
        EXPECT_NE(o[0].message.find("rank " + std::to_string(bad) + "'s settings fail"),
                  std::string::npos)
            << "rank " << r << ": " << o[0].message;
      }
    }
    EXPECT_TRUE(shmLeftovers(children).empty()) << "segments left in /dev/shm";
  }
}

}  // namespace
}  // namespace braid::test

int main(int argc, char** argv) {
  setenv("BRAID_TIMEOUT", "4", 0);
  braid::test::registerRawChildRole("init-process", braid::test::initProcess);
  braid::test::registerRawChildRole("init-threads", braid::test::initThreads);
  const int rc = braid::test::childMain(argc, argv);
  if (rc >= 0) return rc;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
