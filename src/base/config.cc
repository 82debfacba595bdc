#include "base/config.h"

#include <errno.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace braid {
namespace {

// Reads the settings' variables from one environment, reports refused values and records
// where taken ones came from.
class Reader {
 public:
  Reader(const EnvLookup& env, bool warn, SettingSources* from, RefusedSettings* outOfRange)
      : env_(env), warn_(warn), from_(from), outOfRange_(outOfRange) {}

  // One variable; nullptr when unset.
  const char* only(const char* var) { return env_(var); }
  // BRAID_<name>, else NCCL_<name> (getEnv's order); *var names the one set.
  const char* either(const char* name, std::string* var) {
    *var = std::string("BRAID_") + name;
    if (const char* v = env_(var->c_str())) return v;
    *var = std::string("NCCL_") + name;
    return env_(var->c_str());
  }
  // The setting's value was taken from var.
  void took(const char* setting, const std::string& var) {
    if (from_) (*from_)[setting] = var;
  }

  // Configuration mistakes are reported once, on stderr, whatever BRAID_DEBUG says: a
  // silently ignored setting is worse than a noisy one. Ranks that braidrun started do not
  // repeat what braidrun already said (it sets BRAID_CONFIG_WARNED=1 after reading the same
  // environment). var names the variable the user set: BRAID_X, or NCCL_X when only that one is.
  // wellFormed: the value reads as the setting's type but is out of range (RefusedSetting).
  void bad(const std::string& var, const char* value, const char* why, const std::string& used,
           bool wellFormed = false) {
    if (wellFormed && outOfRange_) outOfRange_->push_back({var, value, why});
    if (!warn_) return;
    const char* warned = env_("BRAID_CONFIG_WARNED");
    if (warned && std::strcmp(warned, "1") == 0) return;
    std::fprintf(stderr, "BRAID WARN %s=\"%s\" %s; using %s\n", var.c_str(), value, why,
                 used.c_str());
  }

 private:
  const EnvLookup& env_;
  bool warn_;
  SettingSources* from_;
  RefusedSettings* outOfRange_;
};

// One of `words`, each naming its value; anything else warns and keeps *out. true: taken.
template <typename E, size_t N>
bool parseWord(Reader& r, const std::string& var, const char* v,
               const std::pair<const char*, E> (&words)[N], E* out) {
  std::string list;
  const char* kept = "";
  for (size_t i = 0; i < N; ++i) {
    if (std::strcmp(v, words[i].first) == 0) {
      *out = words[i].second;
      return true;
    }
    if (words[i].second == *out) kept = words[i].first;
    list += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + words[i].first;
  }
  r.bad(var, v, ("is not " + list).c_str(), kept);
  return false;
}

// A byte count (parseByteSize: "4194304", "128K", "2M", "1T"). Out of [lo, hi] or unparsable:
// warn, keep fallback. A fallback of 0 that means "chosen by Braid" (the detected cache, the
// default threshold) is named by zeroMeans in the warning, not as "using 0". *taken (if
// given) says whether the value was taken.
size_t parseBytes(Reader& r, const std::string& var, const char* s, size_t fallback, size_t lo,
                  size_t hi, const char* zeroMeans = nullptr, bool* taken = nullptr) {
  size_t bytes = 0;
  const bool parsed = parseByteSize(s, &bytes);
  const bool ok = parsed && bytes >= lo && bytes <= hi;
  if (taken) *taken = ok;
  if (!ok) {
    r.bad(
        var, s,
        ("is not a byte count in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str(),
        fallback == 0 && zeroMeans ? zeroMeans : std::to_string(fallback), parsed);
    return fallback;
  }
  return bytes;
}

// A number of seconds below 1e9: positive, or also 0 (which turns a feature off) with
// zeroAllowed. Else a warning and the fallback. *taken says which.
double parseSeconds(Reader& r, const std::string& var, const char* v, double fallback,
                    bool zeroAllowed, bool* taken) {
  char* end = nullptr;
  const double t = std::strtod(v, &end);
  const bool parsed = end != v && *end == '\0' && std::isfinite(t);
  *taken = parsed && (t > 0 || (zeroAllowed && t == 0)) && t < 1e9;
  if (*taken) return t;
  r.bad(var, v,
        zeroAllowed ? "is not a number of seconds in [0, 1e9) (0: off)"
                    : "is not a number of seconds in (0, 1e9)",
        std::to_string(static_cast<long long>(fallback)), parsed);
  return fallback;
}

}  // namespace

Config configFrom(const EnvLookup& env, bool warn, SettingSources* from,
                  RefusedSettings* outOfRange) {
  Reader r(env, warn, from, outOfRange);
  Config c;
  std::string var;
  bool taken = false;
  if (const char* v = r.either("DEBUG", &var)) {
    const std::pair<const char*, LogLevel> levels[] = {{"NONE", LogLevel::kNone},
                                                       {"VERSION", LogLevel::kNone},
                                                       {"WARN", LogLevel::kWarn},
                                                       {"INFO", LogLevel::kInfo},
                                                       {"TRACE", LogLevel::kTrace}};
    taken = false;
    for (const auto& [word, level] : levels) {
      if (strcasecmp(v, word) == 0) {
        c.debugLevel = level;
        taken = true;
        break;
      }
    }
    if (taken)
      r.took("BRAID_DEBUG", var);
    else
      r.bad(var, v, "is not NONE, WARN, INFO or TRACE", "WARN");
  }
  if (const char* v = r.either("DEBUG_SUBSYS", &var)) {
    c.debugSubsys = v;
    r.took("BRAID_DEBUG_SUBSYS", var);
  }
  if (const char* v = r.either("TIMEOUT", &var)) {
    c.timeoutSec = parseSeconds(r, var, v, c.timeoutSec, false, &taken);
    if (taken) r.took("BRAID_TIMEOUT", var);
  }
  if (const char* v = r.either("STALL_WARN", &var)) {
    c.stallWarnSec = parseSeconds(r, var, v, c.stallWarnSec, true, &taken);
    if (taken) r.took("BRAID_STALL_WARN", var);
  }
  if (const char* v = r.either("CHECK", &var)) {
    const std::string s = v;
    if (s == "1" || s == "0") {
      c.checkCalls = s == "1";
      r.took("BRAID_CHECK", var);
    } else {
      r.bad(var, v, "is not 0 or 1", "0");
    }
  }
  if (const char* v = r.only("BRAID_CALL_CHECK")) {
    const std::string s = v;
    if (s == "1" || s == "0") {
      c.callCheck = s == "1";
      r.took("BRAID_CALL_CHECK", "BRAID_CALL_CHECK");
    } else {
      r.bad("BRAID_CALL_CHECK", v, "is not 0 or 1", "1");
    }
  }
  if (const char* v = r.only("BRAID_CUDA_IPC")) {
    const std::string s = v;
    if (s == "1" || s == "0") {
      c.cudaIpc = s == "1";
      r.took("BRAID_CUDA_IPC", "BRAID_CUDA_IPC");
    } else {
      r.bad("BRAID_CUDA_IPC", v, "is not 0 or 1", "1");
    }
  } else if (const char* p2p = r.only("NCCL_P2P_DISABLE")) {  // NCCL's switch for it
    const std::string s = p2p;
    if (s == "1" || s == "0") {
      c.cudaIpc = s == "0";
      r.took("BRAID_CUDA_IPC", "NCCL_P2P_DISABLE");
    } else {
      r.bad("NCCL_P2P_DISABLE", p2p, "is not 0 or 1", "0");
    }
  }
  if (const char* v = r.either("SOCKET_IFNAME", &var)) {
    c.socketIfname = v;
    r.took("BRAID_SOCKET_IFNAME", var);
  }
  if (const char* v = r.only("BRAID_HOST_ID")) {
    c.hostId = v;
    r.took("BRAID_HOST_ID", "BRAID_HOST_ID");
  }
  if (const char* v = r.either("ALGO", &var)) {
    c.algo = v;
    r.took("BRAID_ALGO", var);
  }
  if (const char* v = r.either("RINGS", &var)) {  // NCCL_RINGS' name; BRAID_RING below
    c.ring = v;
    r.took("BRAID_RING", var);
  }
  // Plain strings, each from its BRAID_ name alone.
  const std::pair<const char*, std::string Config::*> strings[] = {
      {"BRAID_RING", &Config::ring},
      {"BRAID_TUNE_FILE", &Config::tuneFile},
      {"BRAID_TUNE_TABLE", &Config::tuneTable}};
  for (const auto& [name, field] : strings) {
    if (const char* v = r.only(name)) {
      c.*field = v;
      r.took(name, name);
    }
  }
  if (const char* v = r.either("TOPO_FILE", &var)) {
    c.topoFile = v;
    r.took("BRAID_TOPO_FILE", var);
  }
  if (const char* v = r.either("TOPO_DUMP_FILE", &var)) {
    c.topoDumpFile = v;
    r.took("BRAID_TOPO_DUMP_FILE", var);
  }
  if (const char* v = r.only("BRAID_TRANSPORT")) {
    if (!strcasecmp(v, "shm") || !strcasecmp(v, "tcp") || !strcasecmp(v, "ucx")) {
      c.transport = v;
      for (char& ch : c.transport) ch = static_cast<char>(std::tolower(ch));
      r.took("BRAID_TRANSPORT", "BRAID_TRANSPORT");
    } else if (*v) {
      r.bad("BRAID_TRANSPORT", v, "is not shm, tcp or ucx",
            "shm within a host and tcp between hosts");
    }
  }
  if (const char* v = r.only("BRAID_NSOCKS_PERPEER")) {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(v, &end, 10);
    const bool parsed = end != v && *end == '\0' && errno == 0;
    if (parsed && n >= 1 && n <= 16) {
      c.nsocksPerPeer = static_cast<int>(n);
      r.took("BRAID_NSOCKS_PERPEER", "BRAID_NSOCKS_PERPEER");
    } else {
      r.bad("BRAID_NSOCKS_PERPEER", v, "is not a whole number in [1, 16]",
            std::to_string(c.nsocksPerPeer), parsed);
    }
  }
  // A connection's FIFO holds buffSize / chunkSize slots: at least 2, at most 4096.
  if (const char* v = r.either("CHUNKSIZE", &var)) {
    // A value refused (warned about, the default kept) counts as unset: the communicator
    // still picks each call's step and the network's larger chunk.
    c.chunkSize = parseBytes(r, var, v, c.chunkSize, 64, 64u << 20, nullptr, &c.chunkSizeSet);
    if (c.chunkSizeSet) r.took("BRAID_CHUNKSIZE", var);
  }
  if (const char* v = r.either("SINGLE_COPY", &var)) {
    using S = Config::SingleCopy;
    const std::pair<const char*, S> words[] = {
        {"shared", S::kShared}, {"threads", S::kThreads}, {"all", S::kAll}, {"off", S::kOff}};
    if (parseWord(r, var, v, words, &c.singleCopy)) r.took("BRAID_SINGLE_COPY", var);
  }
  if (const char* v = r.either("STREAM_STORES", &var)) {
    using S = Config::StreamStores;
    const std::pair<const char*, S> words[] = {
        {"auto", S::kAuto}, {"on", S::kOn}, {"off", S::kOff}};
    if (parseWord(r, var, v, words, &c.streamStores)) r.took("BRAID_STREAM_STORES", var);
  }
  if (const char* v = r.either("CACHE_BYTES", &var)) {
    c.cacheBytes = parseBytes(r, var, v, c.cacheBytes, 0, size_t{1} << 40,
                              "the detected last-level cache", &taken);
    if (taken) r.took("BRAID_CACHE_BYTES", var);
  }
  if (const char* v = r.either("SINGLE_COPY_BYTES", &var)) {
    c.singleCopyBytes =
        parseBytes(r, var, v, c.singleCopyBytes, 1, size_t{1} << 40,
                   "the default (64K for braidMemAllocHost buffers, 1M for the rest)", &taken);
    if (taken) r.took("BRAID_SINGLE_COPY_BYTES", var);
  }
  std::string buffVar;
  const char* buff = r.either("BUFFSIZE", &buffVar);
  bool buffTaken = false;
  if (buff)
    c.buffSize = parseBytes(r, buffVar, buff, c.buffSize, 128, 1u << 30, nullptr, &buffTaken);
  // A buffer of fewer than 2 chunks grows to 2. Only a buffer size the user set (and Braid
  // took) is worth a warning: the default simply follows a large BRAID_CHUNKSIZE.
  const size_t asked = c.buffSize;
  if (c.buffSize < 2 * c.chunkSize) {
    if (buffTaken)
      r.bad(buffVar, buff, "holds fewer than 2 chunks of BRAID_CHUNKSIZE",
            std::to_string(2 * c.chunkSize));
    c.buffSize = 2 * c.chunkSize;
  }
  if (c.buffSize / c.chunkSize > 4096) c.buffSize = 4096 * c.chunkSize;
  // A size Braid changed came from BRAID_CHUNKSIZE's rule, not from the variable.
  if (buffTaken && c.buffSize == asked) r.took("BRAID_BUFFSIZE", buffVar);
  return c;
}

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

namespace {
struct Loaded {
  Config config;
  SettingSources from;
  RefusedSettings outOfRange;
};
const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded out;
    out.config = configFrom([](const char* name) { return std::getenv(name); }, true, &out.from,
                            &out.outOfRange);
    return out;
  }();
  return l;
}
}  // namespace

const Config& config() { return loaded().config; }
const SettingSources& configSources() { return loaded().from; }
const RefusedSettings& configOutOfRange() { return loaded().outOfRange; }

std::string settingVar(const std::string& setting) {
  const SettingSources& from = configSources();
  const auto it = from.find(setting);
  return it == from.end() ? setting : it->second;
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
