#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "kernels/reduce.h"

namespace braid::test {
namespace {

bool isFloat(braidDataType_t t) {
  return t == braidFloat16 || t == braidFloat32 || t == braidFloat64 || t == braidBfloat16 ||
         t == braidFloat8e4m3 || t == braidFloat8e5m2;
}
bool isSigned(braidDataType_t t) { return t == braidInt8 || t == braidInt32 || t == braidInt64; }

// Stores v (exactly representable) as one element of type t.
void store(braidDataType_t t, double v, void* out) {
  switch (t) {
    case braidInt8:
      *static_cast<int8_t*>(out) = static_cast<int8_t>(v);
      break;
    case braidUint8:
      *static_cast<uint8_t*>(out) = static_cast<uint8_t>(v);
      break;
    case braidInt32:
      *static_cast<int32_t*>(out) = static_cast<int32_t>(v);
      break;
    case braidUint32:
      *static_cast<uint32_t*>(out) = static_cast<uint32_t>(v);
      break;
    case braidInt64:
      *static_cast<int64_t*>(out) = static_cast<int64_t>(v);
      break;
    case braidUint64:
      *static_cast<uint64_t*>(out) = static_cast<uint64_t>(v);
      break;
    case braidFloat16:
      *static_cast<uint16_t*>(out) = kernels::floatToHalf(static_cast<float>(v));
      break;
    case braidBfloat16:
      *static_cast<uint16_t*>(out) = kernels::floatToBf16(static_cast<float>(v));
      break;
    case braidFloat32:
      *static_cast<float*>(out) = static_cast<float>(v);
      break;
    case braidFloat64:
      *static_cast<double*>(out) = v;
      break;
    case braidFloat8e4m3:
      *static_cast<uint8_t*>(out) = kernels::floatToFp8e4m3(static_cast<float>(v));
      break;
    case braidFloat8e5m2:
      *static_cast<uint8_t*>(out) = kernels::floatToFp8e5m2(static_cast<float>(v));
      break;
    default:
      break;
  }
}

uint64_t bitsMask(braidDataType_t t) {
  size_t s = braidTypeSize(t);
  return s >= 8 ? ~0ull : ((1ull << (8 * s)) - 1);
}

// Wraps an exact integer result to the type's width, as two's complement.
int64_t wrapSigned(int64_t v, braidDataType_t t) {
  uint64_t u = static_cast<uint64_t>(v) & bitsMask(t);
  size_t bits = 8 * braidTypeSize(t);
  if (bits < 64 && (u >> (bits - 1)) & 1) u |= ~bitsMask(t);
  return static_cast<int64_t>(u);
}

std::map<std::string, std::function<int(braidComm_t, int, int)>>& roles() {
  static std::map<std::string, std::function<int(braidComm_t, int, int)>> r;
  return r;
}

std::map<std::string, std::function<int(int, int)>>& rawRoles() {
  static std::map<std::string, std::function<int(int, int)>> r;
  return r;
}

// An integer environment variable, or -1 when unset or not a number.
int envInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n <= INT_MAX ? static_cast<int>(n) : -1;
}

// With BRAID_TEST_STATUS_DIR set (runInCluster), leaves "STATUS PID" in DIR/RANK.
int recordStatus(int rank, int rc) {
  const char* dir = std::getenv("BRAID_TEST_STATUS_DIR");
  if (dir != nullptr && rank >= 0) {
    std::ofstream f(std::string(dir) + "/" + std::to_string(rank));
    f << rc << " " << getpid() << "\n";
  }
  return rc;
}

}  // namespace

double inputValue(braidDataType_t t, braidRedOp_t op, int r, size_t i) {
  const size_t k = (static_cast<size_t>(r) * 7 + i) % 11;
  switch (op) {
    case braidProd:
      return (static_cast<size_t>(r) + i) % 5 == 0 ? 2 : 1;  // at most 2^4 for 16 ranks
    case braidMax:
    case braidMin:
      if (t == braidFloat8e5m2 || t == braidFloat8e4m3) return static_cast<double>(k % 8);
      return isSigned(t) || isFloat(t) ? static_cast<double>(k) - 5 : static_cast<double>(k);
    default:                                                                      // sum, avg
      if (t == braidInt8 || t == braidUint8) return 60 + static_cast<double>(k);  // sums wrap
      if (t == braidFloat8e4m3 || t == braidFloat8e5m2) return static_cast<double>(k % 2);
      return static_cast<double>(k % 4);
  }
}

namespace {
// Writes elements first .. first + count - 1 (es bytes each) through one(i, out) for the first
// period, then copies that period over the rest, doubling the copied length each time.
template <typename One>
void fillPeriodic(size_t first, size_t count, size_t es, char* out, One one) {
  const size_t head = std::min(count, kInputPeriod);
  for (size_t j = 0; j < head; ++j) one(first + j, out + j * es);
  const size_t total = count * es;
  for (size_t have = head * es; have < total;) {
    const size_t n = std::min(have, total - have);
    std::memcpy(out + have, out, n);
    have += n;
  }
}
}  // namespace

void fillInput(braidDataType_t t, braidRedOp_t op, int r, size_t count, void* buf) {
  fillPeriodic(0, count, braidTypeSize(t), static_cast<char*>(buf),
               [&](size_t i, char* out) { store(t, inputValue(t, op, r, i), out); });
}

void expectedAllReduceRange(braidDataType_t t, braidRedOp_t op, int nranks, size_t first,
                            size_t count, void* out) {
  fillPeriodic(first, count, braidTypeSize(t), static_cast<char*>(out),
               [&](size_t i, char* o) { expectedAllReduce(t, op, nranks, i, o); });
}

void expectedAllReduce(braidDataType_t t, braidRedOp_t op, int nranks, size_t i, void* out) {
  if (!isFloat(t)) {
    // Exact in 64-bit integers, then wrapped like the kernels (two's complement modulo 2^bits).
    uint64_t acc = op == braidProd ? 1 : 0;
    int64_t best = 0;
    for (int r = 0; r < nranks; ++r) {
      int64_t v = static_cast<int64_t>(inputValue(t, op, r, i));
      if (op == braidProd)
        acc *= static_cast<uint64_t>(v);
      else
        acc += static_cast<uint64_t>(v);
      if (r == 0 || (op == braidMax && v > best) || (op == braidMin && v < best)) best = v;
    }
    int64_t res = (op == braidMax || op == braidMin) ? best : static_cast<int64_t>(acc);
    if (isSigned(t)) {
      res = wrapSigned(res, t);
      if (op == braidAvg) res /= nranks;
    } else {
      uint64_t u = static_cast<uint64_t>(res) & bitsMask(t);
      if (op == braidAvg) u /= static_cast<uint64_t>(nranks);
      res = static_cast<int64_t>(u);
    }
    std::memcpy(out, &res, braidTypeSize(t));  // little-endian: low bytes first
    return;
  }
  double acc = op == braidProd ? 1 : 0, best = 0;
  for (int r = 0; r < nranks; ++r) {
    double v = inputValue(t, op, r, i);
    if (op == braidProd)
      acc *= v;
    else
      acc += v;
    if (r == 0 || (op == braidMax && v > best) || (op == braidMin && v < best)) best = v;
  }
  double res = (op == braidMax || op == braidMin) ? best : acc;
  if (op == braidAvg) {
    // One division of the exact sum: in fp64 for double, else in fp32, then rounded once.
    res = t == braidFloat64
              ? acc / nranks
              : static_cast<double>(static_cast<float>(acc) / static_cast<float>(nranks));
  }
  store(t, res, out);
}

long long firstMismatch(const void* a, const void* b, size_t bytes, size_t elemSize) {
  if (std::memcmp(a, b, bytes) == 0) return -1;
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  for (size_t i = 0; i < bytes; i += elemSize)
    if (std::memcmp(x + i, y + i, elemSize) != 0) return static_cast<long long>(i / elemSize);
  return -1;
}

std::vector<std::string> runThreads(int nranks,
                                    const std::function<std::string(braidComm_t, int)>& fn) {
  std::vector<braidComm_t> comms(nranks, nullptr);
  std::vector<std::string> errors;
  if (braidCommInitAll(comms.data(), nranks, nullptr) != braidSuccess) {
    errors.push_back(std::string("braidCommInitAll failed: ") + braidGetLastError(nullptr));
    return errors;
  }
  std::vector<std::string> out(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back([&, r] { out[r] = fn(comms[r], r); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (!out[r].empty()) errors.push_back("rank " + std::to_string(r) + ": " + out[r]);
    braidCommDestroy(comms[r]);
  }
  return errors;
}

std::vector<std::string> runThreadsWithConfig(
    int nranks, const braidConfig_t& config,
    const std::function<std::string(braidComm_t, int)>& fn) {
  braidUniqueId id;
  if (braidGetUniqueId(&id) != braidSuccess)
    return {std::string("braidGetUniqueId failed: ") + braidGetLastError(nullptr)};
  std::vector<std::string> out(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      braidConfig_t mine = config;
      braidComm_t comm = nullptr;
      if (braidCommInitRankConfig(&comm, nranks, id, r, &mine) != braidSuccess) {
        out[r] = std::string("init: ") + braidGetLastError(nullptr);
        return;
      }
      out[r] = fn(comm, r);
      braidCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> errors;
  for (int r = 0; r < nranks; ++r)
    if (!out[r].empty()) errors.push_back("rank " + std::to_string(r) + ": " + out[r]);
  return errors;
}

std::vector<ChildResult> runProcesses(int nranks, const std::string& role,
                                      const std::vector<std::string>& extraEnv) {
  braidUniqueId id;
  std::vector<ChildResult> results(nranks, ChildResult{-1, ""});
  if (braidGetUniqueId(&id) != braidSuccess) {
    results[0].output = braidGetLastError(nullptr);
    return results;
  }
  char idText[2 * BRAID_UNIQUE_ID_BYTES + 1];
  braidUniqueIdToString(&id, idText);
  std::vector<pid_t> pids(nranks);
  std::vector<int> fds(nranks);
  for (int r = 0; r < nranks; ++r) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return results;
    std::vector<std::string> env = {"BRAID_UNIQUE_ID=" + std::string(idText),
                                    "BRAID_RANK=" + std::to_string(r),
                                    "BRAID_NRANKS=" + std::to_string(nranks)};
    for (const auto& e : extraEnv) env.push_back(e);
    std::string arg = "--braid-child=" + role;
    pid_t pid = fork();
    if (pid == 0) {
      dup2(p[1], 1);
      dup2(p[1], 2);
      for (auto& e : env) putenv(const_cast<char*>(e.c_str()));
      char* argv[] = {const_cast<char*>("/proc/self/exe"), const_cast<char*>(arg.c_str()), nullptr};
      execv("/proc/self/exe", argv);
      _exit(127);
    }
    close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  // Drain every child's output while they run so none blocks on a full pipe.
  int open = nranks;
  std::vector<bool> eof(nranks, false);
  while (open > 0) {
    std::vector<pollfd> pfds;
    for (int r = 0; r < nranks; ++r)
      if (!eof[r]) pfds.push_back({fds[r], POLLIN, 0});
    poll(pfds.data(), pfds.size(), 1000);
    for (int r = 0; r < nranks; ++r) {
      if (eof[r]) continue;
      pollfd q{fds[r], POLLIN, 0};
      if (poll(&q, 1, 0) <= 0) continue;
      char buf[4096];
      ssize_t n = read(fds[r], buf, sizeof(buf));
      if (n <= 0) {
        eof[r] = true;
        --open;
        close(fds[r]);
      } else {
        results[r].output.append(buf, n);
      }
    }
  }
  for (int r = 0; r < nranks; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    results[r].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    results[r].pid = pids[r];
  }
  return results;
}

void registerChildRole(const std::string& role, std::function<int(braidComm_t, int, int)> fn) {
  roles()[role] = std::move(fn);
}

void registerRawChildRole(const std::string& role, std::function<int(int, int)> fn) {
  rawRoles()[role] = std::move(fn);
}

RankEnv rankEnv() {
  RankEnv e;
  e.rank = envInt("BRAID_RANK");
  e.nranks = envInt("BRAID_NRANKS");
  e.localRank = envInt("BRAID_LOCAL_RANK");
  e.localSize = envInt("BRAID_LOCAL_SIZE");
  if (const char* h = std::getenv("BRAID_HOST_ID")) e.hostId = h;
  return e;
}

int childMain(int argc, char** argv) {
  const std::string prefix = "--braid-child=";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind(prefix, 0) != 0) continue;
    const std::string role = a.substr(prefix.size());
    auto it = roles().find(role);
    auto raw = rawRoles().find(role);
    if (it == roles().end() && raw == rawRoles().end()) {
      std::fprintf(stderr, "unknown child role %s\n", a.c_str());
      return 2;
    }
    // Set by runProcesses and by braidrun.
    const char* idText = std::getenv("BRAID_UNIQUE_ID");
    const int rank = envInt("BRAID_RANK");
    const int nranks = envInt("BRAID_NRANKS");
    if (idText == nullptr || rank < 0 || nranks < 1 || rank >= nranks) {
      std::fprintf(stderr,
                   "child role %s: BRAID_UNIQUE_ID, BRAID_RANK and BRAID_NRANKS must be set "
                   "(by runProcesses or braidrun)\n",
                   role.c_str());
      return 2;
    }
    if (raw != rawRoles().end()) return recordStatus(rank, raw->second(rank, nranks));
    braidUniqueId id;
    braidComm_t comm = nullptr;
    if (braidUniqueIdFromString(idText, &id) != braidSuccess ||
        braidCommInitRank(&comm, nranks, id, rank) != braidSuccess) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, braidGetLastError(nullptr));
      return recordStatus(rank, 3);
    }
    int rc = it->second(comm, rank, nranks);
    braidCommDestroy(comm);
    return recordStatus(rank, rc);
  }
  return -1;
}

namespace {

constexpr char kClusterBridge[] = "braid-br";
constexpr char kClusterNsPrefix[] = "braid-h";
// Held from `cluster.sh up` to `down`: one emulated cluster per machine at a time.
constexpr char kClusterLock[] = "/run/lock/braid-cluster-session.lock";

std::string sourceDir() {
  if (const char* d = std::getenv("BRAID_TEST_SOURCE_DIR")) return d;
#ifdef BRAID_SOURCE_DIR
  return BRAID_SOURCE_DIR;
#else
  return "";
#endif
}

std::string braidrunPath() {
  if (const char* p = std::getenv("BRAID_TEST_BRAIDRUN")) return p;
#ifdef BRAID_BRAIDRUN
  return BRAID_BRAIDRUN;
#else
  return "";
#endif
}

std::string selfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("/proc/self/exe");
}

std::vector<char*> cStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs argv with environ + extraEnv; stdout and stderr go to *output. Stops it with SIGTERM
// after timeoutSec (then SIGKILL 10 s later). With dieWithUs, the command gets SIGTERM if
// this process dies. Returns its exit status (128 + signal), or -1 if it could not start.
int runCommand(std::vector<std::string> argv, const std::vector<std::string>& extraEnv,
               std::string* output, double timeoutSec, bool dieWithUs) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& e : extraEnv) env.push_back(e);
  std::vector<char*> cargv = cStrings(argv), cenv = cStrings(env);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    *output += "pipe: " + std::string(std::strerror(errno)) + "\n";
    return -1;
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    *output += "fork: " + std::string(std::strerror(errno)) + "\n";
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    if (dieWithUs) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(1);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(p[1], 1);
    dup2(p[1], 2);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(p[1]);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSec);
  bool termSent = false, killSent = false;
  auto killAt = Clock::time_point::max();
  for (;;) {
    pollfd q{p[0], POLLIN, 0};
    poll(&q, 1, 500);
    if (q.revents != 0) {
      char buf[65536];
      ssize_t n = read(p[0], buf, sizeof(buf));
      if (n > 0) {
        output->append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // EOF: the command and everything it started closed the pipe
    }
    const auto now = Clock::now();
    if (!termSent && now >= deadline) {
      *output += "runInCluster: still running after " + std::to_string(timeoutSec) +
                 " s; sending SIGTERM\n";
      kill(pid, SIGTERM);
      termSent = true;
      killAt = now + std::chrono::seconds(10);
    } else if (termSent && !killSent && now >= killAt) {
      kill(pid, SIGKILL);
      killSent = true;
    }
  }
  close(p[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// From `cluster.sh up` to `cluster.sh down`, with the machine-wide lock held throughout and
// a janitor process that runs `down` if this process dies first.
class ClusterSession {
 public:
  explicit ClusterSession(std::string script) : script_(std::move(script)) {}
  ClusterSession(const ClusterSession&) = delete;
  ClusterSession& operator=(const ClusterSession&) = delete;

  // Takes the lock (waiting up to 10 min for another test's cluster) and starts the janitor.
  bool begin(std::string* error) {
    mkdir("/run/lock", 0755);
    lockFd_ = open(kClusterLock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lockFd_ < 0) {
      *error = std::string("cannot open ") + kClusterLock + ": " + std::strerror(errno);
      return false;
    }
    for (int waited = 0; flock(lockFd_, LOCK_EX | LOCK_NB) != 0; ++waited) {
      if (waited == 0) std::fprintf(stderr, "runInCluster: waiting for %s\n", kClusterLock);
      if (waited >= 600) {
        *error = std::string("another emulated cluster held ") + kClusterLock + " for 10 min";
        return false;
      }
      sleep(1);
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    std::vector<std::string> args = {"/bin/bash", script_, "down"};
    std::vector<char*> argv = cStrings(args);
    const int lockFd = lockFd_;
    janitor_ = fork();
    if (janitor_ < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      close(p[0]);
      close(p[1]);
      return false;
    }
    if (janitor_ == 0) {
      // Async-signal-safe calls only: the test process may have threads.
      setsid();  // out of the test's process group: a runner's group kill misses it
      struct sigaction ign = {};
      ign.sa_handler = SIG_IGN;
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) sigaction(sig, &ign, nullptr);
      close(p[1]);
      char c = 0;
      ssize_t n;
      do {
        n = read(p[0], &c, 1);
      } while (n < 0 && errno == EINTR);
      if (n == 1) _exit(0);  // the session ended and ran `down` itself
      // EOF: the test process died mid-session. Keep the lock (the inherited descriptor)
      // until `down` is done, so no other session starts on a half-removed cluster.
      fcntl(lockFd, F_SETFD, 0);
      int null = open("/dev/null", O_RDWR);
      if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(p[0]);
    janitorPipe_ = p[1];
    return true;
  }

  // `cluster.sh up`: 0, 77 (cannot here: skip), or another failure status.
  int up(int hosts, const std::string& rate, std::string* output) {
    std::vector<std::string> args = {"/bin/bash", script_, "up", std::to_string(hosts)};
    if (!rate.empty()) {
      args.push_back("--rate");
      args.push_back(rate);
    }
    upCalled_ = true;
    return runCommand(args, {}, output, 300, false);
  }

  ~ClusterSession() {
    if (upCalled_) {
      std::string out;
      const int rc = runCommand({"/bin/bash", script_, "down"}, {}, &out, 120, false);
      if (rc != 0)
        std::fprintf(stderr, "runInCluster: cluster.sh down: status %d\n%s", rc, out.c_str());
    }
    if (janitorPipe_ >= 0) {
      (void)!write(janitorPipe_, "d", 1);
      close(janitorPipe_);
    }
    if (janitor_ > 0) {
      while (waitpid(janitor_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    if (lockFd_ >= 0) {
      flock(lockFd_, LOCK_UN);
      close(lockFd_);
    }
  }

 private:
  const std::string script_;
  int lockFd_ = -1;
  pid_t janitor_ = -1;
  int janitorPipe_ = -1;
  bool upCalled_ = false;
};

}  // namespace

std::vector<std::string> clusterLeftovers() {
  std::vector<std::string> out;
  if (DIR* d = opendir("/run/netns")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, kClusterNsPrefix, std::strlen(kClusterNsPrefix)) == 0)
        out.push_back(std::string("netns ") + e->d_name);
    closedir(d);
  }
  if (if_nametoindex(kClusterBridge) != 0) out.push_back(std::string("bridge ") + kClusterBridge);
  return out;
}

ClusterResult runInCluster(int hosts, int ranksPerHost, const std::string& role,
                           const std::vector<std::string>& extraEnv, const std::string& rate) {
  ClusterResult res;
  const int nranks = hosts * ranksPerHost;
  res.ranks.assign(nranks, ChildResult{-1, ""});
  if (geteuid() != 0) {
    res.skipReason =
        "emulated hosts need root (network namespaces, veths, a bridge); run the tests as root";
    return res;
  }
  const std::string script = sourceDir() + "/scripts/cluster.sh";
  const std::string braidrun = braidrunPath();
  if (access(script.c_str(), R_OK) != 0) {
    res.output = "runInCluster: cannot read " + script + " (set BRAID_TEST_SOURCE_DIR)\n";
    return res;
  }
  if (access(braidrun.c_str(), X_OK) != 0) {
    res.output =
        "runInCluster: cannot execute braidrun at '" + braidrun + "' (set BRAID_TEST_BRAIDRUN)\n";
    return res;
  }
  char statusDir[] = "/tmp/braid-cluster-status-XXXXXX";
  if (mkdtemp(statusDir) == nullptr) {
    res.output = "runInCluster: mkdtemp: " + std::string(std::strerror(errno)) + "\n";
    return res;
  }
  {
    ClusterSession session(script);
    std::string error;
    if (!session.begin(&error)) {
      res.output = "runInCluster: " + error + "\n";
    } else {
      const int up = session.up(hosts, rate, &res.output);
      if (up == 77) {
        res.skipReason = "cannot emulate hosts on this machine: " + res.output;
        while (!res.skipReason.empty() && res.skipReason.back() == '\n') res.skipReason.pop_back();
      } else if (up == 0) {
        std::string hostList;
        for (int h = 0; h < hosts; ++h)
          hostList += (h ? "," : "") + std::string(kClusterNsPrefix) + std::to_string(h) + ":" +
                      std::to_string(ranksPerHost);
        std::vector<std::string> env = extraEnv;
        env.push_back(std::string("BRAID_TEST_STATUS_DIR=") + statusDir);
        double timeout = 900;
        if (const char* t = std::getenv("BRAID_TEST_CLUSTER_TIMEOUT")) timeout = std::atof(t);
        std::string out;
        res.status =
            runCommand({braidrun, "--hosts", hostList, "--", selfExe(), "--braid-child=" + role},
                       env, &out, timeout > 0 ? timeout : 900, true);
        // Lines "RANK: text" are the ranks'; the rest is braidrun's own.
        std::istringstream lines(out);
        std::string line;
        while (std::getline(lines, line)) {
          const size_t colon = line.find(": ");
          int r = -1;
          if (colon != std::string::npos && colon > 0 && colon < 7 &&
              line.find_first_not_of("0123456789") == colon)
            r = std::atoi(line.substr(0, colon).c_str());
          if (r >= 0 && r < nranks)
            res.ranks[r].output += line.substr(colon + 2) + "\n";
          else
            res.output += line + "\n";
        }
      } else {
        res.output += "runInCluster: cluster.sh up " + std::to_string(hosts) +
                      " failed with status " + std::to_string(up) + "\n";
      }
    }
  }  // cluster.sh down, whatever happened
  for (int r = 0; r < nranks; ++r) {
    const std::string file = std::string(statusDir) + "/" + std::to_string(r);
    std::ifstream f(file);
    int status = -1, pid = 0;
    if (f >> status >> pid) {
      res.ranks[r].status = status;
      res.ranks[r].pid = pid;
    }
    unlink(file.c_str());
  }
  rmdir(statusDir);
  return res;
}

std::vector<std::string> shmLeftovers(int pid) {
  std::vector<std::string> out;
  const std::string prefix = "braid-" + std::to_string(pid) + "-";
  DIR* d = opendir("/dev/shm");
  if (!d) return out;
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
  closedir(d);
  return out;
}

std::string failedChildren(const std::vector<ChildResult>& results) {
  std::string out;
  for (size_t r = 0; r < results.size(); ++r)
    if (results[r].status != 0)
      out += "rank " + std::to_string(r) + " (status " + std::to_string(results[r].status) +
             "):\n" + results[r].output + "\n";
  return out;
}

std::vector<std::string> shmLeftovers(const std::vector<ChildResult>& children) {
  std::vector<std::string> out;
  for (const ChildResult& c : children)
    for (const std::string& name : shmLeftovers(c.pid)) out.push_back(name);
  return out;
}

}  // namespace braid::test
