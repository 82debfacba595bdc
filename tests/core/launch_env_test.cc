// braidCommInitFromEnv / braidUniqueIdFromEnv: ranks from the variables of the launchers
// users already have. Processes of this binary are started with torchrun-, srun-, Open MPI-
// and Hydra-style environments and must form one communicator and all-reduce exact values;
// every malformed, missing or inconsistent variable must be refused naming it and its value.
// The all_reduce_perf binary (BRAID_TEST_PERF) is run the same way, with threads per process.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braid/braid.h"
#include "core/bootstrap.h"
#include "test_util.h"

extern char** environ;

namespace braid {
namespace {

const std::string kChildFlag = "--launch-env-child";

// Every variable braidCommInitFromEnv (or a launcher around this test) might read: children
// and in-process tests start without any of them.
bool isLaunchVar(const std::string& name) {
  for (const char* prefix : {"OMPI_", "PMI_", "PMIX_", "SLURM_", "TORCHELASTIC_", "BRAID_COMM_",
                             "BRAID_UNIQUE_ID", "BRAID_RANK", "BRAID_NRANKS", "BRAID_LOCAL_"})
    if (name.rfind(prefix, 0) == 0) return true;
  for (const char* exact : {"MPI_LOCALRANKID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                            "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"})
    if (name == exact) return true;
  return false;
}

void clearLaunchVars() {
  std::vector<std::string> names;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (isLaunchVar(name)) names.push_back(name);
  }
  for (const std::string& n : names) unsetenv(n.c_str());
}

// A port nobody listens on now, below the kernel's ephemeral range (32768 and up by default):
// a port bound to 0 and released could be handed to any other process's connection or
// listener before the job binds it (CI saw "Address already in use" with jobs beside it).
// Its neighbour below is free too (MASTER_PORT = port - 1 in the torchrun tests).
int freePort() {
  static std::mt19937 rng(static_cast<unsigned>(getpid()) * 2654435761u ^
                          static_cast<unsigned>(time(nullptr)));
  auto canBind = [](int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
    close(s);
    return ok;
  };
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = 20001 + static_cast<int>(rng() % 12000);  // 20001 .. 32000
    if (canBind(port) && canBind(port - 1)) return port;
  }
  return -1;
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  int status = -1;
  std::string output;
};

// Starts argv with this process's environment minus every launch variable, plus env
// (which overrides variables of the same name).
Child spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  auto overridden = [&env](const std::string& name) {
    for (const std::string& kv : env)
      if (kv.substr(0, kv.find('=')) == name) return true;
    return false;
  };
  std::vector<std::string> envStrings;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (!isLaunchVar(name) && !overridden(name)) envStrings.push_back(kv);
  }
  for (const std::string& kv : env) envStrings.push_back(kv);
  std::vector<char*> envp, args;
  for (std::string& kv : envStrings) envp.push_back(kv.data());
  envp.push_back(nullptr);
  std::vector<std::string> argStrings = argv;
  for (std::string& a : argStrings) args.push_back(a.data());
  args.push_back(nullptr);
  Child c;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(p[1], 1);
    dup2(p[1], 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(p[1]);
  c.fd = p[0];
  return c;
}

// Drains every child's output until all have closed it, then reaps them.
void waitAll(std::vector<Child>* children) {
  size_t open = children->size();
  while (open > 0) {
    std::vector<pollfd> pfds;
    for (Child& c : *children)
      if (c.fd >= 0) pfds.push_back({c.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 1000);
    for (const pollfd& q : pfds) {
      if (!(q.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      for (Child& c : *children) {
        if (c.fd != q.fd) continue;
        char buf[4096];
        ssize_t n = read(c.fd, buf, sizeof(buf));
        if (n > 0) {
          c.output.append(buf, n);
        } else {
          close(c.fd);
          c.fd = -1;
          --open;
        }
      }
    }
  }
  for (Child& c : *children) {
    int st = 0;
    waitpid(c.pid, &st, 0);
    c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
}

// Runs nranks children of this binary; env(r) gives rank r's launcher variables. Rank 0
// starts after rootDelayMs, so the others must wait for its root.
std::vector<Child> runJob(int nranks, const std::function<std::vector<std::string>(int)>& env,
                          int rootDelayMs = 0) {
  std::vector<Child> children(nranks);
  for (int k = 0; k < nranks; ++k) {
    int r = (k + 1) % nranks;  // rank 0 last
    if (r == 0 && rootDelayMs > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(rootDelayMs));
    std::vector<std::string> e = env(r);
    e.push_back("LAUNCH_ENV_TEST_RANK=" + std::to_string(r));
    e.push_back("LAUNCH_ENV_TEST_NRANKS=" + std::to_string(nranks));
    children[r] = spawn({"/proc/self/exe", kChildFlag}, e);
  }
  waitAll(&children);
  return children;
}

std::string describe(const std::vector<Child>& children) {
  std::string s;
  for (size_t r = 0; r < children.size(); ++r)
    s += "--- rank " + std::to_string(r) + " (exit " + std::to_string(children[r].status) + "):\n" +
         children[r].output;
  return s;
}

void expectJobPasses(const std::vector<Child>& children) {
  for (const Child& c : children) {
    EXPECT_EQ(c.status, 0) << describe(children);
    EXPECT_TRUE(test::shmLeftovers(c.pid).empty()) << "shared memory left by pid " << c.pid;
  }
}

// The child: braidCommInitFromEnv, then exact all-reduces. Exit 0 if all is right, 1 for a
// wrong value, 10 + the result code if init failed.
int childMain() {
  const int wantRank = std::atoi(std::getenv("LAUNCH_ENV_TEST_RANK"));
  const int wantNranks = std::atoi(std::getenv("LAUNCH_ENV_TEST_NRANKS"));
  braidComm_t comm = nullptr;
  braidResult_t res = braidCommInitFromEnv(&comm);
  if (res != braidSuccess) {
    std::printf("init failed: %s: %s\n", braidGetErrorString(res), braidGetLastError(nullptr));
    return 10 + res;
  }
  int rank = -1, nranks = -1;
  braidCommUserRank(comm, &rank);
  braidCommCount(comm, &nranks);
  if (rank != wantRank || nranks != wantNranks) {
    std::printf("comm is rank %d of %d; want %d of %d\n", rank, nranks, wantRank, wantNranks);
    return 1;
  }
  const size_t count = 4099;
  const std::pair<braidDataType_t, braidRedOp_t> cases[] = {{braidFloat32, braidSum},
                                                            {braidInt64, braidSum},
                                                            {braidInt32, braidMax},
                                                            {braidFloat64, braidAvg},
                                                            {braidUint8, braidProd}};
  int rc = 0;
  for (auto [t, op] : cases) {
    const size_t es = braidTypeSize(t);
    std::vector<char> send(count * es), recv(count * es), want(count * es);
    test::fillInput(t, op, rank, count, send.data());
    test::expectedAllReduceRange(t, op, nranks, 0, count, want.data());
    res = braidAllReduce(send.data(), recv.data(), count, t, op, comm, nullptr);
    if (res != braidSuccess) {
      std::printf("braidAllReduce %s %s failed: %s\n", braidTypeName(t), braidOpName(op),
                  braidGetLastError(comm));
      rc = 1;
      break;
    }
    long long bad = test::firstMismatch(recv.data(), want.data(), count * es, es);
    if (bad >= 0) {
      std::printf("braidAllReduce %s %s: element %lld wrong\n", braidTypeName(t), braidOpName(op),
                  bad);
      rc = 1;
    }
  }
  braidCommDestroy(comm);
  return rc;
}

// ---- multi-process jobs, one per launcher style ----

TEST(LaunchEnvJob, TorchrunStyle) {
  const int port = freePort();  // Braid's root: MASTER_PORT + 1
  ASSERT_GT(port, 1);
  auto children = runJob(3, [&](int r) -> std::vector<std::string> {
    return {"RANK=" + std::to_string(r),
            "WORLD_SIZE=3",
            "LOCAL_RANK=" + std::to_string(r),
            "LOCAL_WORLD_SIZE=3",
            "MASTER_ADDR=127.0.0.1",
            "MASTER_PORT=" + std::to_string(port - 1),
            "TORCHELASTIC_RUN_ID=launch-env-" + std::to_string(getpid())};
  });
  expectJobPasses(children);
}

TEST(LaunchEnvJob, SlurmStyleRootStartsLast) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  auto children = runJob(
      3,
      [&](int r) -> std::vector<std::string> {
        return {"SLURM_PROCID=" + std::to_string(r),
                "SLURM_NTASKS=3",
                "SLURM_LOCALID=" + std::to_string(r),
                "SLURM_JOB_ID=" + std::to_string(getpid()),
                "SLURM_STEP_ID=0",
                "BRAID_COMM_ID=127.0.0.1:" + std::to_string(port)};
      },
      /*rootDelayMs=*/700);
  expectJobPasses(children);
}

TEST(LaunchEnvJob, OpenMpiStyleWithHostName) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  auto children = runJob(3, [&](int r) -> std::vector<std::string> {
    return {"OMPI_COMM_WORLD_RANK=" + std::to_string(r), "OMPI_COMM_WORLD_SIZE=3",
            "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(r),
            "OMPI_MCA_ess_base_jobid=" + std::to_string(getpid()),
            "BRAID_COMM_ID=localhost:" + std::to_string(port)};
  });
  expectJobPasses(children);
}

TEST(LaunchEnvJob, HydraStyleWithSecret) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  auto children = runJob(3, [&](int r) -> std::vector<std::string> {
    return {"PMI_RANK=" + std::to_string(r), "PMI_SIZE=3", "MPI_LOCALRANKID=" + std::to_string(r),
            "BRAID_COMM_SECRET=s3cret-" + std::to_string(getpid()),
            "BRAID_COMM_ID=127.0.0.1:" + std::to_string(port)};
  });
  expectJobPasses(children);
}

// srun torchrun ...: every worker inherits the agent's SLURM_PROCID; torchrun's RANK wins.
TEST(LaunchEnvJob, TorchrunUnderSrunUsesTorchrunRanks) {
  const int port = freePort();
  ASSERT_GT(port, 1);
  auto children = runJob(3, [&](int r) -> std::vector<std::string> {
    return {"SLURM_PROCID=0",
            "SLURM_NTASKS=1",
            "SLURM_JOB_ID=" + std::to_string(getpid()),
            "RANK=" + std::to_string(r),
            "WORLD_SIZE=3",
            "MASTER_ADDR=127.0.0.1",
            "MASTER_PORT=" + std::to_string(port - 1),
            "TORCHELASTIC_RUN_ID=none"};
  });
  expectJobPasses(children);
}

TEST(LaunchEnvJob, DifferentSecretsAreRefused) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  auto children = runJob(2, [&](int r) -> std::vector<std::string> {
    return {"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=2",
            "BRAID_COMM_SECRET=secret-of-rank-" + std::to_string(r), "BRAID_TIMEOUT=3",
            "BRAID_COMM_ID=127.0.0.1:" + std::to_string(port)};
  });
  EXPECT_NE(children[0].status, 0) << describe(children);
  EXPECT_NE(children[1].status, 0) << describe(children);
  EXPECT_NE(children[1].output.find("refused"), std::string::npos) << describe(children);
}

TEST(LaunchEnvJob, NonRootGivesUpAfterTimeoutNamingTheAddress) {
  const int port = freePort();
  ASSERT_GT(port, 0);
  std::vector<Child> children(1);
  children[0] = spawn(
      {"/proc/self/exe", kChildFlag},
      {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port - 1),
       "BRAID_TIMEOUT=1", "LAUNCH_ENV_TEST_RANK=1", "LAUNCH_ENV_TEST_NRANKS=2"});
  auto t0 = std::chrono::steady_clock::now();
  waitAll(&children);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(children[0].status, 10 + braidTimeout) << children[0].output;
  EXPECT_NE(children[0].output.find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << children[0].output;
  EXPECT_LT(secs, 10);
}

// all_reduce_perf as 2 processes x 2 threads, srun-style and torchrun-style.
TEST(LaunchEnvJob, PerfBinaryUnderSrunAndTorchrunEnvironments) {
  const char* perf = std::getenv("BRAID_TEST_PERF");
  if (perf == nullptr || *perf == '\0') GTEST_SKIP() << "BRAID_TEST_PERF is not set";
  for (int style = 0; style < 2; ++style) {
    const int port = freePort();
    ASSERT_GT(port, 1);
    std::vector<Child> children(2);
    for (int r = 1; r >= 0; --r) {
      std::vector<std::string> env;
      if (style == 0)
        env = {"SLURM_PROCID=" + std::to_string(r), "SLURM_NTASKS=2", "SLURM_LOCALID=0",
               "BRAID_COMM_ID=127.0.0.1:" + std::to_string(port)};
      else
        env = {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(r),
               "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port - 1)};
      children[r] =
          spawn({perf, "-t", "2", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1"}, env);
    }
    waitAll(&children);
    for (const Child& c : children) EXPECT_EQ(c.status, 0) << describe(children);
    // Rank 0 prints the table: 4 ranks, and every value right.
    EXPECT_NE(children[0].output.find("# Out of bounds values : 0 OK"), std::string::npos)
        << describe(children);
    EXPECT_NE(children[0].output.find("#  Rank  3 "), std::string::npos) << describe(children);
  }
}

// ---- in-process: detection and its errors ----

class LaunchEnv : public ::testing::Test {
 protected:
  void SetUp() override { clearLaunchVars(); }
  void TearDown() override { clearLaunchVars(); }

  void set(const std::vector<std::string>& kvs) {
    clearLaunchVars();
    for (const std::string& kv : kvs) {
      size_t eq = kv.find('=');
      setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
    }
  }

  // braidCommInitFromEnv must fail with `code` and a message holding every piece of `want`.
  void expectRefused(const std::vector<std::string>& env, braidResult_t code,
                     const std::vector<std::string>& want) {
    set(env);
    braidComm_t comm = reinterpret_cast<braidComm_t>(0x1);
    std::string where;
    for (const std::string& kv : env) where += kv + " ";
    EXPECT_EQ(braidCommInitFromEnv(&comm), code) << where << braidGetLastError(nullptr);
    EXPECT_EQ(comm, nullptr);
    const std::string msg = braidGetLastError(nullptr);
    for (const std::string& w : want)
      EXPECT_NE(msg.find(w), std::string::npos) << where << "\nmessage: " << msg << "\nwant: " << w;
  }
};

TEST_F(LaunchEnv, RankWithoutSize) {
  expectRefused({"RANK=1"}, braidInvalidArgument, {"RANK=1", "WORLD_SIZE"});
  expectRefused({"SLURM_PROCID=0", "BRAID_COMM_ID=127.0.0.1:1"}, braidInvalidArgument,
                {"SLURM_PROCID=0", "SLURM_NTASKS"});
}

TEST_F(LaunchEnv, SizeWithoutRank) {
  expectRefused({"SLURM_NTASKS=4"}, braidInvalidArgument, {"SLURM_NTASKS=4", "SLURM_PROCID"});
  expectRefused({"OMPI_COMM_WORLD_SIZE=2"}, braidInvalidArgument,
                {"OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK"});
}

TEST_F(LaunchEnv, RankOutOfRange) {
  expectRefused({"RANK=5", "WORLD_SIZE=4", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"},
                braidInvalidArgument, {"RANK=5", "WORLD_SIZE=4"});
  expectRefused({"PMI_RANK=2", "PMI_SIZE=2"}, braidInvalidArgument, {"PMI_RANK=2", "PMI_SIZE=2"});
}

TEST_F(LaunchEnv, NonNumericValues) {
  expectRefused({"OMPI_COMM_WORLD_RANK=two", "OMPI_COMM_WORLD_SIZE=4"}, braidInvalidArgument,
                {"OMPI_COMM_WORLD_RANK=two"});
  expectRefused({"RANK=1", "WORLD_SIZE=4x"}, braidInvalidArgument, {"WORLD_SIZE=4x"});
  expectRefused({"RANK=-1", "WORLD_SIZE=4"}, braidInvalidArgument, {"RANK=-1"});
  expectRefused({"RANK=0", "WORLD_SIZE=0"}, braidInvalidArgument, {"WORLD_SIZE=0"});
  expectRefused({"RANK= 1", "WORLD_SIZE=4"}, braidInvalidArgument, {"RANK= 1"});
  expectRefused({"RANK=1", "WORLD_SIZE=99999999999999999999"}, braidInvalidArgument,
                {"WORLD_SIZE=99999999999999999999"});
  expectRefused({"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=one", "BRAID_COMM_ID=127.0.0.1:1"},
                braidInvalidArgument, {"LOCAL_RANK=one"});
}

TEST_F(LaunchEnv, BadHostPort) {
  for (const char* bad : {"nohostport", "host:", ":1234", "host:0", "host:70000", "host:12ab",
                          "host:-5", "[::1]:1234", "fe80::1:1234"}) {
    expectRefused({"SLURM_PROCID=1", "SLURM_NTASKS=2", std::string("BRAID_COMM_ID=") + bad},
                  braidInvalidArgument, {std::string("BRAID_COMM_ID=") + bad});
  }
  expectRefused({"SLURM_PROCID=1", "SLURM_NTASKS=2", "BRAID_COMM_ID=no-such-host.invalid:1234"},
                braidInvalidArgument, {"BRAID_COMM_ID=no-such-host.invalid:1234", "resolve"});
}

TEST_F(LaunchEnv, BadMasterAddrOrPort) {
  expectRefused({"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1"}, braidInvalidArgument,
                {"MASTER_ADDR=127.0.0.1", "MASTER_PORT"});
  expectRefused({"RANK=1", "WORLD_SIZE=2", "MASTER_PORT=29500"}, braidInvalidArgument,
                {"MASTER_PORT=29500", "MASTER_ADDR"});
  expectRefused({"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=port"},
                braidInvalidArgument, {"MASTER_PORT=port"});
  expectRefused({"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=65535"},
                braidInvalidArgument, {"MASTER_PORT=65535", "+ 1"});
}

TEST_F(LaunchEnv, NoRendezvous) {
  expectRefused({"SLURM_PROCID=1", "SLURM_NTASKS=2"}, braidInvalidArgument,
                {"SLURM_PROCID/SLURM_NTASKS", "2 ranks", "no rendezvous", "BRAID_COMM_ID"});
}

TEST_F(LaunchEnv, NoLauncher) {
  expectRefused({}, braidInvalidArgument, {"no launcher variables", "RANK/WORLD_SIZE"});
  expectRefused({"BRAID_COMM_ID=127.0.0.1:1234"}, braidInvalidArgument, {"no launcher"});
  EXPECT_EQ(braidCommInitFromEnv(nullptr), braidInvalidArgument);
  int rank = 0;
  EXPECT_EQ(braidUniqueIdFromEnv(nullptr, &rank, nullptr, nullptr), braidInvalidArgument);
}

TEST_F(LaunchEnv, BadUniqueId) {
  expectRefused({"BRAID_RANK=0", "BRAID_NRANKS=1", "BRAID_UNIQUE_ID=xyz"}, braidInvalidArgument,
                {"BRAID_UNIQUE_ID=xyz"});
  expectRefused({"BRAID_RANK=0", "BRAID_NRANKS=1", "BRAID_UNIQUE_ID=" + std::string(256, '0')},
                braidInvalidArgument, {"BRAID_UNIQUE_ID", "magic"});
}

TEST_F(LaunchEnv, RootCannotBindNamesVariableAndPort) {
  // Someone else listens on the port rank 0 must use.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(s, 1), 0);
  socklen_t len = sizeof(sa);
  getsockname(s, reinterpret_cast<sockaddr*>(&sa), &len);
  const std::string port = std::to_string(ntohs(sa.sin_port));
  expectRefused({"SLURM_PROCID=0", "SLURM_NTASKS=2", "BRAID_COMM_ID=127.0.0.1:" + port},
                braidSystemError, {"BRAID_COMM_ID=127.0.0.1:" + port, "port " + port});
  const std::string below = std::to_string(ntohs(sa.sin_port) - 1);
  expectRefused({"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + below},
                braidSystemError, {"MASTER_PORT=" + below, "port " + port});
  close(s);
}

TEST_F(LaunchEnv, RootOnAnotherHostIsRefused) {
  // 203.0.113.0/24 is TEST-NET-3, documentation only; skip where a test network uses it.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, "203.0.113.1", &sa.sin_addr);
  const bool local = bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0;
  close(s);
  if (local) GTEST_SKIP() << "203.0.113.1 is an address of this host";
  expectRefused({"RANK=0", "WORLD_SIZE=2", "BRAID_COMM_ID=203.0.113.1:29500"}, braidInvalidArgument,
                {"BRAID_COMM_ID=203.0.113.1:29500", "not an address of this host"});
}

TEST_F(LaunchEnv, OneRankNeedsNoRendezvous) {
  set({"RANK=0", "WORLD_SIZE=1"});
  braidComm_t comm = nullptr;
  ASSERT_EQ(braidCommInitFromEnv(&comm), braidSuccess) << braidGetLastError(nullptr);
  int n = 0;
  braidCommCount(comm, &n);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
}

TEST_F(LaunchEnv, OneRankThroughMasterAddr) {
  const int port = freePort();
  ASSERT_GT(port, 1);
  set({"RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=localhost",
       "MASTER_PORT=" + std::to_string(port - 1)});
  braidComm_t comm = nullptr;
  ASSERT_EQ(braidCommInitFromEnv(&comm), braidSuccess) << braidGetLastError(nullptr);
  int64_t v = 41, out = 0;
  ASSERT_EQ(braidAllReduce(&v, &out, 1, braidInt64, braidSum, comm, nullptr), braidSuccess);
  EXPECT_EQ(out, 41);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
  // The root has ended: the same port serves a second job at once.
  ASSERT_EQ(braidCommInitFromEnv(&comm), braidSuccess) << braidGetLastError(nullptr);
  EXPECT_EQ(braidCommDestroy(comm), braidSuccess);
}

TEST_F(LaunchEnv, RankSizeAndLocalRankFromEachLauncher) {
  struct Case {
    std::vector<std::string> env;
    int rank, nranks, local;
  };
  const Case cases[] = {
      {{"BRAID_RANK=2", "BRAID_NRANKS=5", "BRAID_LOCAL_RANK=1"}, 2, 5, 1},
      {{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=0"},
       3,
       4,
       0},
      {{"PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1"}, 1, 2, 1},
      {{"SLURM_PROCID=6", "SLURM_NTASKS=8", "SLURM_LOCALID=2"}, 6, 8, 2},
      {{"RANK=1", "WORLD_SIZE=3", "LOCAL_RANK=1"}, 1, 3, 1},
      {{"RANK=1", "WORLD_SIZE=3"}, 1, 3, -1},
      // First found wins: braidrun over Open MPI over srun over torchrun...
      {{"BRAID_RANK=1", "BRAID_NRANKS=2", "OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4"},
       1,
       2,
       -1},
      {{"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "SLURM_PROCID=0", "SLURM_NTASKS=1",
        "LOCAL_RANK=7"},
       3,
       4,
       -1},
      {{"SLURM_PROCID=1", "SLURM_NTASKS=2", "RANK=5", "WORLD_SIZE=6"}, 1, 2, -1},
      // ... except that torchrun's workers (TORCHELASTIC_RUN_ID) take torchrun's.
      {{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "RANK=5", "WORLD_SIZE=6",
        "LOCAL_RANK=3", "TORCHELASTIC_RUN_ID=job"},
       5,
       6,
       3},
  };
  for (const Case& c : cases) {
    std::vector<std::string> env = c.env;
    env.push_back("BRAID_COMM_ID=127.0.0.1:1");  // rank > 0 everywhere: nothing is started
    set(env);
    braidUniqueId id;
    int rank = -2, nranks = -2, local = -2;
    ASSERT_EQ(braidUniqueIdFromEnv(&id, &rank, &nranks, &local), braidSuccess)
        << c.env[0] << ": " << braidGetLastError(nullptr);
    EXPECT_EQ(rank, c.rank) << c.env[0];
    EXPECT_EQ(nranks, c.nranks) << c.env[0];
    EXPECT_EQ(local, c.local) << c.env[0];
  }
}

// Every rank derives the same id from the same variables, and another job another one.
TEST_F(LaunchEnv, SecretIsDeterministicPerJob) {
  auto idFor = [&](const std::vector<std::string>& env) {
    set(env);
    braidUniqueId id;
    EXPECT_EQ(braidUniqueIdFromEnv(&id, nullptr, nullptr, nullptr), braidSuccess)
        << braidGetLastError(nullptr);
    UniqueIdData data;
    EXPECT_EQ(decodeUniqueId(id, &data), braidSuccess);
    EXPECT_EQ(data.flags & UniqueIdData::kRetryConnect, UniqueIdData::kRetryConnect);
    return data;
  };
  const std::vector<std::string> base = {"SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_JOB_ID=77",
                                         "SLURM_STEP_ID=0", "BRAID_COMM_ID=127.0.0.1:29511"};
  UniqueIdData a = idFor(base);
  EXPECT_EQ(ntohs(a.root.sin_port), 29511);
  EXPECT_EQ(a.root.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
  std::vector<std::string> rank2 = base;
  rank2[0] = "SLURM_PROCID=2";
  UniqueIdData b = idFor(rank2);
  EXPECT_EQ(std::memcmp(a.secret, b.secret, 32), 0);
  std::vector<std::string> otherStep = base;
  otherStep[3] = "SLURM_STEP_ID=1";
  EXPECT_NE(std::memcmp(a.secret, idFor(otherStep).secret, 32), 0);
  std::vector<std::string> withSecret = base;
  withSecret.push_back("BRAID_COMM_SECRET=x");
  UniqueIdData c = idFor(withSecret);
  EXPECT_NE(std::memcmp(a.secret, c.secret, 32), 0);
  withSecret[2] = "SLURM_JOB_ID=78";  // BRAID_COMM_SECRET wins over the job id
  EXPECT_EQ(std::memcmp(c.secret, idFor(withSecret).secret, 32), 0);
  // torchrun: the root is on MASTER_PORT + 1.
  UniqueIdData t = idFor({"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"});
  EXPECT_EQ(ntohs(t.root.sin_port), 29501);
}

TEST(Sha256, KnownAnswers) {
  auto hex = [](const std::string& s) {
    uint8_t d[32];
    sha256(s.data(), s.size(), d);
    char out[65];
    for (int i = 0; i < 32; ++i) std::snprintf(out + 2 * i, 3, "%02x", d[i]);
    return std::string(out);
  };
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (braid::kChildFlag == argv[i]) return braid::childMain();
  // Bounds every wait of the in-process tests; children get their own.
  setenv("BRAID_TIMEOUT", "30", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
