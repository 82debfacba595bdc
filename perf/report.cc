// The table and the JSON document of the perf binaries; see report.h.
#include "report.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "verifiable.h"

extern char** environ;

namespace braid::perf {
namespace {

using nlohmann::json;

// A JSON string literal; bytes that are not UTF-8 (an odd environment) become U+FFFD rather
// than failing the dump.
std::string Str(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// A JSON number; NaN and infinities, which JSON has no literal for, become strings as
// nccl-tests writes NaN ("nan").
std::string Num(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return json(v).dump();
}

// nccl-tests writes its booleans as the strings "true" and "false".
std::string Bool(bool v) { return v ? "\"true\"" : "\"false\""; }

std::string Key(const char* name) { return Str(name) + ":"; }

// Local time as nccl-tests formats it ("%Y-%m-%d %H:%M:%S").
std::string LocalTime() {
  const time_t now = time(nullptr);
  struct tm parts {};
  localtime_r(&now, &parts);
  char text[32];
  strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &parts);
  return text;
}

// The width of one placement's columns: time, algbw, busbw, #wrong; with -I, the four
// per-iteration ones after them.
constexpr int kPlacementWidth = 32;
constexpr int kPerIterWidth = 36;

std::string Centered(const std::string& text, int width) {
  const int pad = std::max(0, width - static_cast<int>(text.size()));
  return std::string(pad / 2, ' ') + text + std::string(pad - pad / 2, ' ');
}

std::string PerIterJson(const std::vector<double>& seconds,
                        const std::vector<std::vector<double>>& processes) {
  const IterStats s = ComputeIterStats(seconds);
  std::string out = "{" + Key("min_us") + Num(s.min * 1e6) + "," + Key("max_us") +
                    Num(s.max * 1e6) + "," + Key("avg_us") + Num(s.avg * 1e6) + "," +
                    Key("p50_us") + Num(s.p50 * 1e6) + "," + Key("p95_us") + Num(s.p95 * 1e6) +
                    "," + Key("p99_us") + Num(s.p99 * 1e6) + "," + Key("stdev_us") +
                    Num(s.stdev * 1e6) + "," + Key("cv_pct") + Num(s.cv_pct) + "," +
                    Key("times_us") + "[";
  // Separators appended on their own: GCC 12 misreads "," + std::string&& (-Wrestrict).
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (i) out += ",";
    out += Num(seconds[i] * 1e6);
  }
  out += "]";
  if (processes.size() > 1) {
    out += ",";
    out += Key("per_process_max_times_us") + "[";
    for (size_t p = 0; p < processes.size(); ++p) {
      out += p ? ",[" : "[";
      for (size_t i = 0; i < processes[p].size(); ++i) {
        if (i) out += ",";
        out += Num(processes[p][i] * 1e6);
      }
      out += "]";
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace

IterStats ComputeIterStats(const std::vector<double>& seconds) {
  IterStats s;
  if (seconds.empty()) return s;
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  // Nearest rank: the smallest time with at least p% of the times at or below it.
  const auto percentile = [&](size_t p) { return sorted[std::min(n - 1, (n * p + 99) / 100 - 1)]; };
  s.min = sorted.front();
  s.max = sorted.back();
  s.p50 = sorted[n / 2];
  s.p95 = percentile(95);
  s.p99 = percentile(99);
  double sum = 0;
  for (const double t : sorted) sum += t;
  s.avg = sum / static_cast<double>(n);
  double squares = 0;
  for (const double t : sorted) squares += (t - s.avg) * (t - s.avg);
  s.stdev = std::sqrt(squares / static_cast<double>(n));
  s.cv_pct = s.avg > 0 ? s.stdev / s.avg * 100.0 : 0.0;
  return s;
}

int64_t ResidentBytes() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = -1;
  const int got = fscanf(f, "%lld %lld", &size, &resident);
  fclose(f);
  if (got != 2 || resident < 0) return -1;
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

int64_t PeakResidentBytes() {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long long kib = -1;
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (sscanf(line, "VmHWM: %lld kB", &kib) == 1) break;
  }
  fclose(f);
  return kib < 0 ? -1 : static_cast<int64_t>(kib) * 1024;
}

std::string MemoryString(double bytes) {
  const char* unit = "B";
  double v = bytes;
  for (const char* u : {"KB", "MB", "GB"}) {
    if (std::fabs(v) < 1024.0) break;
    v /= 1024.0;
    unit = u;
  }
  const int decimals = unit[0] == 'B' ? 0 : std::fabs(v) < 10 ? 2 : std::fabs(v) < 100 ? 1 : 0;
  char text[48];
  snprintf(text, sizeof(text), "%.*f %s", decimals, v, unit);
  return text;
}

std::unique_ptr<JsonDocument> JsonDocument::Create(const std::string& path, std::string* opened,
                                                   std::string* error) {
  std::string name = path;
  // "x": never over an existing file (an earlier run's results); the next free FILE.N instead.
  for (int n = 0;; ++n) {
    if (FILE* f = fopen(name.c_str(), "wx"); f != nullptr) {
      *opened = name;
      return std::unique_ptr<JsonDocument>(new JsonDocument(f));
    }
    if (errno != EEXIST || n == 100000) {
      *error = "cannot create '" + name + "': " + strerror(errno);
      return nullptr;
    }
    name = path + "." + std::to_string(n);
  }
}

JsonDocument::~JsonDocument() {
  if (stage_ == Stage::kNone) Begin({});
  if (stage_ != Stage::kFinished) Finish("");
  fclose(f_);
}

void JsonDocument::Begin(const std::vector<std::string>& args) {
  int version = 0;
  braidGetVersion(&version);
  std::string out = "{" + Key("version") + "2,\n" + Key("start_time") + Str(LocalTime()) + ",\n" +
                    Key("args") + "[";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out += ",";
    out += Str(args[i]);
  }
  out += "],\n";
  out += Key("env") + "[";
  bool first = true;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string var = *e;
    // The settings that shape the run (NCCL_*, BRAID_*), not the whole environment, which may
    // hold any credential. The unique id and BRAID_COMM_SECRET carry the job's secret, which
    // every connection proves: not for a file.
    if (var.rfind("NCCL_", 0) != 0 && var.rfind("BRAID_", 0) != 0) continue;
    for (const char* secret : {"BRAID_UNIQUE_ID=", "BRAID_COMM_SECRET="})
      if (var.rfind(secret, 0) == 0) var = std::string(secret) + "(withheld)";
    if (!first) out += ",";
    out += Str(var);
    first = false;
  }
  out += "],\n" + Key("nccl_version") + std::to_string(version);
  fputs(out.c_str(), f_);
  fflush(f_);
  stage_ = Stage::kBegun;
}

void JsonDocument::Config(const Options& o, const std::vector<DeviceRecord>& devices) {
  std::string out = ",\n" + Key("config") + "{" + Key("nthreads") + std::to_string(o.nthreads) +
                    "," + Key("ngpus") + "1," + Key("minimum_bytes") + std::to_string(o.min_bytes) +
                    "," + Key("maximum_bytes") + std::to_string(o.max_bytes) + ",";
  out += o.step_factor > 1 ? Key("step_factor") + std::to_string(o.step_factor)
                           : Key("step_bytes") + std::to_string(o.step_bytes);
  // graph: the CUDA graph launches made, none (-G is accepted but captures nothing).
  out += "," + Key("warmup_iters") + std::to_string(o.warmup_iters) + "," + Key("iterations") +
         std::to_string(o.iters) + "," + Key("aggregated_iterations") +
         std::to_string(o.agg_iters) + "," + Key("validation") + std::to_string(o.check) + "," +
         Key("graph") + "0," + Key("blocking_collectives") + Bool(o.blocking != 0) + "," +
         Key("per_iter_timing") + Bool(o.per_iter_timing) + "," + Key("parallel_init") +
         Bool(o.parallel_init != 0) + "," + Key("devices") + "[";
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceRecord& d = devices[i];
    out += std::string(i ? "," : "") + "\n{" + Key("rank") + std::to_string(d.rank) + "," +
           Key("group") + "0," + Key("pid") + std::to_string(d.pid) + "," + Key("hostname") +
           Str(d.hostname) + "," + Key("device") + std::to_string(d.device) + "," +
           Key("device_hex") + Str("cpu") + "," + Key("device_info") + Str("host") + "}";
  }
  out += "]}";
  fputs(out.c_str(), f_);
  fflush(f_);
}

void JsonDocument::BeginResults() {
  fputs((",\n" + Key("results") + "[").c_str(), f_);
  stage_ = Stage::kResults;
}

void JsonDocument::Row(const std::string& object) {
  if (stage_ != Stage::kResults) return;
  fprintf(f_, "%s\n%s", any_row_ ? "," : "", object.c_str());
  fflush(f_);
  any_row_ = true;
}

void JsonDocument::EndResults(int errors, double avg_busbw) {
  if (stage_ != Stage::kResults) return;
  const std::string out = "],\n" + Key("out_of_bounds") + "{" + Key("count") +
                          std::to_string(errors) + "," + Key("okay") + Bool(errors == 0) + "},\n" +
                          Key("average_bus_bandwidth") + "{" + Key("bandwidth") + Num(avg_busbw) +
                          "," + Key("okay") + Str("unchecked") + "}";
  fputs(out.c_str(), f_);
  fflush(f_);
  stage_ = Stage::kEnded;
}

void JsonDocument::Finish(const std::string& last_error) {
  if (stage_ == Stage::kFinished) return;
  if (stage_ == Stage::kResults) fputs("]", f_);  // a run stopped inside the sweep
  const std::string out = ",\n" + Key("errors") + "[" +
                          (last_error.empty() ? "" : Str(last_error)) + "],\n" + Key("end_time") +
                          Str(LocalTime()) + "}\n";
  fputs(out.c_str(), f_);
  fflush(f_);
  stage_ = Stage::kFinished;
}

void PrintRunHeader(const Collective& coll, const Options& o) {
  printf("# Collective test starting: %s\n", coll.name);
  printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
      "iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
      o.nthreads, 1, o.min_bytes, o.max_bytes, o.step_factor > 1 ? o.step_factor : o.step_bytes,
      o.step_factor > 1 ? "factor" : "bytes", o.warmup_iters, o.iters, o.agg_iters, o.check, 0,
      o.unalign);
  if (o.forces_algorithm()) printf("# Algorithm: %s (forced by -A)\n", o.algorithm.c_str());
  if (o.blocking == 1)
    printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o.blocking == 2)
    printf("# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  if (o.per_iter_timing) {
    printf(
        "# Per-Iteration Report: host clock around each iteration; i_* take the largest over "
        "ranks\n");
  }
  if (o.parallel_init)
    printf("# Parallel Init Enabled: each thread rank creates its own communicator\n");
  if (o.timeout_sec > 0) {
    printf("# Timeout: %d s bounds every wait of the communicators (braidConfig_t.timeoutSec)\n",
           o.timeout_sec);
  }
  if (o.local_register != 0) printf("# Buffers registered with braidCommRegister (-R)\n");
  if (!o.json_path.empty() &&
      (o.json_path.size() < 5 ||
       strcasecmp(o.json_path.c_str() + o.json_path.size() - 5, ".json") != 0)) {
    printf("# -J: JSON whatever the name (nccl-tests writes a file only for a .json name)\n");
  }
  for (const std::string& note : FlagNotes(o)) printf("%s\n", note.c_str());
  fflush(stdout);
}

std::string TimeString(double usec) {
  char text[32];
  if (usec >= 10000.0) {
    snprintf(text, sizeof(text), "%7.0f", usec);
  } else if (usec >= 100.0) {
    snprintf(text, sizeof(text), "%7.1f", usec);
  } else {
    snprintf(text, sizeof(text), "%7.2f", usec);
  }
  return text;
}

Report::Report(const Collective& coll, const Options& o, int nranks, JsonDocument* json)
    : coll_(coll), o_(o), nranks_(nranks), json_(json) {}

void Report::PrintDevices(const std::vector<DeviceRecord>& devices) const {
  for (const DeviceRecord& d : devices) {
    printf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [cpu] host\n", d.rank, 0, d.pid,
           d.hostname.c_str(), d.device);
  }
  fflush(stdout);
  if (json_ != nullptr) json_->Config(o_, devices);
}

void Report::PrintHeader() const {
  const char* time = o_.report_cputime ? "cputime" : "time";
  const bool iter = o_.per_iter_timing;
  const int width = kPlacementWidth + (iter ? kPerIterWidth : 0);
  std::string titles, names, units;
  for (const char* placement : {"out-of-place", "in-place"}) {
    titles += Centered(std::string(placement) + (iter ? " (+ per-iteration)" : ""), width);
    char text[128];
    snprintf(text, sizeof(text), "  %7s  %6s  %6s %6s", time, "algbw", "busbw", "#wrong");
    names += text;
    snprintf(text, sizeof(text), "  %7s  %6s  %6s  %5s", "(us)", "(GB/s)", "(GB/s)", "");
    units += text;
    if (iter) {
      snprintf(text, sizeof(text), "  %7s  %7s  %7s  %7s", "i_min", "i_max", "i_p99", "i_cv%");
      names += text;
      snprintf(text, sizeof(text), "  %7s  %7s  %7s  %7s", "(us)", "(us)", "(us)", "(%)");
      units += text;
    }
  }
  if (o_.report_timestamps) {
    names += "  " + Centered("timestamp", 19);
    units += "  " + Centered("%Y-%m-%d %H:%M:%S", 19);  // literal: printed through %s
  }
  printf("#\n");
  printf("# %10s  %12s  %8s  %6s  %6s%s\n", "", "", "", "", "", titles.c_str());
  printf("# %10s  %12s  %8s  %6s  %6s%s\n", "size", "count", "type", "redop", "root",
         names.c_str());
  printf("# %10s  %12s  %8s  %6s  %6s%s\n", "(B)", "(elements)", "", "", "", units.c_str());
  fflush(stdout);
  if (json_ != nullptr) json_->BeginResults();
}

void Report::BeginRow(size_t bytes, size_t count, braidDataType_t dtype, braidRedOp_t op,
                      int root) {
  const char* redop = coll_.uses_op ? OpName(op) : "none";
  const int root_column = coll_.uses_root ? root : -1;
  printf("%12zu  %12zu  %8s  %6s  %6i", bytes, count, TypeName(dtype), redop, root_column);
  fflush(stdout);
  char padded_root[16];  // nccl-tests writes the root as its column's text
  snprintf(padded_root, sizeof(padded_root), "%6i", root_column);
  row_ = "{" + Key("size") + std::to_string(bytes) + "," + Key("count") + std::to_string(count) +
         "," + Key("type") + Str(TypeName(dtype)) + "," + Key("redop") + Str(redop) + "," +
         Key("root") + Str(padded_root);
  results_ = 0;
}

void Report::AddResult(const Measurement& m) {
  const double usec = m.seconds * 1e6;
  if (m.wrong >= 0) {
    printf("  %7s  %6.2f  %6.2f  %5lld", TimeString(usec).c_str(), m.algbw, m.busbw,
           static_cast<long long>(m.wrong));
  } else {
    printf("  %7s  %6.2f  %6.2f  %5s", TimeString(usec).c_str(), m.algbw, m.busbw, "N/A");
  }
  const char* placement = results_ == 0 ? "out_of_place" : "in_place";
  row_ += "," + Key(placement) + "{" + Key(o_.report_cputime ? "cpu_time" : "time") + Num(usec) +
          "," + Key("alg_bw") + Num(m.algbw) + "," + Key("bus_bw") + Num(m.busbw) + "," +
          Key("nwrong") + (m.wrong >= 0 ? std::to_string(m.wrong) : std::string("null")) + "}";
  if (o_.per_iter_timing && !m.iter_seconds.empty()) {
    const IterStats s = ComputeIterStats(m.iter_seconds);
    printf("  %7s  %7s  %7s  %7.2f", TimeString(s.min * 1e6).c_str(),
           TimeString(s.max * 1e6).c_str(), TimeString(s.p99 * 1e6).c_str(), s.cv_pct);
    row_ += "," + Key((std::string(placement) + "_per_iter").c_str()) +
            PerIterJson(m.iter_seconds, m.process_iter_seconds);
  }
  fflush(stdout);
  ++results_;
}

void Report::AddNotApplicable() {
  printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  if (o_.per_iter_timing) printf("  %7s  %7s  %7s  %7s", "N/A", "N/A", "N/A", "N/A");
  fflush(stdout);
  row_ += ",";
  row_ += Key(results_ == 0 ? "out_of_place" : "in_place") + "null";
  ++results_;
}

void Report::EndRow() {
  if (o_.report_timestamps) printf("  %19s", LocalTime().c_str());
  printf("\n");
  fflush(stdout);
  if (json_ != nullptr) {
    row_ += "," + Key("actual_iterations") + std::to_string(o_.iters) + "," +
            Key("experiment_name") + Str("") + "}";
    json_->Row(row_);
  }
}

void Report::PrintFooter(int errors, double avg_busbw) const {
  printf("# Out of bounds values : %d %s\n", errors, errors != 0 ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g\n", avg_busbw);
  printf("#\n");
  printf("# Collective test concluded: %s\n", coll_.name);
  fflush(stdout);
  if (json_ != nullptr) json_->EndResults(errors, avg_busbw);
}

void Report::PrintMemory(const MemoryFigures& m) const {
  // nccl-tests' "GPU memory usage" line, over this host's resident memory: what creating the
  // communicators, allocating the buffers and running the sweep each added (the largest over
  // processes).
  printf("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total %s\n",
         "Host memory usage", MemoryString(static_cast<double>(m.init_rss)).c_str(),
         MemoryString(static_cast<double>(m.buffers_rss)).c_str(),
         MemoryString(static_cast<double>(m.collective_rss)).c_str(),
         MemoryString(static_cast<double>(m.init_rss + m.buffers_rss + m.collective_rss)).c_str());
  printf("# %-20s : %s (the largest over processes)\n", "Peak resident memory",
         MemoryString(static_cast<double>(m.peak_rss)).c_str());
  printf("# %-20s : %s per rank (send, receive and check buffers)%s%s\n", "Benchmark buffers",
         MemoryString(static_cast<double>(m.buffer_bytes)).c_str(),
         m.device_bytes > 0 ? ", of which device memory " : "",
         m.device_bytes > 0 ? MemoryString(static_cast<double>(m.device_bytes)).c_str() : "");
  printf("#\n");
  fflush(stdout);
}

}  // namespace braid::perf
