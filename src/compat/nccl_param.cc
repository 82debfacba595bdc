// NCCL 2.30's Param API over Braid's settings (braidConfigGet, braidConfigList:
// include/braid/braid_config.h). NCCL's keys are its variables' names ("NCCL_BUFFSIZE"); Braid
// takes those where it reads them, its own ("BRAID_BUFFSIZE"), or either without its prefix
// ("BUFFSIZE"), and lists its own. As in NCCL: a handle stays valid for the process (one per
// setting), unknown keys and NULL arguments are ncclInvalidArgument, returned strings and tables
// stay valid until the same function's next call on the thread, ncclParamDumpAll prints to
// stdout. Unlike NCCL, whose settings each have one C type, a typed getter takes any setting
// whose value is a whole number in its type's range (Braid's settings are int, size, double,
// bool, string or enum), and ncclParamGetStr any setting's text.
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "braid/braid_config.h"
#include "compat/nccl.h"

struct ncclParamHandle {
  std::string name;  // the setting's Braid name, for braidConfigGet
};

namespace {

ncclResult_t toNccl(braidResult_t r) { return static_cast<ncclResult_t>(r); }

// ncclInvalidArgument, with "fn: arg is NULL" for ncclGetLastError.
ncclResult_t null(const char* fn, const char* arg) {
  braid::fail(braidInvalidArgument, "%s: %s is NULL", fn, arg);
  return ncclInvalidArgument;
}
ncclResult_t unknownKey(const char* fn, const char* key) {
  braid::fail(braidInvalidArgument,
              "%s: key \"%s\" names no setting (ncclParamGetAllParameterKeys lists them)", fn, key);
  return ncclInvalidArgument;
}

// The handle's setting now, or an error naming fn.
ncclResult_t lookup(const char* fn, const ncclParamHandle_t* h, braidSetting_t* s) {
  if (!h) return null(fn, "handle");
  if (braidResult_t r = braidConfigGet(h->name.c_str(), s)) {
    braid::fail(r, "%s: %s", fn, braidGetLastError(nullptr));
    return toNccl(r);
  }
  if (!s->name || !s->type || !s->value) {  // braidConfigGet's contract; checked, not assumed
    braid::fail(braidInternalError, "%s: braidConfigGet left a string NULL", fn);
    return ncclInternalError;
  }
  return ncclSuccess;
}

// The setting's value as a T: a whole number (decimal, as Braid reports them) in T's range.
template <typename T>
ncclResult_t getWhole(const char* fn, const char* typeName, ncclParamHandle_t* h, T* out) {
  if (!out) return null(fn, "out");
  braidSetting_t s{};
  if (ncclResult_t r = lookup(fn, h, &s)) return r;
  const char* v = s.value;
  char* end = nullptr;
  errno = 0;
  bool inRange = true;
  T value{};
  if (*v == '-') {
    const long long n = std::strtoll(v, &end, 10);
    inRange = errno == 0 && std::numeric_limits<T>::is_signed &&
              n >= static_cast<long long>(std::numeric_limits<T>::min()) &&
              n <= static_cast<long long>(std::numeric_limits<T>::max());
    value = static_cast<T>(n);
  } else {
    const unsigned long long n = std::strtoull(v, &end, 10);
    inRange = errno == 0 && n <= static_cast<unsigned long long>(std::numeric_limits<T>::max());
    value = static_cast<T>(n);
  }
  if (end == v || *end != '\0' || (*v != '-' && (*v < '0' || *v > '9')))
    return toNccl(braid::fail(braidInvalidArgument,
                              "%s: %s is \"%s\" (%s), not a whole number; "
                              "ncclParamGetStr reads its text",
                              fn, s.name, v, s.type));
  if (!inRange)
    return toNccl(braid::fail(braidInvalidArgument, "%s: %s is %s, outside %s's range [%s, %s]", fn,
                              s.name, v, typeName,
                              std::to_string(+std::numeric_limits<T>::min()).c_str(),
                              std::to_string(+std::numeric_limits<T>::max()).c_str()));
  *out = value;
  return ncclSuccess;
}

// ncclParamGet's bytes: a whole-number setting as the C type Braid keeps it (int: int32_t;
// size: uint64_t), through getWhole's checks (text that is no whole number in range, an unset
// launch variable's "", is refused); bool as uint8_t; a double as a double; text (string, enum)
// with its NUL.
ncclResult_t rawBytes(ncclParamHandle_t* h, const braidSetting_t& s, std::string* bytes) {
  const std::string type = s.type;
  auto bytesOf = [&](const auto& x) {
    *bytes = std::string(reinterpret_cast<const char*>(&x), sizeof x);
    return ncclSuccess;
  };
  if (type == "int" || type == "size") {
    int32_t i = 0;
    uint64_t u = 0;
    if (ncclResult_t r = type == "int" ? getWhole("ncclParamGet", "int32_t", h, &i)
                                       : getWhole("ncclParamGet", "uint64_t", h, &u))
      return r;
    return type == "int" ? bytesOf(i) : bytesOf(u);
  }
  if (type == "bool") {
    if (std::strcmp(s.value, "0") != 0 && std::strcmp(s.value, "1") != 0)
      return toNccl(braid::fail(braidInvalidArgument, "ncclParamGet: %s is \"%s\", not 0 or 1",
                                s.name, s.value));
    return bytesOf(static_cast<uint8_t>(s.value[0] == '1'));
  }
  if (type == "double") return bytesOf(std::strtod(s.value, nullptr));
  *bytes = std::string(s.value, std::strlen(s.value) + 1);
  return ncclSuccess;
}

}  // namespace

extern "C" {

#define NCCL_EXPORT __attribute__((visibility("default"), weak))

// One handle per setting, kept for the process, so binding a key twice gives the same handle.
NCCL_EXPORT ncclResult_t ncclParamBind(ncclParamHandle_t** out, const char* key) {
  if (!out) return null("ncclParamBind", "out");
  if (!key) return null("ncclParamBind", "key");
  braidSetting_t s{};
  if (braidConfigGet(key, &s) != braidSuccess) return unknownKey("ncclParamBind", key);
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ncclParamHandle>> handles;
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<ncclParamHandle>& h = handles[s.name];
  if (!h) h.reset(new ncclParamHandle{s.name});
  *out = h.get();
  return ncclSuccess;
}

#define NCCL_PARAM_GET(Suffix, T)                                               \
  NCCL_EXPORT ncclResult_t ncclParamGet##Suffix(ncclParamHandle_t* h, T* out) { \
    return getWhole("ncclParamGet" #Suffix, #T, h, out);                        \
  }
NCCL_PARAM_GET(I8, int8_t)
NCCL_PARAM_GET(I16, int16_t)
NCCL_PARAM_GET(I32, int32_t)
NCCL_PARAM_GET(I64, int64_t)
NCCL_PARAM_GET(U8, uint8_t)
NCCL_PARAM_GET(U16, uint16_t)
NCCL_PARAM_GET(U32, uint32_t)
NCCL_PARAM_GET(U64, uint64_t)
#undef NCCL_PARAM_GET

NCCL_EXPORT ncclResult_t ncclParamGetStr(ncclParamHandle_t* h, const char** out) {
  if (!out) return null("ncclParamGetStr", "out");
  braidSetting_t s{};
  if (ncclResult_t r = lookup("ncclParamGetStr", h, &s)) return r;
  thread_local std::string text;
  text = s.value;
  *out = text.c_str();
  return ncclSuccess;
}

// *len: the bytes written; 0 on any error (as NCCL), the message saying how many are needed.
NCCL_EXPORT ncclResult_t ncclParamGet(ncclParamHandle_t* h, void* out, int maxLen, int* len) {
  if (!len) return null("ncclParamGet", "len");
  *len = 0;
  if (!out) return null("ncclParamGet", "out");
  braidSetting_t s{};
  if (ncclResult_t r = lookup("ncclParamGet", h, &s)) return r;
  std::string bytes;
  if (ncclResult_t r = rawBytes(h, s, &bytes)) return r;
  // rawBytes's own lookups end the life of s's strings (braidConfigGet's rule): read it again.
  if (ncclResult_t r = lookup("ncclParamGet", h, &s)) return r;
  if (maxLen < 0 || static_cast<size_t>(maxLen) < bytes.size())
    return toNccl(braid::fail(braidInvalidArgument,
                              "ncclParamGet: %s (%s) needs %zu bytes; maxLen is %d", s.name, s.type,
                              bytes.size(), maxLen));
  std::memcpy(out, bytes.data(), bytes.size());
  *len = static_cast<int>(bytes.size());
  return ncclSuccess;
}

// *valueLen: the text's length without its NUL. Unknown key: *value NULL, *valueLen 0 (NCCL's).
NCCL_EXPORT ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  if (value) *value = nullptr;  // as documented: NULL and 0 unless a value is found
  if (valueLen) *valueLen = 0;
  if (!key) return null("ncclParamGetParameter", "key");
  if (!value) return null("ncclParamGetParameter", "value");
  if (!valueLen) return null("ncclParamGetParameter", "valueLen");
  braidSetting_t s{};
  if (braidConfigGet(key, &s) != braidSuccess) {
    *value = nullptr;
    *valueLen = 0;
    return unknownKey("ncclParamGetParameter", key);
  }
  thread_local std::string text;
  text = s.value;
  *value = text.c_str();
  *valueLen = static_cast<int>(text.size());
  return ncclSuccess;
}

// Braid's names (BRAID_X), every setting: Braid has no private ones to leave out.
NCCL_EXPORT ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (!table) return null("ncclParamGetAllParameterKeys", "table");
  if (!tableLen) return null("ncclParamGetAllParameterKeys", "tableLen");
  const braidSetting_t* settings = nullptr;
  int count = 0;
  if (braidResult_t r = braidConfigList(&settings, &count)) return toNccl(r);
  // The keys are fixed for the process: one table, valid for its whole life (on any thread).
  static const std::vector<std::string> names = [&] {
    std::vector<std::string> n;
    for (int i = 0; i < count; ++i) n.emplace_back(settings[i].name);
    return n;
  }();
  static std::vector<const char*> pointers = [] {
    std::vector<const char*> p;
    for (const std::string& n : names) p.push_back(n.c_str());
    return p;
  }();
  count = static_cast<int>(pointers.size());
  *table = pointers.data();
  *tableLen = count;
  return ncclSuccess;
}

// To stdout, as NCCL: a heading, then "NAME=value (source)" a line.
NCCL_EXPORT void ncclParamDumpAll(void) {
  const braidSetting_t* settings = nullptr;
  int count = 0;
  if (braidConfigList(&settings, &count) != braidSuccess) {
    std::fprintf(stderr, "BRAID WARN ncclParamDumpAll: %s\n", braidGetLastError(nullptr));
    return;
  }
  std::printf("=== Braid settings (ncclParamDumpAll) ===\n");
  for (int i = 0; i < count; ++i)
    std::printf("%s=%s (%s)\n", settings[i].name, settings[i].value, settings[i].source);
  std::fflush(stdout);
}

// The profiling twins: strong aliases, as nccl.cc's.
#define NCCL_PROFILING_TWIN(ret, name, params) \
  __attribute__((visibility("default"), alias(#name))) ret p##name params;
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamBind, (ncclParamHandle_t**, const char*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t*, int8_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t*, int16_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t*, int32_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t*, int64_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t*, uint8_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t*, uint16_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t*, uint32_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t*, uint64_t*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t*, const char**))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGet, (ncclParamHandle_t*, void*, int, int*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetParameter, (const char*, const char**, int*))
NCCL_PROFILING_TWIN(ncclResult_t, ncclParamGetAllParameterKeys, (const char***, int*))
NCCL_PROFILING_TWIN(void, ncclParamDumpAll, (void))

}  // extern "C"
