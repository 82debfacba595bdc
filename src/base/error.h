// Errors and logging: every failure records a message for braidGetLastError and, at
// BRAID_DEBUG=WARN or above, prints it. Messages say which rank, call, argument or
// peer is at fault and what to do.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <system_error>

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
// Reads the logging settings (BRAID_DEBUG, BRAID_DEBUG_SUBSYS) from the environment again
// (braidResetDebugInit); they then win over config()'s.
void reloadDebugSettings();
void log(LogLevel level, const char* subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

// A duration for messages: "0.004 s", "0.3 s", "2.5 s", "12 s" (two significant digits
// below 0.1 s, tenths below 10 s), never "0 s" for a wait of a fraction of a second.
std::string secondsText(double seconds);

// Thread-local rank used to prefix log lines and errors; set while a rank runs a call and
// while its arguments are checked. Inline: every call sets it, on the small-call path.
// BRAID_STATIC_TLS (initial-exec): libbraid is loaded with the program (or dlopen-ed early, as
// libnccl.so.2), so its few words of thread-local state take the static TLS block, one load
// each; constinit: no TLS wrapper call.
// Not in a CUDA build: cudart_static's thread-local block is page aligned, and glibc cannot
// place a dlopen-ed library with static TLS aligned beyond its static block's (64 bytes), so
// with initial-exec every dlopen of libbraid (Python importing braid_torch, ctypes) fails with
// "cannot allocate memory in static TLS block"; there these take the default model.
#ifdef BRAID_HAVE_CUDA
#define BRAID_STATIC_TLS
#else
#define BRAID_STATIC_TLS [[gnu::tls_model("initial-exec")]]
#endif
namespace detail {
BRAID_STATIC_TLS extern constinit thread_local int t_log_rank;
}
inline void setLogRank(int rank) { detail::t_log_rank = rank; }
inline int logRank() { return detail::t_log_rank; }
// msg without the "rank N: " prefix that fail() gives messages while rank N's log rank is set.
const char* withoutRankPrefix(const char* msg, int rank);
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

// Runs a C entry point's body: an exception escaping it (std::bad_alloc from a huge count,
// std::system_error from a thread that cannot start, anything else) becomes an error code
// with a message naming fn, never a crash through a C caller. The non-throwing path costs
// nothing (zero-cost exception tables).
template <typename Body>
braidResult_t guardApi(const char* fn, Body&& body) noexcept {
  // The message needs memory too: without it, the code alone.
  auto report = [](braidResult_t code, auto&& message) noexcept -> braidResult_t {
    try {
      return message();
    } catch (...) {
      return code;
    }
  };
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return report(braidSystemError, [&] {
      return fail(braidSystemError,
                  "%s: out of memory (std::bad_alloc); a smaller count, or "
                  "fewer ranks per host, may fit",
                  fn);
    });
  } catch (const std::system_error& e) {
    return report(braidSystemError,
                  [&] { return fail(braidSystemError, "%s: system error: %s", fn, e.what()); });
  } catch (const std::exception& e) {
    return report(braidInternalError, [&] {
      return fail(braidInternalError, "%s: unexpected exception: %s", fn, e.what());
    });
  } catch (...) {
    return report(braidInternalError, [&] {
      return fail(braidInternalError, "%s: unexpected exception of unknown type", fn);
    });
  }
}

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
