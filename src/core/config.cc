#include "core/config.h"

#include <strings.h>

#include <cstdlib>
#include <cstring>

namespace braid {
namespace {

size_t parseBytes(const char* s, size_t fallback) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v <= 0) return fallback;
  switch (*end) {
    case 'k':
    case 'K':
      v *= 1024;
      break;
    case 'm':
    case 'M':
      v *= 1024 * 1024;
      break;
    case 'g':
    case 'G':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return static_cast<size_t>(v);
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
    else
      c.debugLevel = LogLevel::kWarn;
  }
  if (const char* v = getEnv("DEBUG_SUBSYS")) c.debugSubsys = v;
  if (const char* v = getEnv("TIMEOUT")) {
    double t = std::strtod(v, nullptr);
    if (t > 0) c.timeoutSec = t;
  }
  if (const char* v = getEnv("SOCKET_IFNAME")) c.socketIfname = v;
  if (const char* v = std::getenv("BRAID_HOST_ID")) c.hostId = v;
  if (const char* v = getEnv("ALGO")) c.algo = v;
  if (const char* v = getEnv("BUFFSIZE")) c.buffSize = parseBytes(v, c.buffSize);
  if (const char* v = getEnv("CHUNKSIZE")) c.chunkSize = parseBytes(v, c.chunkSize);
  if (c.chunkSize < 64) c.chunkSize = 64;
  if (c.buffSize < 2 * c.chunkSize) c.buffSize = 2 * c.chunkSize;
  return c;
}

}  // namespace

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

}  // namespace braid
