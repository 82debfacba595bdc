#include "tuning/fabric.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace braid::tuning {

namespace {
// The calibration keys and the figures they set.
double* fieldOf(Fabric* f, const std::string& key) {
  if (key == "intra_latency_us") return &f->intra.latency_us;
  if (key == "intra_bw_gbs") return &f->intra.bw_gbs;
  if (key == "inter_latency_us") return &f->inter.latency_us;
  if (key == "inter_bw_gbs") return &f->inter.bw_gbs;
  if (key == "reduce_gbs") return &f->reduce_gbs;
  if (key == "copy_gbs") return &f->copy_gbs;
  if (key == "step_overhead_us") return &f->step_overhead_us;
  if (key == "inter_step_overhead_us") return &f->inter_step_overhead_us;
  if (key == "intra_send_overhead_us") return &f->intra_send_overhead_us;
  if (key == "intra_cache_bw_gbs") return &f->intra_cache_bw_gbs;
  if (key == "host_bw_gbs") return &f->host_bw_gbs;
  return nullptr;
}
}  // namespace

braidResult_t parseCalibration(const std::string& text, const std::string& name, Fabric* f) {
  std::istringstream in(text);
  std::string line;
  int lineNo = 0;
  Fabric out = *f;
  while (std::getline(in, line)) {
    ++lineNo;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    const size_t eq = line.find('=');
    auto trim = [](std::string s) {
      const char* ws = " \t\r";
      s.erase(0, s.find_first_not_of(ws));
      s.erase(s.find_last_not_of(ws) + 1);
      return s;
    };
    if (trim(line).empty()) continue;
    if (eq == std::string::npos)
      return fail(braidInvalidArgument, "%s:%d: \"%s\" is not KEY = VALUE", name.c_str(), lineNo,
                  trim(line).c_str());
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(value.c_str(), &end);
    // Finite, >= 0 and below 1e12 (us, GB/s or bytes): larger is a typo, and would make
    // every prediction infinite.
    const bool ok =
        !value.empty() && *end == '\0' && errno == 0 && std::isfinite(v) && v >= 0 && v < 1e12;
    if (key == "cache_bytes") {
      if (!ok || v != std::floor(v) || v > 1e12)
        return fail(braidInvalidArgument, "%s:%d: cache_bytes = %s is not a byte count",
                    name.c_str(), lineNo, value.c_str());
      out.cache_bytes = static_cast<size_t>(v);
      continue;
    }
    if (key == "nics_per_host") {
      if (!ok || v < 1 || v > 1024 || v != std::floor(v))
        return fail(braidInvalidArgument, "%s:%d: nics_per_host = %s is not a count 1..1024",
                    name.c_str(), lineNo, value.c_str());
      out.nicsPerHost = static_cast<int>(v);
      continue;
    }
    double* field = fieldOf(&out, key);
    if (!field)
      return fail(braidInvalidArgument,
                  "%s:%d: unknown key \"%s\" (intra_latency_us, intra_bw_gbs, "
                  "intra_cache_bw_gbs, cache_bytes, host_bw_gbs, inter_latency_us, inter_bw_gbs, "
                  "inter_step_overhead_us, intra_send_overhead_us, nics_per_host, reduce_gbs, "
                  "copy_gbs, step_overhead_us)",
                  name.c_str(), lineNo, key.c_str());
    const bool needsPositive = key.find("_gbs") != std::string::npos &&
                               key != "intra_cache_bw_gbs" && key != "host_bw_gbs";
    if (!ok || (needsPositive && v <= 0))
      return fail(braidInvalidArgument, "%s:%d: %s = %s is not a %s number below 1e12",
                  name.c_str(), lineNo, key.c_str(), value.c_str(),
                  needsPositive ? "positive" : "non-negative");
    *field = v;
  }
  *f = out;
  return braidSuccess;
}

braidResult_t loadCalibration(const std::string& path, Fabric* f) {
  // A regular file of at most 1 MiB: a device or a fifo would never end.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return fail(braidSystemError, "%s: cannot read the calibration file: %s", path.c_str(),
                strerror(errno));
  if (!S_ISREG(st.st_mode) || st.st_size > (1 << 20))
    return fail(braidInvalidArgument,
                "%s: not a calibration file (braid-tune --calibrate writes a regular file of a "
                "few lines)",
                path.c_str());
  std::ifstream in(path);
  if (!in)
    return fail(braidSystemError, "%s: cannot read the calibration file: %s", path.c_str(),
                strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  return parseCalibration(buf.str(), path, f);
}

std::string formatCalibration(const Fabric& f) {
  // Every digit: rank 0 sends this text to the other ranks, which must read back exactly
  // what the file said.
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "intra_latency_us = %.17g\nintra_bw_gbs = %.17g\ninter_latency_us = %.17g\n"
                "inter_bw_gbs = %.17g\nnics_per_host = %d\nreduce_gbs = %.17g\n"
                "copy_gbs = %.17g\nstep_overhead_us = %.17g\nintra_cache_bw_gbs = %.17g\n"
                "cache_bytes = %zu\nhost_bw_gbs = %.17g\ninter_step_overhead_us = %.17g\n"
                "intra_send_overhead_us = %.17g\n",
                f.intra.latency_us, f.intra.bw_gbs, f.inter.latency_us, f.inter.bw_gbs,
                f.nicsPerHost, f.reduce_gbs, f.copy_gbs, f.step_overhead_us, f.intra_cache_bw_gbs,
                f.cache_bytes, f.host_bw_gbs, f.inter_step_overhead_us, f.intra_send_overhead_us);
  return buf;
}

}  // namespace braid::tuning
