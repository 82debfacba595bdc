// Errors and logging: every failure records a message for braidGetLastError and, at
// BRAID_DEBUG=WARN or above, prints it. Messages say which rank, call, argument or
// peer is at fault and what to do.
#pragma once

#include <string>

#include "braid/braid.h"

namespace braid {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

// Records msg as the calling thread's last error and returns code.
braidResult_t fail(braidResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Records msg exactly (no rank prefix added): for passing on another thread's error.
braidResult_t failVerbatim(braidResult_t code, const std::string& msg);
const char* lastError();
void clearLastError();

bool logEnabled(LogLevel level);
void log(LogLevel level, const char* subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// Thread-local rank used to prefix log lines and errors; set while a rank runs a call.
void setLogRank(int rank);
int logRank();
// Sets the log rank for a scope and restores the previous one after it.
class LogRankScope {
 public:
  explicit LogRankScope(int rank) : saved_(logRank()) { setLogRank(rank); }
  ~LogRankScope() { setLogRank(saved_); }
  LogRankScope(const LogRankScope&) = delete;
  LogRankScope& operator=(const LogRankScope&) = delete;

 private:
  int saved_;
};

}  // namespace braid

#define BRAID_TRY(expr)                                        \
  do {                                                         \
    braidResult_t braid_try_res_ = (expr);                     \
    if (braid_try_res_ != braidSuccess) return braid_try_res_; \
  } while (0)

#define BRAID_INFO(subsys, ...)                                    \
  do {                                                             \
    if (::braid::logEnabled(::braid::LogLevel::kInfo))             \
      ::braid::log(::braid::LogLevel::kInfo, subsys, __VA_ARGS__); \
  } while (0)
#define BRAID_WARN(subsys, ...)                                    \
  do {                                                             \
    if (::braid::logEnabled(::braid::LogLevel::kWarn))             \
      ::braid::log(::braid::LogLevel::kWarn, subsys, __VA_ARGS__); \
  } while (0)
