// The settings registry (src/base/settings.h) over a given environment: every variable Braid
// reads has its row, values read back parsed, sources name the variable taken (BRAID_ over
// NCCL_, NCCL_P2P_DISABLE for BRAID_CUDA_IPC, "default" for a refused value), secrets stay
// hidden, and keys find their row by any of their names.
#include "base/settings.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace braid {
namespace {

std::vector<Setting> from(const std::map<std::string, std::string>& env) {
  return settingsFrom([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

const Setting& get(const std::vector<Setting>& table, const std::string& key) {
  const int i = findSetting(table, key);
  EXPECT_GE(i, 0) << key;
  static const Setting kNone{};
  return i < 0 ? kNone : table[i];
}

// Every variable src/ reads (grep -rn 'getenv\|getEnv(' src; Config's fields, launch_env.cc,
// kernels/dispatch.cc), each exactly once. A new variable gets a row in settings.cc and a name
// here.
TEST(Settings, EveryVariableOnce) {
  const std::vector<std::string> names = {"BRAID_DEBUG",          "BRAID_DEBUG_SUBSYS",
                                          "BRAID_TIMEOUT",        "BRAID_STALL_WARN",
                                          "BRAID_CHECK",          "BRAID_CALL_CHECK",
                                          "BRAID_CUDA_IPC",       "BRAID_SOCKET_IFNAME",
                                          "BRAID_HOST_ID",        "BRAID_ALGO",
                                          "BRAID_RING",           "BRAID_TUNE_FILE",
                                          "BRAID_TUNE_TABLE",     "BRAID_TOPO_FILE",
                                          "BRAID_TOPO_DUMP_FILE", "BRAID_TRANSPORT",
                                          "BRAID_NSOCKS_PERPEER", "BRAID_CHUNKSIZE",
                                          "BRAID_SINGLE_COPY",    "BRAID_STREAM_STORES",
                                          "BRAID_CACHE_BYTES",    "BRAID_SINGLE_COPY_BYTES",
                                          "BRAID_BUFFSIZE",       "BRAID_KERNEL_ISA",
                                          "BRAID_TRACE",          "BRAID_TRACE_BUFFER",
                                          "BRAID_TRACE_DIR",      "BRAID_TRACE_JOB",
                                          "BRAID_LAUNCHER_PID",   "BRAID_CONFIG_WARNED",
                                          "BRAID_RANK",           "BRAID_NRANKS",
                                          "BRAID_LOCAL_RANK",     "BRAID_UNIQUE_ID",
                                          "BRAID_COMM_ID",        "BRAID_COMM_SECRET"};
  const std::vector<Setting> table = from({});
  std::vector<std::string> listed;
  for (const Setting& s : table) listed.push_back(s.name);
  EXPECT_EQ(listed, names);
  for (const Setting& s : table) {
    EXPECT_EQ(s.source, "default") << s.name;
    EXPECT_EQ(s.value, s.defaultValue) << s.name;
    EXPECT_NE(s.description, nullptr) << s.name;
  }
}

// The same from the sources: each BRAID_ variable src/ reads, in the ways it reads them
// (getenv, getEnv, launch_env.cc's envValue, config.cc's Reader), has a row.
TEST(Settings, EverySourceReadHasARow) {
  const std::vector<std::pair<std::regex, std::string>> reads = {
      {std::regex(R"re(\b(?:getEnv|either)\("([A-Z0-9_]+)")re"), "BRAID_"},
      {std::regex(R"re(\b(?:getenv|envValue|only|env_)\("(BRAID_[A-Z0-9_]+)")re"), ""},
      {std::regex(R"re(\{"(BRAID_[A-Z0-9_]+)", &Config::)re"), ""}};
  // Names read that are another row's: BRAID_RINGS is NCCL_RINGS' BRAID_ twin of BRAID_RING.
  const std::set<std::string> aliases = {"BRAID_RINGS"};
  const std::vector<Setting> table = from({});
  std::set<std::string> found;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(BRAID_SOURCE_DIR) + "/src")) {
    const std::string path = entry.path().string();
    if (!entry.is_regular_file() || (path.size() < 3 || (path.substr(path.size() - 3) != ".cc" &&
                                                         path.substr(path.size() - 2) != ".h")))
      continue;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string code = text.str();
    // launch_env.cc's launchers: braidrun's variables in its RankVars row.
    std::string scanned = code;
    std::smatch row;
    if (std::regex_search(code, row, std::regex(R"re(RankVars kBraidrun = \{[^;]*;)re")))
      scanned += std::regex_replace(row.str(), std::regex(R"re("(BRAID_[A-Z0-9_]+)")re"),
                                    "getenv(\"$1\")");
    for (const auto& [re, prefix] : reads) {
      for (std::sregex_iterator it(scanned.begin(), scanned.end(), re), end; it != end; ++it) {
        const std::string name = prefix + (*it)[1].str();
        found.insert(name);
        if (!aliases.count(name))
          EXPECT_GE(findSetting(table, name), 0)
              << path << " reads " << name << ", not in the table";
      }
    }
  }
  // The scan sees the reads it should (else a changed idiom would pass it silently).
  for (const char* name : {"BRAID_BUFFSIZE", "BRAID_KERNEL_ISA", "BRAID_RANK", "BRAID_COMM_SECRET",
                           "BRAID_TUNE_TABLE", "BRAID_CUDA_IPC", "BRAID_CONFIG_WARNED"})
    EXPECT_TRUE(found.count(name)) << name;
}

TEST(Settings, Defaults) {
  const std::vector<Setting> t = from({});
  EXPECT_EQ(get(t, "BRAID_BUFFSIZE").value, "2097152");
  EXPECT_EQ(get(t, "BRAID_CHUNKSIZE").value, "131072");
  EXPECT_EQ(get(t, "BRAID_TIMEOUT").value, "300");
  EXPECT_EQ(get(t, "BRAID_STALL_WARN").value, "60");
  EXPECT_EQ(get(t, "BRAID_DEBUG").value, "WARN");
  EXPECT_EQ(get(t, "BRAID_CUDA_IPC").value, "1");
  EXPECT_EQ(get(t, "BRAID_CHECK").value, "0");
  EXPECT_EQ(get(t, "BRAID_CALL_CHECK").value, "1");
  EXPECT_EQ(get(t, "BRAID_NSOCKS_PERPEER").value, "2");
  EXPECT_EQ(get(t, "BRAID_SINGLE_COPY").value, "shared");
  EXPECT_EQ(get(t, "BRAID_STREAM_STORES").value, "auto");
  EXPECT_EQ(get(t, "BRAID_TRANSPORT").value, "");
  EXPECT_EQ(get(t, "BRAID_CONFIG_WARNED").value, "0");
  EXPECT_EQ(get(t, "BRAID_RANK").value, "");
  EXPECT_EQ(settingTypeName(get(t, "BRAID_BUFFSIZE").type), std::string("size"));
  EXPECT_EQ(settingTypeName(get(t, "BRAID_TIMEOUT").type), std::string("double"));
  EXPECT_EQ(settingTypeName(get(t, "BRAID_CHECK").type), std::string("bool"));
  EXPECT_EQ(settingTypeName(get(t, "BRAID_NSOCKS_PERPEER").type), std::string("int"));
  EXPECT_EQ(settingTypeName(get(t, "BRAID_DEBUG").type), std::string("enum"));
  EXPECT_EQ(settingTypeName(get(t, "BRAID_ALGO").type), std::string("string"));
}

TEST(Settings, ValuesParsedAndSourcesNamed) {
  const std::vector<Setting> t = from({{"BRAID_BUFFSIZE", "1M"},
                                       {"NCCL_CHUNKSIZE", "64K"},
                                       {"NCCL_DEBUG", "info"},
                                       {"BRAID_TIMEOUT", "2.5"},
                                       {"BRAID_TRANSPORT", "TCP"},
                                       {"NCCL_SOCKET_IFNAME", "=eth0"},
                                       {"BRAID_RANK", "3"},
                                       {"NCCL_KERNEL_ISA", "generic"}});
  EXPECT_EQ(get(t, "BRAID_BUFFSIZE").value, "1048576");
  EXPECT_EQ(get(t, "BRAID_BUFFSIZE").source, "BRAID_BUFFSIZE");
  EXPECT_EQ(get(t, "BRAID_BUFFSIZE").defaultValue, "2097152");
  EXPECT_EQ(get(t, "BRAID_CHUNKSIZE").value, "65536");
  EXPECT_EQ(get(t, "BRAID_CHUNKSIZE").source, "NCCL_CHUNKSIZE");
  EXPECT_EQ(get(t, "BRAID_DEBUG").value, "INFO");
  EXPECT_EQ(get(t, "BRAID_DEBUG").source, "NCCL_DEBUG");
  EXPECT_EQ(get(t, "BRAID_TIMEOUT").value, "2.5");
  EXPECT_EQ(get(t, "BRAID_TRANSPORT").value, "tcp");
  EXPECT_EQ(get(t, "BRAID_SOCKET_IFNAME").value, "=eth0");
  EXPECT_EQ(get(t, "BRAID_SOCKET_IFNAME").source, "NCCL_SOCKET_IFNAME");
  EXPECT_EQ(get(t, "BRAID_RANK").value, "3");
  EXPECT_EQ(get(t, "BRAID_RANK").source, "BRAID_RANK");
  EXPECT_EQ(get(t, "BRAID_KERNEL_ISA").value, "generic");
  EXPECT_EQ(get(t, "BRAID_KERNEL_ISA").source, "NCCL_KERNEL_ISA");
  EXPECT_EQ(get(t, "BRAID_ALGO").source, "default");
}

TEST(Settings, BraidNameBeatsNccl) {
  const std::vector<Setting> t = from({{"BRAID_CHUNKSIZE", "256K"}, {"NCCL_CHUNKSIZE", "64K"}});
  EXPECT_EQ(get(t, "BRAID_CHUNKSIZE").value, "262144");
  EXPECT_EQ(get(t, "BRAID_CHUNKSIZE").source, "BRAID_CHUNKSIZE");
}

// What Braid refuses (and warns about) leaves the default in effect: the source says so.
TEST(Settings, RefusedValueIsDefault) {
  const std::vector<Setting> t = from({{"BRAID_NSOCKS_PERPEER", "99"},
                                       {"BRAID_CHUNKSIZE", "12"},
                                       {"BRAID_DEBUG", "LOUD"},
                                       {"BRAID_SINGLE_COPY", "sometimes"},
                                       {"BRAID_TIMEOUT", "-1"}});
  for (const char* name : {"BRAID_NSOCKS_PERPEER", "BRAID_CHUNKSIZE", "BRAID_DEBUG",
                           "BRAID_SINGLE_COPY", "BRAID_TIMEOUT"}) {
    EXPECT_EQ(get(t, name).source, "default") << name;
    EXPECT_EQ(get(t, name).value, get(t, name).defaultValue) << name;
  }
}

// A buffer of fewer than 2 chunks grows: the value in effect is Braid's, not the variable's.
TEST(Settings, BuffSizeGrownToTwoChunks) {
  const std::vector<Setting> t = from({{"BRAID_BUFFSIZE", "64K"}, {"BRAID_CHUNKSIZE", "1M"}});
  EXPECT_EQ(get(t, "BRAID_BUFFSIZE").value, "2097152");
  EXPECT_EQ(get(t, "BRAID_BUFFSIZE").source, "default");
  EXPECT_EQ(get(t, "BRAID_CHUNKSIZE").source, "BRAID_CHUNKSIZE");
}

TEST(Settings, CudaIpcFromNcclP2pDisable) {
  std::vector<Setting> t = from({{"NCCL_P2P_DISABLE", "1"}});
  EXPECT_EQ(get(t, "BRAID_CUDA_IPC").value, "0");
  EXPECT_EQ(get(t, "BRAID_CUDA_IPC").source, "NCCL_P2P_DISABLE");
  // The opposite sense: NCCL's name finds no setting rather than the inverted one.
  EXPECT_EQ(findSetting(t, "NCCL_P2P_DISABLE"), -1);
  t = from({{"NCCL_P2P_DISABLE", "1"}, {"BRAID_CUDA_IPC", "1"}});
  EXPECT_EQ(get(t, "BRAID_CUDA_IPC").value, "1");
  EXPECT_EQ(get(t, "BRAID_CUDA_IPC").source, "BRAID_CUDA_IPC");
}

TEST(Settings, RingFromNcclRings) {
  std::vector<Setting> t = from({{"NCCL_RINGS", "0 2 1 3"}});
  EXPECT_EQ(get(t, "NCCL_RINGS").value, "0 2 1 3");
  EXPECT_EQ(get(t, "BRAID_RING").source, "NCCL_RINGS");
  t = from({{"NCCL_RINGS", "0 2 1 3"}, {"BRAID_RING", "3 2 1 0"}});
  EXPECT_EQ(get(t, "BRAID_RING").value, "3 2 1 0");
  EXPECT_EQ(get(t, "BRAID_RING").source, "BRAID_RING");
}

TEST(Settings, SecretsHidden) {
  const std::vector<Setting> t = from({{"BRAID_COMM_SECRET", "hunter2"},
                                       {"BRAID_UNIQUE_ID", "00ab"},
                                       {"BRAID_COMM_ID", "node0:29500"}});
  EXPECT_EQ(get(t, "BRAID_COMM_SECRET").value, kSecretText);
  EXPECT_EQ(get(t, "BRAID_COMM_SECRET").source, "BRAID_COMM_SECRET");
  EXPECT_EQ(get(t, "BRAID_UNIQUE_ID").value, kSecretText);
  EXPECT_EQ(get(t, "BRAID_COMM_ID").value, "node0:29500");
  // Unset: empty, as any unset string.
  EXPECT_EQ(get(from({}), "BRAID_COMM_SECRET").value, "");
}

// An empty launch variable counts as unset, as launch_env.cc reads it.
TEST(Settings, EmptyLaunchVariableIsUnset) {
  const std::vector<Setting> t = from({{"BRAID_RANK", ""}});
  EXPECT_EQ(get(t, "BRAID_RANK").source, "default");
}

TEST(Settings, FindByAnyName) {
  const std::vector<Setting> t = from({});
  const int i = findSetting(t, "BRAID_BUFFSIZE");
  ASSERT_GE(i, 0);
  EXPECT_EQ(findSetting(t, "NCCL_BUFFSIZE"), i);
  EXPECT_EQ(findSetting(t, "BUFFSIZE"), i);
  EXPECT_EQ(findSetting(t, "NCCL_NO_SUCH_SETTING"), -1);
  EXPECT_EQ(findSetting(t, ""), -1);
  EXPECT_EQ(findSetting(t, "buffsize"), -1);  // names are case-sensitive, as NCCL's keys
  // No NCCL name where Braid reads none.
  EXPECT_EQ(findSetting(t, "NCCL_TRANSPORT"), -1);
  EXPECT_GE(findSetting(t, "TRANSPORT"), 0);
}

}  // namespace
}  // namespace braid
