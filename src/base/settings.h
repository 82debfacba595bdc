// The registry of every environment variable Braid reads: one table (settings.cc) that
// braidConfigGet/braidConfigList and NCCL's Param API (src/compat/nccl_param.cc) report from.
// Each setting has its name, type, effective value and default as text, and the variable its
// value came from.
#pragma once

#include <string>
#include <vector>

#include "base/config.h"

namespace braid {

// How a setting's text reads: kInt, a whole number; kSize, a byte count (reported in bytes);
// kDouble, a real number (seconds); kBool, 0 or 1; kString, any text; kEnum, one of a few words.
enum class SettingType { kInt, kSize, kDouble, kBool, kString, kEnum };
// "int", "size", "double", "bool", "string" or "enum".
const char* settingTypeName(SettingType type);

struct Setting {
  std::string name;  // the variable Braid reads first: "BRAID_BUFFSIZE"
  SettingType type;
  std::string ncclName;  // NCCL's variable of the same meaning read where name is unset ("")
  std::string value;     // effective value: "1048576" for BRAID_BUFFSIZE=1M
  std::string defaultValue;
  // The variable the value was taken from ("BRAID_BUFFSIZE", "NCCL_BUFFSIZE",
  // "NCCL_P2P_DISABLE" for BRAID_CUDA_IPC), or "default" where none was set or what was set
  // was refused.
  std::string source;
  const char* description;
};

// Text standing for a secret's value (BRAID_COMM_SECRET, BRAID_UNIQUE_ID) where it is set:
// the table is printed (ncclParamDumpAll) and the secret authenticates the job's connections.
inline constexpr const char* kSecretText = "(secret)";

// The settings an environment gives, one per variable Braid reads, in the table's order.
// Variables of Config come from configFrom(env); those read where they are used (the launch
// environment: BRAID_RANK, BRAID_COMM_ID, ...; BRAID_KERNEL_ISA) from env directly, an empty
// value counting as unset as where they are used.
std::vector<Setting> settingsFrom(const EnvLookup& env);
// This process's: Config's as config() read them (once), the others as the environment is now.
std::vector<Setting> settings();

// The index in table of the setting key names: its name ("BRAID_BUFFSIZE"), its NCCL name
// ("NCCL_BUFFSIZE"), or its name without "BRAID_" ("BUFFSIZE"); -1 when none.
int findSetting(const std::vector<Setting>& table, const std::string& key);

}  // namespace braid
