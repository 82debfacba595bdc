// Small helpers shared by the NCCL XML readers (nccl_xml.cc, nccl_graph.cc): number parsing
// that refuses trailing junk, printf into a std::string, reading a file whole, and tinyxml2's
// error in words.
#pragma once

#include <sys/stat.h>
#include <tinyxml2.h>

#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "base/error.h"

namespace braid::topo {

inline std::string vformat(const char* fmt, va_list ap) {
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  return buf;
}

// A whole integer (spaces around it allowed; "0x" accepted in base 16); false otherwise.
// Hexadecimal values are ids and masks: no sign (a "0x-b0c" would dump as a number no file
// could hold; found by fuzz_topo_xml).
inline bool parseLong(const char* s, int base, long* out) {
  if (s == nullptr) return false;
  while (*s == ' ') ++s;
  if (*s == '\0') return false;
  if (base == 16 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
  if (base == 16 && !std::isxdigit(static_cast<unsigned char>(*s))) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, base);
  if (errno != 0 || end == s) return false;
  while (*end == ' ') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

inline bool parseDouble(const char* s, double* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s) return false;
  while (*end == ' ') ++end;
  if (*end != '\0') return false;
  *out = v;
  return true;
}

// "NAME (detail)" from a document that failed to parse. ErrorStr() reads "Error=NAME ErrorID=N
// (0xN) Line number=L: detail"; the line is reported separately, so only the detail is kept.
inline std::string xmlErrorText(const tinyxml2::XMLDocument& doc) {
  std::string detail = doc.ErrorStr();
  size_t colon = detail.find(": ");
  detail = colon == std::string::npos ? "" : " (" + detail.substr(colon + 2) + ")";
  return std::string(doc.ErrorName()) + detail;
}

// Reads a topology file whole; "" on success, else why not. Only regular files, at most
// 64 MiB (a device such as /dev/zero would never end).
inline std::string readFile(const std::string& path, std::string* text) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_size > (64 << 20)) return "larger than 64 MiB: not a topology file";
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::strerror(errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  return in.bad() ? "read error" : "";
}

// True when text holds nothing but whitespace (tinyxml2 calls that XML_ERROR_EMPTY_DOCUMENT).
inline bool blankText(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

// The errors of a file reader: "NAME:LINE: problem", braidInvalidArgument. The NCCL topology
// and graph loaders derive from it.
class XmlFileErrors {
 protected:
  explicit XmlFileErrors(std::string name) : name_(std::move(name)) {}
  braidResult_t err(int line, const char* fmt, ...) __attribute__((format(printf, 3, 4))) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    return fail(braidInvalidArgument, "%s:%d: %s", name_.c_str(), line, msg.c_str());
  }
  braidResult_t unknown(tinyxml2::XMLElement* e, const char* where) {
    return err(e->GetLineNum(), "unknown element <%s> in %s", e->Name(), where);
  }
  std::string name_;
};

}  // namespace braid::topo
