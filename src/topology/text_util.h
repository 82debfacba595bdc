// Helpers shared by the text-format loaders (text_formats.cc, text_smi.cc, text_ib.cc,
// text_pci.cc): line and word splitting, number parsing, notes, CPU masks, placeholders.
// Internal to src/topology.
#pragma once

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "base/error.h"
#include "topology/topology.h"

namespace braid::topo::text {

// Whether `line` is a shell prompt, with or without the command typed after it, as a terminal
// shows it: "$ ibstat", "user@host:~$ nvidia-smi topo -m", "[user@host dir]# lspci -tv",
// "(venv) user@host:~/x$ ", "PS C:\\> nvidia-smi topo -m". No tool output read here starts
// a line like that, so a pasted text is read by its content, prompts and all.
inline bool isPromptLine(const std::string& line) {
  size_t b = line.find_first_not_of(" \t");
  if (b == std::string::npos) return false;
  std::string l = line.substr(b);
  if (l[0] == '(') {  // a virtualenv or conda name before the prompt
    size_t close = l.find(") ");
    if (close == std::string::npos) return false;
    l = l.substr(close + 2);
  }
  if (l == "$" || l == "#" || l == "%" || l == ">") return true;
  if (l.size() >= 2 && (l[0] == '$' || l[0] == '#' || l[0] == '%' || l[0] == '>') && l[1] == ' ')
    return true;
  auto isSign = [](char c) { return c == '$' || c == '#' || c == '%' || c == '>'; };
  size_t end = std::string::npos;                               // just past the prompt
  if (l.rfind("PS ", 0) == 0 && l.size() > 5 && l[4] == ':') {  // PS C:\dir>
    size_t gt = l.find('>');
    if (gt != std::string::npos) end = gt + 1;
  } else if (l[0] == '[') {  // [user@host dir]$
    size_t close = l.find(']');
    if (close != std::string::npos && close + 1 < l.size() && l.find('@') < close &&
        isSign(l[close + 1]))
      end = close + 2;
  } else {  // user@host:~/dir$
    size_t sp = l.find_first_of(" \t");
    std::string token = l.substr(0, sp);
    size_t at = token.find('@');
    if (at != std::string::npos && at > 0 && token.size() > at + 1 && isSign(token.back()))
      end = token.size();
  }
  if (end == std::string::npos) return false;
  return end == l.size() || l[end] == ' ' || l[end] == '\t';
}

// Whether `line` is a command line pasted without its prompt: "nvidia-smi topo -m",
// "sudo ibstat", "/usr/sbin/lspci -tv" (a command of the tools read here, then options).
inline bool isToolCommandLine(const std::string& line) {
  std::istringstream in(line);
  std::string w;
  if (!(in >> w)) return false;
  if (w == "sudo" && !(in >> w)) return false;
  w = w.substr(w.rfind('/') == std::string::npos ? 0 : w.rfind('/') + 1);
  static const char* const kTools[] = {"nvidia-smi", "ibstat", "ibstatus",          "ibv_devinfo",
                                       "lspci",      "lstopo", "lstopo-no-graphics"};
  if (std::find_if(std::begin(kTools), std::end(kTools), [&](const char* t) { return w == t; }) ==
      std::end(kTools))
    return false;
  while (in >> w)
    if (w[0] != '-' && !std::all_of(w.begin(), w.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ',' || c == '.';
        }))
      return false;
  return true;
}

// Lines of a text as a terminal printed it and a user pasted it: CR LF or CR ends, a UTF-8 byte
// order mark, and shell prompt lines (isPromptLine) and the tool's command line without a prompt
// (isToolCommandLine) read as blank lines, so line numbers stay those of the text.
inline std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  size_t start = text.rfind("\xef\xbb\xbf", 0) == 0 ? 3 : 0;
  auto flush = [&]() {
    while (!cur.empty() && cur.back() == '\r') cur.pop_back();
    if (isPromptLine(cur) || isToolCommandLine(cur)) cur.clear();
    out.push_back(cur);
    cur.clear();
  };
  for (size_t i = start; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      flush();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] != '\n' && text[i + 1] != '\r') {
      flush();  // a lone CR ends a line too
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) flush();
  return out;
}

inline std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The most devices (matrix columns, lspci tree devices) a text reader takes: the NCCL graph
// reader allows device indexes up to 4095, but the model's paths are quadratic in the device
// count (a 2000-GPU topo -m took over 3 s, 1000 under 1 s), so text stops at 1024, far above
// any machine these tools print.
inline constexpr int kMaxTextDevices = 1024;
// The largest NUMA node id a text reader takes (Linux's NODES_SHIFT is at most 10).
inline constexpr int kMaxTextNumaId = 1023;

inline bool startsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Whole string as an integer in base; false on anything else.
inline bool toLong(const std::string& s, int base, long* out) {
  std::string t = trim(s);
  if (t.empty()) return false;
  const char* p = t.c_str();
  if (base == 16 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
  if (*p == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(p, &end, base);
  if (errno != 0 || end == p || *end != '\0') return false;
  *out = v;
  return true;
}

// Leading number of s ("200 Gb/sec (4X HDR)" -> 200); false when none.
inline bool leadingDouble(const std::string& s, double* out) {
  std::string t = trim(s);
  if (t.empty() || !(std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.')) return false;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str()) return false;
  *out = v;
  return true;
}

// What a reader of lspci, sysfs or a topology file takes as a PCIe link: a speed in
// [2.5, 1000] GT/s (gen1 is 2.5, gen6 64) and a whole width of 1..kMaxPcieWidth lanes.
// Anything else (NaN included) is an unknown link, never a number that overflows the
// bandwidth arithmetic or rates a link at 0 GB/s.
inline bool plausiblePcieSpeed(double gts) { return gts >= 2.5 && gts <= 1000; }
inline bool plausiblePcieWidth(double lanes) {
  return lanes >= 1 && lanes <= kMaxPcieWidth && lanes == static_cast<int>(lanes);
}

inline void noteOnce(System* sys, const std::string& line) {
  if (std::find(sys->notes.begin(), sys->notes.end(), line) == sys->notes.end())
    sys->notes.push_back(line);
}

// "0-51,104-155" -> NCCL's cpumask text (32-bit hex words, most significant first).
inline std::string cpuListToMask(const std::string& list) {
  std::vector<uint32_t> w;
  std::stringstream ss(list);
  std::string part;
  while (std::getline(ss, part, ',')) {
    long a = 0, b = 0;
    size_t dash = part.find('-');
    if (dash == std::string::npos) {
      if (!toLong(part, 10, &a)) return "";
      b = a;
    } else if (!toLong(part.substr(0, dash), 10, &a) || !toLong(part.substr(dash + 1), 10, &b)) {
      return "";
    }
    if (a < 0 || b < a || b >= 8192) return "";
    for (long c = a; c <= b; ++c) {
      size_t i = static_cast<size_t>(c / 32);
      if (w.size() <= i) w.resize(i + 1, 0);
      w[i] |= 1u << (c % 32);
    }
  }
  if (w.empty()) return "";
  std::string out;
  for (size_t i = w.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", w[i]);
    if (!out.empty()) out += ",";
    out += buf;
  }
  return out;
}

// SM (compute capability x10) from a product name, -1 when unknown.
inline int smFromModel(const std::string& m) {
  struct {
    const char* key;
    int sm;
  } const table[] = {{"GB200", 100}, {"B200", 100}, {"B100", 100}, {"GH200", 90}, {"H200", 90},
                     {"H100", 90},   {"H800", 90},  {"H20", 90},   {"L40", 89},   {"L4", 89},
                     {"A100", 80},   {"A800", 80},  {"A30", 80},   {"A10", 86},   {"A40", 86},
                     {"V100", 70},   {"P100", 60},  {"T4", 75}};
  for (const auto& e : table)
    if (m.find(e.key) != std::string::npos) return e.sm;
  return -1;
}

inline NodeRef ensureCpu(System* sys, std::map<std::string, int>* byKey, const std::string& key,
                         int numaid) {
  auto it = byKey->find(key);
  if (it != byKey->end()) return {NodeKind::kCpu, it->second};
  Cpu c;
  c.numaid = numaid;
  NodeRef r = addCpu(sys, c);
  (*byKey)[key] = r.index;
  return r;
}

inline std::string virtualBusId(int n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ffff:%02x:%02x.0", (n >> 5) & 0xff, n & 0x1f);
  return buf;
}

// A GPU known only by its index (nvidia-smi text names no bus ids): a placeholder in the
// same reserved domain, apart from the switches' (bus 0xf0 up), so NVLinks can name it in
// a dump that loads again.
inline std::string gpuPlaceholderBusId(int dev) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ffff:%02x:%02x.1", 0xf0 + ((dev >> 5) & 0x0f), dev & 0x1f);
  return buf;
}

// A NIC known only by its column (nvidia-smi text): a placeholder beside the GPUs' (function 2),
// so a dump places it in a <pci> of its own and loads again.
inline std::string nicPlaceholderBusId(int k) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ffff:%02x:%02x.2", 0xf0 + ((k >> 5) & 0x0f), k & 0x1f);
  return buf;
}

// The one NVSwitch nvidia-smi text implies (all GPU pairs NV#): a placeholder bus id, so
// the GPUs' NVLinks can name it in a dump.
inline constexpr char kNvSwitchPlaceholderBusId[] = "ffff:ef:00.0";

// For the sniffer (text_formats.cc): the kind of nvidia-smi matrix whose header is `line`
// ("nvidia-smi-topo", "nvidia-smi-p2p"), or nullptr (text_smi.cc); whether `line` starts
// an lspci record (text_pci.cc).
const char* sniffNvidiaSmi(const std::vector<std::string>& lines, const std::string& line);
bool isLspciLine(const std::string& line);
// Whether `line` (trimmed) starts an `lspci -t` tree: "-[0000:00]-+-00.0", "+-[0000:80]-".
bool isLspciTreeLine(const std::string& line);

}  // namespace braid::topo::text
