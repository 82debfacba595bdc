#include "test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
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

void fillInput(braidDataType_t t, braidRedOp_t op, int r, size_t count, void* buf) {
  size_t s = braidTypeSize(t);
  for (size_t i = 0; i < count; ++i)
    store(t, inputValue(t, op, r, i), static_cast<char*>(buf) + i * s);
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

int childMain(int argc, char** argv) {
  const std::string prefix = "--braid-child=";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind(prefix, 0) != 0) continue;
    auto it = roles().find(a.substr(prefix.size()));
    if (it == roles().end()) {
      std::fprintf(stderr, "unknown child role %s\n", a.c_str());
      return 2;
    }
    const char* idText = std::getenv("BRAID_UNIQUE_ID");
    int rank = std::atoi(std::getenv("BRAID_RANK"));
    int nranks = std::atoi(std::getenv("BRAID_NRANKS"));
    braidUniqueId id;
    braidComm_t comm = nullptr;
    if (braidUniqueIdFromString(idText, &id) != braidSuccess ||
        braidCommInitRank(&comm, nranks, id, rank) != braidSuccess) {
      std::fprintf(stderr, "rank %d: init failed: %s\n", rank, braidGetLastError(nullptr));
      return 3;
    }
    int rc = it->second(comm, rank, nranks);
    braidCommDestroy(comm);
    return rc;
  }
  return -1;
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

std::vector<std::string> shmLeftovers(const std::vector<ChildResult>& children) {
  std::vector<std::string> out;
  for (const ChildResult& c : children)
    for (const std::string& name : shmLeftovers(c.pid)) out.push_back(name);
  return out;
}

}  // namespace braid::test
