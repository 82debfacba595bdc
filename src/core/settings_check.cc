#include "core/settings_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/socket.h"
#include "core/comm.h"
#include "core/trace.h"
#include "topology/placement.h"
#include "transport/net.h"
#include "tuning/cost_model.h"

namespace braid {
namespace {

// The last error without the "rank N: " that fail() put before it (fail adds it again).
std::string lastWithoutRank() {
  std::string msg = lastError();
  if (msg.rfind("rank ", 0) == 0) {
    const size_t colon = msg.find(": ");
    if (colon != std::string::npos && msg.find_first_not_of("0123456789", 5) == colon)
      msg.erase(0, colon + 2);
  }
  return msg;
}

// The parser's error naming Braid's variable ("BRAID_ALGO=...") named as the user set it
// ("NCCL_ALGO=...").
braidResult_t renamed(const std::string& setting) {
  const std::string var = settingVar(setting);
  std::string msg = lastWithoutRank();
  const size_t at = msg.find(setting + "=");
  if (var == setting || at == std::string::npos) return braidInvalidArgument;
  msg.replace(at, setting.size(), var);
  return fail(braidInvalidArgument, "%s", msg.c_str());
}

}  // namespace

braidResult_t settingFailed(const std::string& setting, const std::string& value) {
  const std::string var = settingVar(setting);
  const std::string msg = lastWithoutRank();
  if (msg.find(var) != std::string::npos) return braidInvalidArgument;
  return fail(braidInvalidArgument, "%s=\"%s\": %s", var.c_str(), value.c_str(), msg.c_str());
}

braidResult_t checkSettings(int nranks, tuning::Fabric* calibrated, tuning::MeasuredTable* table) {
  const Config& cfg = config();
  // Numbers out of range: configFrom warned and kept the default, which would run the job with
  // another value than the one asked for (a malformed value stays a warning, as in NCCL).
  if (!configOutOfRange().empty()) {
    const RefusedSetting& r = configOutOfRange().front();
    return fail(braidInvalidArgument, "%s=\"%s\" %s", r.var.c_str(), r.value.c_str(),
                r.why.c_str());
  }
  // Every job with more than one rank listens on it (control plane, stall board, bootstrap
  // root), and one that spans hosts connects through it; a single rank would not, but the
  // same environment fails as soon as the job grows, so it is refused here too.
  BRAID_TRY(checkSocketIfname());
  // Refused on one host too: rank 0's transport applies to every rank, and a job of one host
  // uses it for every pair.
  if (cfg.transport == "ucx" && !ucxBuilt())
    return fail(braidInvalidArgument,
                "BRAID_TRANSPORT=\"ucx\": this Braid was built without UCX (install libucx-dev "
                "and configure with meson -Ducx=enabled, or set BRAID_TRANSPORT to tcp)");
  if (!envAlgoUnknown().empty())
    return fail(braidInvalidArgument,
                "%s=\"%s\": \"%s\" is neither NCCL's algorithm nor Braid's (NCCL's: Tree, Ring, "
                "CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT)",
                settingVar("BRAID_ALGO").c_str(), cfg.algo.c_str(), envAlgoUnknown().c_str());
  tuning::AlgoSpec spec;
  if (tuning::parseAlgoSpec(envAlgoText(), &spec) != braidSuccess) return renamed("BRAID_ALGO");
  if (!cfg.ring.empty()) {
    std::vector<int> ring;
    BRAID_TRY(topo::parseRingSpec(cfg.ring, nranks, &ring));  // names NCCL_RINGS if set
  }
  if (!cfg.tuneFile.empty() && tuning::loadCalibration(cfg.tuneFile, calibrated) != braidSuccess)
    return settingFailed("BRAID_TUNE_FILE", cfg.tuneFile);
  if (!cfg.tuneTable.empty() &&
      tuning::loadMeasuredTable(cfg.tuneTable, nranks, table) != braidSuccess)
    return settingFailed("BRAID_TUNE_TABLE", cfg.tuneTable);
  // Rank 0 writes it; any rank may be rank 0 on another layout.
  if (!cfg.topoDumpFile.empty()) {
    const size_t slash = cfg.topoDumpFile.rfind('/');
    const std::string dir = slash == std::string::npos ? "."
                            : slash == 0               ? "/"
                                                       : cfg.topoDumpFile.substr(0, slash);
    if (access(dir.c_str(), W_OK | X_OK) != 0)
      return fail(braidInvalidArgument, "%s=\"%s\": cannot write in %s: %s",
                  settingVar("BRAID_TOPO_DUMP_FILE").c_str(), cfg.topoDumpFile.c_str(), dir.c_str(),
                  strerror(errno));
  }
  // The flight recorder's: read where they are used (trace.cc), so their text is checked here.
  // A folder that cannot be made would lose the dumps of the very failure they are for.
  if (const char* dir = std::getenv("BRAID_TRACE_DIR"); dir && *dir) {
    std::string existing = dir;  // the nearest folder that exists: dumps make the rest
    struct stat st {};
    while (stat(existing.c_str(), &st) != 0) {  // "." and "/" exist: it ends
      while (existing.size() > 1 && existing.back() == '/') existing.pop_back();
      const size_t slash = existing.rfind('/');
      existing = slash == std::string::npos ? "." : slash == 0 ? "/" : existing.substr(0, slash);
    }
    if (!S_ISDIR(st.st_mode) || access(existing.c_str(), W_OK | X_OK) != 0)
      return fail(braidInvalidArgument, "BRAID_TRACE_DIR=\"%s\": cannot make folders in %s%s", dir,
                  existing.c_str(), S_ISDIR(st.st_mode) ? "" : " (not a folder)");
  }
  if (const char* v = std::getenv("BRAID_TRACE_BUFFER"); v && *v) {
    size_t n = 0;
    if (parseByteSize(v, &n) && (n < 1 || n > trace::Recorder::kMaxCapacity))
      return fail(braidInvalidArgument,
                  "BRAID_TRACE_BUFFER=\"%s\" is not a count of calls in "
                  "[1, 16M]",
                  v);
  }
  return braidSuccess;
}

}  // namespace braid
