// Shared helpers for multi-rank tests: exact inputs and closed-form expected values for
// every dtype x op, ranks as threads or as processes (re-executing this test binary).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "braid/braid.h"

namespace braid::test {

constexpr braidDataType_t kHostTypes[] = {braidInt8,    braidUint8,   braidInt32,   braidUint32,
                                          braidInt64,   braidUint64,  braidFloat16, braidFloat32,
                                          braidFloat64, braidBfloat16};
constexpr braidRedOp_t kOps[] = {braidSum, braidProd, braidMax, braidMin, braidAvg};

// Input of rank r at element i, as a double that the dtype holds exactly. Small values
// keep every partial sum and product exact in bf16 (and fp8), and int8 sums wrap.
double inputValue(braidDataType_t t, braidRedOp_t op, int r, size_t i);
// The all-reduce's exact expected element i over nranks, written into out (one element).
void expectedAllReduce(braidDataType_t t, braidRedOp_t op, int nranks, size_t i, void* out);
// inputValue depends on i only through i mod 11 and i mod 5, so the inputs, and every closed
// form built from them, repeat every kInputPeriod elements.
constexpr size_t kInputPeriod = 55;
// Elements first .. first + count - 1 of the all-reduce's expected result, written to out
// (count elements): byte for byte what expectedAllReduce writes element by element, computed
// for one period and copied (the tests' reference took most of their time element by element).
void expectedAllReduceRange(braidDataType_t t, braidRedOp_t op, int nranks, size_t first,
                            size_t count, void* out);
// Fills count elements for rank r (one period computed, the rest copied, as above).
void fillInput(braidDataType_t t, braidRedOp_t op, int r, size_t count, void* buf);
// Index of the first element of a that differs from b bitwise, or -1.
long long firstMismatch(const void* a, const void* b, size_t bytes, size_t elemSize);

// Runs fn(comm, rank) on every rank of an nranks communicator made by braidCommInitAll,
// one thread per rank; returns the ranks' failure messages (empty: all passed).
std::vector<std::string> runThreads(int nranks,
                                    const std::function<std::string(braidComm_t, int)>& fn);
// The same with every rank's communicator made by braidCommInitRankConfig with `config`
// (per-communicator timeouts, stall warnings), each destroyed on its rank's thread.
std::vector<std::string> runThreadsWithConfig(
    int nranks, const braidConfig_t& config,
    const std::function<std::string(braidComm_t, int)>& fn);

// Runs this test binary again as nranks processes with --braid-child=ROLE, each joining
// one communicator; returns each child's exit status and output. The child's main must
// call childMain (see below).
struct ChildResult {
  int status;
  std::string output;
  int pid = 0;
};
std::vector<ChildResult> runProcesses(int nranks, const std::string& role,
                                      const std::vector<std::string>& extraEnv = {});
// Each child that did not exit 0, as "rank R (status S):" and its output; "" when all did
// (EXPECT_EQ(failedChildren(results), "")).
std::string failedChildren(const std::vector<ChildResult>& results);

// In a test binary's main: if argv names a child role, runs it and returns its exit
// code; else returns -1. Roles are registered with registerChildRole (the child joins the
// communicator first, from BRAID_UNIQUE_ID / BRAID_RANK / BRAID_NRANKS, as runProcesses
// and braidrun set them) or registerRawChildRole (fn(rank, nranks) runs without one: for
// checks of the launch itself). With BRAID_TEST_STATUS_DIR set, the child also writes
// "STATUS PID" to DIR/RANK before it returns (runInCluster reads it).
int childMain(int argc, char** argv);
void registerChildRole(const std::string& role, std::function<int(braidComm_t, int, int)> fn);
void registerRawChildRole(const std::string& role, std::function<int(int, int)> fn);

// What the launcher told this process (a child): its rank, the job's size, its rank and
// count on its host, and BRAID_HOST_ID (empty if unset). Fields it did not set are -1.
struct RankEnv {
  int rank = -1;
  int nranks = -1;
  int localRank = -1;
  int localSize = -1;
  std::string hostId;
};
RankEnv rankEnv();

// Runs this test binary as hosts x ranksPerHost ranks of one job over an emulated cluster:
// `scripts/cluster.sh up HOSTS [--rate RATE]` makes the network namespaces braid-h0.. (one
// per host, joined by the bridge braid-br), then the built braidrun starts the ranks with
// --hosts braid-h0:R,braid-h1:R,... and --braid-child=ROLE (ranks host by host; each rank
// gets BRAID_HOST_ID=braid-hN), extraEnv added to their environment. `cluster.sh down`
// always runs before it returns, failure or not. Only one cluster exists per machine: a
// lock file serialises concurrent callers (other test binaries).
//
// If the test process dies before that (SIGKILL, a runner's timeout), a janitor process
// forked at the start, in its own session, sees its pipe close and runs `cluster.sh down`,
// which also stops ranks still inside the namespaces; braidrun itself gets SIGTERM on the
// test's death (PR_SET_PDEATHSIG) and stops its ranks. Should even that fail, the next
// `cluster.sh up` (or `cluster.sh down` by hand) removes the leftovers.
//
// The script is found through BRAID_TEST_SOURCE_DIR (or the source dir the build was
// configured from), braidrun through BRAID_TEST_BRAIDRUN (or the build's). A job running
// past BRAID_TEST_CLUSTER_TIMEOUT seconds (default 900) is stopped with SIGTERM.
struct ClusterResult {
  // Non-empty: this machine cannot emulate hosts (not root, no network namespaces, ...);
  // GTEST_SKIP() << skipReason. Nothing ran.
  std::string skipReason;
  int status = -1;     // braidrun's exit status (0: every rank exited 0); -1 if it never ran
  std::string output;  // cluster.sh's and braidrun's own lines (not the ranks')
  // Per rank: the status it recorded (-1: none: killed, or never got that far), its pid,
  // and its output lines (stdout and stderr, without braidrun's "RANK: " prefix).
  std::vector<ChildResult> ranks;
};
ClusterResult runInCluster(int hosts, int ranksPerHost, const std::string& role,
                           const std::vector<std::string>& extraEnv, const std::string& rate = "");
// Namespaces named braid-h* and the bridge braid-br that exist now (empty: none left).
std::vector<std::string> clusterLeftovers();

// Braid segments in /dev/shm created by process `pid` ("braid-PID-..."); other jobs running
// at the same time do not count.
std::vector<std::string> shmLeftovers(int pid);
// The same for every child of a runProcesses call.
std::vector<std::string> shmLeftovers(const std::vector<ChildResult>& children);

}  // namespace braid::test
