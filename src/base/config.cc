#include "base/config.h"

#include <errno.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace braid {
namespace {

// Configuration mistakes are reported once, on stderr, whatever BRAID_DEBUG says: a
// silently ignored setting is worse than a noisy one. Ranks that braidrun started do not
// repeat what braidrun already said (it sets BRAID_CONFIG_WARNED=1 after reading the same
// environment).
// Names the variable the user set: BRAID_X, or NCCL_X when only that one is (getEnv).
void badValue(const char* name, const char* value, const char* why, const std::string& used) {
  const char* warned = std::getenv("BRAID_CONFIG_WARNED");
  if (warned && std::strcmp(warned, "1") == 0) return;
  std::string set = name;
  if (set.rfind("BRAID_", 0) == 0 && !std::getenv(name)) set = "NCCL_" + set.substr(6);
  std::fprintf(stderr, "BRAID WARN %s=\"%s\" %s; using %s\n", set.c_str(), value, why,
               used.c_str());
}

// One of `words`, each naming its value; anything else warns and keeps *out.
template <typename E, size_t N>
void parseWord(const char* name, const char* v, const std::pair<const char*, E> (&words)[N],
               E* out) {
  std::string list;
  const char* kept = "";
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(v, words[i].first) == 0) {
      *out = words[i].second;
      return;
    }
    if (words[i].second == *out) kept = words[i].first;
    list += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + words[i].first;
  }
  badValue(name, v, ("is not " + list).c_str(), kept);
}

// A byte count (parseByteSize: "4194304", "128K", "2M", "1T"). Out of [lo, hi] or unparsable:
// warn, keep fallback. A fallback of 0 that means "chosen by Braid" (the detected cache, the
// default threshold) is named by zeroMeans in the warning, not as "using 0". *taken (if
// given) says whether the value was taken.
size_t parseBytes(const char* name, const char* s, size_t fallback, size_t lo, size_t hi,
                  const char* zeroMeans = nullptr, bool* taken = nullptr) {
  size_t bytes = 0;
  const bool ok = parseByteSize(s, &bytes) && bytes >= lo && bytes <= hi;
  if (taken) *taken = ok;
  if (!ok) {
    badValue(
        name, s,
        ("is not a byte count in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str(),
        fallback == 0 && zeroMeans ? zeroMeans : std::to_string(fallback));
    return fallback;
  }
  return bytes;
}

// A number of seconds below 1e9: positive, or also 0 (which turns a feature off) with
// zeroAllowed. Else a warning and the default.
double parseSeconds(const char* name, const char* v, double fallback, bool zeroAllowed) {
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  if (end != v && *end == '\0' && (t > 0 || (zeroAllowed && t == 0)) && t < 1e9) return t;
  badValue(name, v,
           zeroAllowed ? "is not a number of seconds in [0, 1e9) (0: off)"
                       : "is not a number of seconds in (0, 1e9)",
           std::to_string(static_cast<long long>(fallback)));
  return fallback;
}

Config load() {
  Config c;
  if (const char* v = getEnv("DEBUG")) {
    if (!strcasecmp(v, "INFO"))
      c.debugLevel = LogLevel::kInfo;
    else if (!strcasecmp(v, "TRACE"))
      c.debugLevel = LogLevel::kTrace;
    else if (!strcasecmp(v, "NONE") || !strcasecmp(v, "VERSION"))
      c.debugLevel = LogLevel::kNone;
    else if (!strcasecmp(v, "WARN"))
      c.debugLevel = LogLevel::kWarn;
    else
      badValue("BRAID_DEBUG", v, "is not NONE, WARN, INFO or TRACE", "WARN");
  }
  if (const char* v = getEnv("DEBUG_SUBSYS")) c.debugSubsys = v;
  if (const char* v = getEnv("TIMEOUT"))
    c.timeoutSec = parseSeconds("BRAID_TIMEOUT", v, c.timeoutSec, false);
  if (const char* v = getEnv("STALL_WARN"))
    c.stallWarnSec = parseSeconds("BRAID_STALL_WARN", v, c.stallWarnSec, true);
  if (const char* v = getEnv("CHECK")) {
    const std::string s = v;
    if (s == "1" || s == "0")
      c.checkCalls = s == "1";
    else
      badValue("BRAID_CHECK", v, "is not 0 or 1", "0");
  }
  if (const char* v = std::getenv("BRAID_CUDA_IPC")) {
    const std::string s = v;
    if (s == "1" || s == "0")
      c.cudaIpc = s == "1";
    else
      badValue("BRAID_CUDA_IPC", v, "is not 0 or 1", "1");
  } else if (const char* p2p = std::getenv("NCCL_P2P_DISABLE")) {  // NCCL's switch for it
    const std::string s = p2p;
    if (s == "1" || s == "0")
      c.cudaIpc = s == "0";
    else
      badValue("NCCL_P2P_DISABLE", p2p, "is not 0 or 1", "0");
  }
  if (const char* v = getEnv("SOCKET_IFNAME")) c.socketIfname = v;
  if (const char* v = std::getenv("BRAID_HOST_ID")) c.hostId = v;
  if (const char* v = getEnv("ALGO")) c.algo = v;
  if (const char* v = getEnv("RINGS")) c.ring = v;  // NCCL_RINGS' name; BRAID_RING below
  if (const char* v = std::getenv("BRAID_RING")) c.ring = v;
  if (const char* v = std::getenv("BRAID_TUNE_FILE")) c.tuneFile = v;
  if (const char* v = std::getenv("BRAID_TUNE_TABLE")) c.tuneTable = v;
  if (const char* v = getEnv("TOPO_FILE")) c.topoFile = v;
  if (const char* v = getEnv("TOPO_DUMP_FILE")) c.topoDumpFile = v;
  if (const char* v = std::getenv("BRAID_TRANSPORT")) {
    if (!strcasecmp(v, "shm") || !strcasecmp(v, "tcp") || !strcasecmp(v, "ucx")) {
      c.transport = v;
      for (char& ch : c.transport) ch = static_cast<char>(std::tolower(ch));
    } else if (*v) {
      badValue("BRAID_TRANSPORT", v, "is not shm, tcp or ucx",
               "shm within a host and tcp between hosts");
    }
  }
  if (const char* v = std::getenv("BRAID_NSOCKS_PERPEER")) {
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && n >= 1 && n <= 16)
      c.nsocksPerPeer = static_cast<int>(n);
    else
      badValue("BRAID_NSOCKS_PERPEER", v, "is not a whole number in [1, 16]",
               std::to_string(c.nsocksPerPeer));
  }
  // A connection's FIFO holds buffSize / chunkSize slots: at least 2, at most 4096.
  if (const char* v = getEnv("CHUNKSIZE")) {
    // A value refused (warned about, the default kept) counts as unset: the communicator
    // still picks each call's step and the network's larger chunk.
    size_t bytes = 0;
    c.chunkSizeSet = parseByteSize(v, &bytes) && bytes >= 64 && bytes <= (64u << 20);
    c.chunkSize = parseBytes("BRAID_CHUNKSIZE", v, c.chunkSize, 64, 64u << 20);
  }
  if (const char* v = getEnv("SINGLE_COPY")) {
    using S = Config::SingleCopy;
    const std::pair<const char*, S> words[] = {
        {"shared", S::kShared}, {"threads", S::kThreads}, {"all", S::kAll}, {"off", S::kOff}};
    parseWord("BRAID_SINGLE_COPY", v, words, &c.singleCopy);
  }
  if (const char* v = getEnv("STREAM_STORES")) {
    using S = Config::StreamStores;
    const std::pair<const char*, S> words[] = {
        {"auto", S::kAuto}, {"on", S::kOn}, {"off", S::kOff}};
    parseWord("BRAID_STREAM_STORES", v, words, &c.streamStores);
  }
  if (const char* v = getEnv("CACHE_BYTES"))
    c.cacheBytes = parseBytes("BRAID_CACHE_BYTES", v, c.cacheBytes, 0, size_t{1} << 40,
                              "the detected last-level cache");
  if (const char* v = getEnv("SINGLE_COPY_BYTES"))
    c.singleCopyBytes =
        parseBytes("BRAID_SINGLE_COPY_BYTES", v, c.singleCopyBytes, 1, size_t{1} << 40,
                   "the default (64K for braidMemAllocHost buffers, 1M for the rest)");
  const char* buff = getEnv("BUFFSIZE");
  bool buffTaken = false;
  if (buff)
    c.buffSize = parseBytes("BRAID_BUFFSIZE", buff, c.buffSize, 128, 1u << 30, nullptr, &buffTaken);
  // A buffer of fewer than 2 chunks grows to 2. Only a buffer size the user set (and Braid
  // took) is worth a warning: the default simply follows a large BRAID_CHUNKSIZE.
  if (c.buffSize < 2 * c.chunkSize) {
    if (buffTaken)
      badValue("BRAID_BUFFSIZE", buff, "holds fewer than 2 chunks of BRAID_CHUNKSIZE",
               std::to_string(2 * c.chunkSize));
    c.buffSize = 2 * c.chunkSize;
  }
  if (c.buffSize / c.chunkSize > 4096) c.buffSize = 4096 * c.chunkSize;
  return c;
}

}  // namespace

bool parseByteSize(const std::string& text, size_t* out) {
  if (text.empty() || !isdigit(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno) return false;
  static const struct {
    const char* names[4];
    int shift;
  } kUnits[] = {{{"B", "B", "B", "B"}, 0},
                {{"K", "k", "KB", "KiB"}, 10},
                {{"M", "m", "MB", "MiB"}, 20},
                {{"G", "g", "GB", "GiB"}, 30},
                {{"T", "t", "TB", "TiB"}, 40}};
  const std::string suffix = end;
  int shift = suffix.empty() ? 0 : -1;
  for (const auto& u : kUnits)
    for (const char* n : u.names)
      if (suffix == n) shift = u.shift;
  if (shift < 0 || v > (SIZE_MAX >> shift)) return false;
  *out = static_cast<size_t>(v) << shift;
  return true;
}

const char* getEnv(const char* name) {
  std::string b = std::string("BRAID_") + name;
  if (const char* v = std::getenv(b.c_str())) return v;
  std::string n = std::string("NCCL_") + name;
  return std::getenv(n.c_str());
}

const Config& config() {
  static const Config c = load();
  return c;
}

namespace {
BRAID_STATIC_TLS thread_local double t_waitTimeout = 0;  // as error.cc's t_log_rank
}  // namespace

double waitTimeoutSec() { return t_waitTimeout > 0 ? t_waitTimeout : config().timeoutSec; }

WaitTimeoutScope::WaitTimeoutScope(double seconds) : saved_(t_waitTimeout) {
  t_waitTimeout = seconds;
}
WaitTimeoutScope::~WaitTimeoutScope() { t_waitTimeout = saved_; }

namespace {
thread_local const std::atomic<bool>* t_abortFlag = nullptr;
}  // namespace

const std::atomic<bool>* waitAbortFlag() { return t_abortFlag; }
bool waitAborted() { return t_abortFlag && t_abortFlag->load(std::memory_order_acquire); }
WaitAbortScope::WaitAbortScope(const std::atomic<bool>* flag) : saved_(t_abortFlag) {
  t_abortFlag = flag;
}
WaitAbortScope::~WaitAbortScope() { t_abortFlag = saved_; }

bool Config::subsysEnabled(const char* subsys) const {
  if (debugSubsys.empty()) return true;
  bool exclude = debugSubsys[0] == '^';
  std::string list = exclude ? debugSubsys.substr(1) : debugSubsys;
  bool listed = false;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string item =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!strcasecmp(item.c_str(), subsys) || !strcasecmp(item.c_str(), "ALL")) listed = true;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !listed : listed;
}

size_t assumedCacheBytes(size_t sysfsBytes, long cpuidBytes) {
  if (sysfsBytes > 0) return sysfsBytes;
  return cpuidBytes > 0 ? std::min(static_cast<size_t>(cpuidBytes), kUnlistedCacheBytes)
                        : kUnlistedCacheBytes;
}

}  // namespace braid
