#include "base/settings.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace braid {
namespace {

std::string text(bool b) { return b ? "1" : "0"; }
std::string text(size_t bytes) { return std::to_string(bytes); }
// The shortest text that reads back as the same double (1234567 reads "1234567", 0.3 "0.3").
std::string text(double seconds) {
  char buf[40];
  const auto res = std::to_chars(buf, buf + sizeof buf, seconds);
  return std::string(buf, res.ptr);
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kNone:
      return "NONE";
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    default:
      return "TRACE";
  }
}

const char* singleCopyName(Config::SingleCopy s) {
  switch (s) {
    case Config::SingleCopy::kOff:
      return "off";
    case Config::SingleCopy::kThreads:
      return "threads";
    case Config::SingleCopy::kAll:
      return "all";
    default:
      return "shared";
  }
}

const char* streamStoresName(Config::StreamStores s) {
  switch (s) {
    case Config::StreamStores::kOn:
      return "on";
    case Config::StreamStores::kOff:
      return "off";
    default:
      return "auto";
  }
}

// One row per variable. value: the effective value from Config; nullptr for a variable read
// where it is used (not through Config), whose value is the variable's text, or unsetText.
struct Row {
  const char* name;
  SettingType type;
  bool secret;
  const char* ncclName;  // nullptr: no NCCL variable of the same meaning
  std::string (*value)(const Config&);
  const char* unsetText;
  const char* description;
};

using T = SettingType;
using C = const Config&;

// Every variable Braid reads (grep -rn 'getenv\|getEnv(' src), Config's first in its order.
// Other programs' variables that Braid consults (the launchers' RANK, OMPI_COMM_WORLD_RANK,
// MASTER_ADDR, ...; TMPDIR; HWLOC_FSROOT) are theirs, not Braid settings.
const Row kRows[] = {
    {"BRAID_DEBUG", T::kEnum, false, "NCCL_DEBUG",
     [](C c) -> std::string { return levelName(c.debugLevel); }, nullptr,
     "log level: NONE, WARN, INFO or TRACE (NCCL's VERSION: NONE)"},
    {"BRAID_DEBUG_SUBSYS", T::kString, false, "NCCL_DEBUG_SUBSYS",
     [](C c) { return c.debugSubsys; }, nullptr,
     "subsystems logged: comma list, ^ excludes; empty: all"},
    {"BRAID_TIMEOUT", T::kDouble, false, "NCCL_TIMEOUT", [](C c) { return text(c.timeoutSec); },
     nullptr, "bound of every wait, seconds"},
    {"BRAID_STALL_WARN", T::kDouble, false, "NCCL_STALL_WARN",
     [](C c) { return text(c.stallWarnSec); }, nullptr,
     "seconds without progress before a wait is logged; 0: off"},
    {"BRAID_CHECK", T::kBool, false, "NCCL_CHECK", [](C c) { return text(c.checkCalls); }, nullptr,
     "1: ranks compare their calls before each collective"},
    {"BRAID_CALL_CHECK", T::kBool, false, nullptr, [](C c) { return text(c.callCheck); }, nullptr,
     "1: a count-0 call exchanges its fingerprint, a waiting call asks its peer's call "
     "(0: NCCL's silent no-op)"},
    // NCCL_P2P_DISABLE=1 turns it off, but with the opposite sense: not an alias.
    {"BRAID_CUDA_IPC", T::kBool, false, nullptr, [](C c) { return text(c.cudaIpc); }, nullptr,
     "device buffers of one host go device to device (NCCL_P2P_DISABLE=1 is its 0)"},
    {"BRAID_SOCKET_IFNAME", T::kString, false, "NCCL_SOCKET_IFNAME",
     [](C c) { return c.socketIfname; }, nullptr, "interfaces for sockets (NCCL's syntax)"},
    {"BRAID_HOST_ID", T::kString, false, nullptr, [](C c) { return c.hostId; }, nullptr,
     "host identity; empty: hostname and boot id"},
    {"BRAID_ALGO", T::kString, false, "NCCL_ALGO", [](C c) { return c.algo; }, nullptr,
     "algorithm choice overriding the selector"},
    {"BRAID_RING", T::kString, false, "NCCL_RINGS", [](C c) { return c.ring; }, nullptr,
     "the ranks' ring order (\"0 2 1 3\"); empty: from the layout"},
    {"BRAID_TUNE_FILE", T::kString, false, nullptr, [](C c) { return c.tuneFile; }, nullptr,
     "braid-tune --calibrate's link figures (rank 0's)"},
    {"BRAID_TUNE_TABLE", T::kString, false, nullptr, [](C c) { return c.tuneTable; }, nullptr,
     "braid-tune --json's table (rank 0's)"},
    {"BRAID_TOPO_FILE", T::kString, false, "NCCL_TOPO_FILE", [](C c) { return c.topoFile; },
     nullptr, "NCCL or hwloc XML used instead of detection"},
    {"BRAID_TOPO_DUMP_FILE", T::kString, false, "NCCL_TOPO_DUMP_FILE",
     [](C c) { return c.topoDumpFile; }, nullptr, "where rank 0 writes its topology"},
    {"BRAID_TRANSPORT", T::kEnum, false, nullptr, [](C c) { return c.transport; }, nullptr,
     "shm, tcp or ucx; empty: shm within a host, tcp across"},
    {"BRAID_NSOCKS_PERPEER", T::kInt, false, nullptr,
     [](C c) { return std::to_string(c.nsocksPerPeer); }, nullptr,
     "tcp sockets per peer and direction, 1..16"},
    {"BRAID_CHUNKSIZE", T::kSize, false, "NCCL_CHUNKSIZE", [](C c) { return text(c.chunkSize); },
     nullptr, "bytes per pipelined step"},
    {"BRAID_SINGLE_COPY", T::kEnum, false, "NCCL_SINGLE_COPY",
     [](C c) -> std::string { return singleCopyName(c.singleCopy); }, nullptr,
     "single copy within a host: shared, threads, all or off"},
    {"BRAID_STREAM_STORES", T::kEnum, false, "NCCL_STREAM_STORES",
     [](C c) -> std::string { return streamStoresName(c.streamStores); }, nullptr,
     "streaming stores on receives: auto, on or off"},
    {"BRAID_CACHE_BYTES", T::kSize, false, "NCCL_CACHE_BYTES",
     [](C c) { return text(c.cacheBytes); }, nullptr,
     "last-level cache assumed, bytes; 0: detected"},
    {"BRAID_SINGLE_COPY_BYTES", T::kSize, false, "NCCL_SINGLE_COPY_BYTES",
     [](C c) { return text(c.singleCopyBytes); }, nullptr,
     "smallest single-copy step, bytes; 0: 64K shared buffers, 1M the rest"},
    {"BRAID_BUFFSIZE", T::kSize, false, "NCCL_BUFFSIZE", [](C c) { return text(c.buffSize); },
     nullptr, "shared-memory bytes per peer connection"},
    // Read where they are used.
    {"BRAID_KERNEL_ISA", T::kEnum, false, "NCCL_KERNEL_ISA", nullptr, "",
     "reduction kernels: generic, avx2 or avx512; empty: the widest this CPU runs"},
    {"BRAID_TRACE", T::kEnum, false, nullptr, nullptr, "calls",
     "flight recorder: off, calls or steps (one record per schedule step)"},
    {"BRAID_TRACE_BUFFER", T::kInt, false, nullptr, nullptr, "2000",
     "calls the flight recorder keeps per rank"},
    {"BRAID_TRACE_DIR", T::kString, false, nullptr, nullptr, "",
     "where ranks dump their flight recorder (on failure, SIGUSR1, braidCommDumpTrace)"},
    {"BRAID_TRACE_JOB", T::kString, false, nullptr, nullptr, "",
     "the dumps' folder under BRAID_TRACE_DIR; empty: job-<communicator hash>"},
    {"BRAID_LAUNCHER_PID", T::kInt, false, nullptr, nullptr, "",
     "braidrun's pid: a rank whose call failed asks it to have every rank dump"},
    {"BRAID_CONFIG_WARNED", T::kBool, false, nullptr, nullptr, "0",
     "1 (braidrun sets it): ranks leave configuration warnings to braidrun"},
    {"BRAID_RANK", T::kInt, false, nullptr, nullptr, "",
     "this process's rank (braidrun); empty: another launcher's"},
    {"BRAID_NRANKS", T::kInt, false, nullptr, nullptr, "", "the job's ranks (braidrun)"},
    {"BRAID_LOCAL_RANK", T::kInt, false, nullptr, nullptr, "", "rank within the host (braidrun)"},
    {"BRAID_UNIQUE_ID", T::kString, true, nullptr, nullptr, "",
     "rendezvous: braidUniqueIdToString's text (holds the job's secret)"},
    {"BRAID_COMM_ID", T::kString, false, nullptr, nullptr, "",
     "rendezvous: host:port of rank 0's bootstrap root"},
    {"BRAID_COMM_SECRET", T::kString, true, nullptr, nullptr, "",
     "the job's secret for an address rendezvous"},
};

std::vector<Setting> build(const Config& c, const SettingSources& from, const EnvLookup& env) {
  static const Config kDefaults;
  std::vector<Setting> out;
  out.reserve(std::size(kRows));
  for (const Row& row : kRows) {
    Setting s;
    s.name = row.name;
    s.type = row.type;
    s.ncclName = row.ncclName ? row.ncclName : "";
    s.description = row.description;
    if (row.value) {
      s.value = row.value(c);
      s.defaultValue = row.value(kDefaults);
      const auto it = from.find(row.name);
      s.source = it == from.end() ? "default" : it->second;
    } else {
      // As getEnv where NCCL's name is read too, else as launch_env's envValue.
      const char* v = env(row.name);
      s.source = row.name;
      if (!v && row.ncclName) {
        v = env(row.ncclName);
        s.source = row.ncclName;
      }
      if (!v || !*v) {
        v = row.unsetText;
        s.source = "default";
      }
      s.value = v;
      s.defaultValue = row.unsetText;
    }
    if (row.secret && s.source != "default") s.value = kSecretText;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

const char* settingTypeName(SettingType type) {
  switch (type) {
    case SettingType::kInt:
      return "int";
    case SettingType::kSize:
      return "size";
    case SettingType::kDouble:
      return "double";
    case SettingType::kBool:
      return "bool";
    case SettingType::kString:
      return "string";
    default:
      return "enum";
  }
}

std::vector<Setting> settingsFrom(const EnvLookup& env) {
  SettingSources from;
  const Config c = configFrom(env, false, &from);
  return build(c, from, env);
}

std::vector<Setting> settings() {
  return build(config(), configSources(), [](const char* name) { return std::getenv(name); });
}

int findSetting(const std::vector<Setting>& table, const std::string& key) {
  for (size_t i = 0; i < table.size(); ++i) {
    const Setting& s = table[i];
    if (key.empty()) break;
    if (key == s.name || key == s.ncclName || "BRAID_" + key == s.name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace braid
