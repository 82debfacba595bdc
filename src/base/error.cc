#include "base/error.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "base/config.h"

namespace braid {
namespace {

thread_local std::string t_last_error;

std::string vformat(const char* fmt, va_list ap) {
  char buf[1024];
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  if (n < 0) return "(unprintable message)";
  return std::string(buf, static_cast<size_t>(n) < sizeof(buf) ? n : sizeof(buf) - 1);
}

std::string rankPrefix(int rank) { return "rank " + std::to_string(rank) + ": "; }

}  // namespace

// The static TLS block saves a __tls_get_addr call on each access (a sixth of a small
// all-reduce's instructions when it was one).
namespace detail {
BRAID_STATIC_TLS constinit thread_local int t_log_rank = -1;
}
using detail::t_log_rank;

braidResult_t fail(braidResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  if (t_log_rank >= 0) msg = rankPrefix(t_log_rank) + msg;
  t_last_error = msg;
  if (logEnabled(LogLevel::kWarn))
    log(LogLevel::kWarn, "INIT", "%s (%s)", t_last_error.c_str(), braidGetErrorString(code));
  return code;
}

braidResult_t failVerbatim(braidResult_t code, const std::string& msg) {
  t_last_error = msg;
  return code;
}

std::string secondsText(double seconds) {
  char buf[48];
  // The bounds are where the rounded figure would reach the next format's range.
  std::snprintf(buf, sizeof(buf),
                seconds < 0.095  ? "%.2g s"
                : seconds < 9.95 ? "%.1f s"
                                 : "%.0f s",
                seconds);
  return buf;
}

const char* withoutRankPrefix(const char* msg, int rank) {
  const std::string prefix = rankPrefix(rank);
  return std::strncmp(msg, prefix.c_str(), prefix.size()) == 0 ? msg + prefix.size() : msg;
}

const char* lastError() { return t_last_error.c_str(); }
void clearLastError() { t_last_error.clear(); }

namespace {
// braidResetDebugInit's values, over config()'s: the level (-1: config()'s) and the
// subsystems (null: config()'s).
std::atomic<int> g_debugLevel{-1};
std::mutex g_debugMu;
std::shared_ptr<const Config> g_debugSubsys;  // under g_debugMu
}  // namespace

void reloadDebugSettings() {
  const Config fresh = configFrom([](const char* name) { return std::getenv(name); });
  g_debugLevel.store(static_cast<int>(fresh.debugLevel));
  auto subsys = std::make_shared<Config>();
  subsys->debugSubsys = fresh.debugSubsys;
  std::lock_guard<std::mutex> lock(g_debugMu);
  g_debugSubsys = std::move(subsys);
}

bool logEnabled(LogLevel level) {
  const int reloaded = g_debugLevel.load(std::memory_order_relaxed);
  return static_cast<int>(level) <=
         (reloaded >= 0 ? reloaded : static_cast<int>(config().debugLevel));
}

void log(LogLevel level, const char* subsys, const char* fmt, ...) {
  std::shared_ptr<const Config> reloaded;
  {
    std::lock_guard<std::mutex> lock(g_debugMu);
    reloaded = g_debugSubsys;
  }
  if (!(reloaded ? *reloaded : config()).subsysEnabled(subsys)) return;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  static const char* names[] = {"", "WARN", "INFO", "TRACE"};
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  std::fprintf(stderr, "%s:%d:%d [%d] BRAID %s %s\n", host, getpid(), gettid(), t_log_rank,
               names[static_cast<int>(level)], msg.c_str());
}

}  // namespace braid
