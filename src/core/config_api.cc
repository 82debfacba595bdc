// braidConfigGet and braidConfigList (include/braid/braid_config.h): the settings registry of
// src/base/settings.h, as C structs whose strings live in this thread's storage.
#include <string>
#include <vector>

#include "base/error.h"
#include "base/settings.h"
#include "braid/braid_config.h"

namespace {

// A table and the C view of it, kept per thread and per function: each call's strings stay
// valid until that function's next call on the thread (NCCL 2.30's rule for its Param API).
struct SettingsView {
  std::vector<braid::Setting> table;
  std::vector<braidSetting_t> entries;

  void fill(std::vector<braid::Setting> settings) {
    table = std::move(settings);
    entries.clear();
    entries.reserve(table.size());
    for (const braid::Setting& s : table)
      entries.push_back({s.name.c_str(), braid::settingTypeName(s.type), s.ncclName.c_str(),
                         s.value.c_str(), s.defaultValue.c_str(), s.source.c_str(), s.description});
  }
};

}  // namespace

extern "C" {

braidResult_t braidConfigGet(const char* name, braidSetting_t* setting) {
  return braid::guardApi("braidConfigGet", [&]() -> braidResult_t {
    if (!name) return braid::fail(braidInvalidArgument, "braidConfigGet: name is NULL");
    if (!setting) return braid::fail(braidInvalidArgument, "braidConfigGet: setting is NULL");
    std::vector<braid::Setting> table = braid::settings();
    const int i = braid::findSetting(table, name);
    if (i < 0)
      return braid::fail(braidInvalidArgument,
                         "braidConfigGet: name \"%s\" is no Braid setting (braidConfigList lists "
                         "them: BRAID_X, NCCL's NCCL_X where Braid reads it, or X)",
                         name);
    thread_local SettingsView view;
    view.fill({std::move(table[i])});
    *setting = view.entries[0];
    return braidSuccess;
  });
}

braidResult_t braidConfigList(const braidSetting_t** settings, int* count) {
  return braid::guardApi("braidConfigList", [&]() -> braidResult_t {
    if (!settings) return braid::fail(braidInvalidArgument, "braidConfigList: settings is NULL");
    if (!count) return braid::fail(braidInvalidArgument, "braidConfigList: count is NULL");
    thread_local SettingsView view;
    view.fill(braid::settings());
    *settings = view.entries.data();
    *count = static_cast<int>(view.entries.size());
    return braidSuccess;
  });
}

void braidResetDebugInit(void) { braid::reloadDebugSettings(); }

}  // extern "C"
