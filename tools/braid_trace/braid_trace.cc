// braid-trace: reads a job's flight-recorder dumps (one file per rank, docs/trace.md) and says
// why it hung, which ranks called differently, and where the time of its calls went.
//   braid-trace DIR               the verdict, mismatches and summary; writes DIR/timeline.json
//   braid-trace --json DIR        the same as one JSON object
//   braid-trace --png FILE DIR    also a Gantt chart of one call across ranks (gnuplot)
// Exit status: 0 read (hang or not), 1 no dump could be read (or an output could not be
// written), 2 usage error, 3 --png without gnuplot.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trace.h"

namespace bt = braid::trace;
using bt::json;

namespace {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: braid-trace [options] DIR | FILE...\n"
      "Reads the flight-recorder dumps rank-N.json of a job (BRAID_TRACE_DIR/<job>) and says\n"
      "why it hung, which calls differ across ranks, and where the calls' time went.\n"
      "  --json           print one JSON object {verdict, mismatches, summary, problems}\n"
      "  --timeline FILE  write the Trace Event timeline (chrome://tracing, Perfetto) to FILE\n"
      "                   (default: DIR/timeline.json)\n"
      "  --no-timeline    do not write the timeline\n"
      "  --png FILE       draw one call across ranks as a Gantt chart (needs gnuplot)\n"
      "  --call HASH:SEQ  the call --png draws: a communicator's hash (or its first digits)\n"
      "                   and seq (default: the hung call, else the last one every rank\n"
      "                   finished)\n"
      "  -h, --help       this text\n"
      "Exit status: 0 read (hang or not), 1 no dump read, 2 usage, 3 --png without gnuplot.\n");
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  bool json = false, help = false, timeline = true;
  std::string timelineFile, png;
  std::optional<bt::CallRef> call;
  std::vector<std::string> paths;
};

bt::CallRef parseCallRef(const std::string& s) {
  const size_t colon = s.rfind(':');
  bt::CallRef ref;
  if (colon != std::string::npos && colon > 0 && colon <= 16) {
    ref.comm = s.substr(0, colon);
    const std::string seq = s.substr(colon + 1);
    const bool hex = ref.comm.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
    if (hex && !seq.empty() && seq.size() < 19 &&
        seq.find_first_not_of("0123456789") == std::string::npos) {
      ref.seq = std::stoll(seq);
      if (ref.seq > 0) return ref;
    }
  }
  throw UsageError("--call '" + s +
                   "': expected HASH:SEQ (a communicator's hash or its first hex digits, and a "
                   "sequence number from 1)");
}

Options parseOptions(int argc, char** argv) {
  Options o;
  bool optionsEnd = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (optionsEnd || a.empty() || a[0] != '-' || a == "-") {
      o.paths.push_back(a);
    } else if (a == "--") {
      optionsEnd = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--timeline") {
      o.timelineFile = value();
    } else if (a == "--no-timeline") {
      o.timeline = false;
    } else if (a == "--png") {
      o.png = value();
    } else if (a == "--call") {
      o.call = parseCallRef(value());
    } else if (a == "-h" || a == "--help") {
      o.help = true;
    } else {
      throw UsageError("unknown option '" + a + "'");
    }
  }
  if (!o.help && o.paths.empty()) throw UsageError("no dump folder (DIR) or files given");
  return o;
}

// DIR/timeline.json, or beside the first file named.
std::string defaultTimeline(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  const fs::path first = paths.front();
  return ((fs::is_directory(first) ? first : first.parent_path()) / "timeline.json").string();
}

bool writeTimeline(const std::string& path, const bt::Input& in) {
  std::ofstream f(path, std::ios::binary);
  if (f) bt::writeTimeline(in, f);
  if (!f) std::fprintf(stderr, "braid-trace: cannot write %s\n", path.c_str());
  return static_cast<bool>(f);
}

// The call --png draws by default: the hung one, else the last every rank of the first
// communicator finished.
std::optional<bt::CallRef> defaultCall(const json& verdict) {
  if (verdict.contains("seq") && verdict["seq"].is_number())
    return bt::CallRef{verdict["comm"], verdict["seq"]};
  if (verdict.contains("reached") && verdict["reached"] > 0)
    return bt::CallRef{verdict["comm"], verdict["reached"]};
  return std::nullopt;
}

void printIntro(const bt::Input& in) {
  std::vector<int> ranks;
  std::map<std::string, int> reasons;
  for (const bt::Dump& d : in.dumps) {
    ranks.push_back(d.header.rank);
    ++reasons[d.header.reason.empty() ? "?" : d.header.reason];
  }
  std::string why;
  for (const auto& [reason, n] : reasons)
    why += (why.empty() ? "" : ", ") + reason + " (" + std::to_string(n) + ")";
  std::printf("Read %zu dump%s (rank%s %s) of job %s; written for: %s\n", in.dumps.size(),
              in.dumps.size() == 1 ? "" : "s", ranks.size() == 1 ? "" : "s",
              bt::rankList(ranks).c_str(), in.dumps.front().header.job.c_str(), why.c_str());
}

// A communicator's verdict lines; where it is not fine, first how far its ranks got.
void printCommLines(const json& c, const char* indent) {
  if (c["status"] != "ok")
    std::printf("%severy rank with a dump finished #%lld; the furthest any rank posted is #%lld\n",
                indent, c["reached"].get<long long>(), c["frontier"].get<long long>());
  for (const json& line : c["lines"])
    std::printf("%s%s\n", indent, line.get<std::string>().c_str());
}

// The verdict's communicator first, then the others with their own headlines.
void printVerdict(const json& verdict) {
  std::printf("\nVerdict: %s\n", verdict["text"].get<std::string>().c_str());
  if (!verdict.contains("lines")) return;  // no call recorded at all
  printCommLines(verdict, "  ");
  for (const json& c : verdict["comms"])
    if (c["comm"] != verdict["comm"]) {
      std::printf("  %s\n", c["text"].get<std::string>().c_str());
      printCommLines(c, "    ");
    }
}

void printMismatches(const json& mismatches) {
  constexpr size_t kMaxLines = 20;
  std::printf("\nMismatches:%s\n", mismatches.empty() ? " none" : "");
  for (size_t i = 0; i < mismatches.size() && i < kMaxLines; ++i)
    std::printf("  %s\n", mismatches[i]["text"].get<std::string>().c_str());
  if (mismatches.size() > kMaxLines)
    std::printf("  ... and %zu more (--json lists them all)\n", mismatches.size() - kMaxLines);
}

void printPhases(const json& row) {
  std::string line;
  for (const std::string phase : {"wait", "copy", "reduce", "unaccounted"})
    line += (line.empty() ? "" : ", ") + phase + " " + row[phase + "_us"].dump() + " us (" +
            row[phase + "_pct"].dump() + "%)";
  std::printf("      per call with steps (%d): %s\n", row["calls_with_steps"].get<int>(),
              line.c_str());
  for (const auto& [kind, k] : row["kinds"].items())
    std::printf("      %-12s %5d steps, %s us in all (wait %s, copy %s, reduce %s)\n", kind.c_str(),
                k["steps"].get<int>(), k["time_us"].dump().c_str(), k["wait_us"].dump().c_str(),
                k["copy_us"].dump().c_str(), k["reduce_us"].dump().c_str());
}

void printSummary(const json& summary) {
  std::printf("\nSummary of the finished calls (each rank's part counted as one call):\n");
  if (summary.empty()) {
    std::printf("  no finished call\n");
    return;
  }
  std::printf("  %-16s %12s %-14s %6s %12s %12s\n", "collective", "bytes", "algo", "calls",
              "mean us", "min us");
  for (const json& row : summary) {
    std::printf("  %-16s %12lld %-14s %6d %12.3f %12.3f\n",
                row["collective"].get<std::string>().c_str(), row["bytes"].get<long long>(),
                row["algo"].get<std::string>().c_str(), row["calls"].get<int>(),
                row["mean_us"].get<double>(), row["min_us"].get<double>());
    if (row["calls_with_steps"] > 0) printPhases(row);
  }
}

json problemsJson(const std::vector<bt::Problem>& problems) {
  json out = json::array();
  for (const bt::Problem& p : problems) {
    const std::string where = p.file + (p.line ? " line " + std::to_string(p.line) : "");
    out.push_back(
        {{"file", p.file}, {"line", p.line}, {"what", p.what}, {"text", where + ": " + p.what}});
  }
  return out;
}

void printProblems(const json& problems) {
  if (problems.empty()) return;
  std::printf("\nProblems in the dumps (read as far as they go):\n");
  for (const json& p : problems) std::printf("  %s\n", p["text"].get<std::string>().c_str());
}

int run(const Options& o) {
  bt::Input in = bt::readInput(o.paths);
  if (in.dumps.empty()) {
    for (const json& p : problemsJson(in.problems))
      std::fprintf(stderr, "braid-trace: %s\n", p["text"].get<std::string>().c_str());
    std::fprintf(stderr, "braid-trace: no dump could be read from %s\n", o.paths.front().c_str());
    return 1;
  }
  std::vector<bt::Problem> viewProblems;
  const std::vector<bt::CommView> comms = bt::viewComms(in, viewProblems);
  in.problems.insert(in.problems.end(), viewProblems.begin(), viewProblems.end());
  std::stable_sort(in.problems.begin(), in.problems.end(),
                   [](const bt::Problem& a, const bt::Problem& b) {
                     return std::pair(a.file, a.line) < std::pair(b.file, b.line);
                   });
  const json verdict = bt::hangVerdict(comms, in), mismatches = bt::findMismatches(comms),
             summary = bt::summarize(in), problems = problemsJson(in.problems);
  // Text goes to stdout, except with --json, whose stdout is the one JSON object.
  FILE* notes = o.json ? stderr : stdout;
  if (o.json) {
    std::printf("%s\n", json({{"verdict", verdict},
                              {"mismatches", mismatches},
                              {"summary", summary},
                              {"problems", problems}})
                            .dump(1)
                            .c_str());
  } else {
    printIntro(in);
    printVerdict(verdict);
    printMismatches(mismatches);
    printSummary(summary);
    // BRAID_TRACE=calls' times are the coarse clock's: a short call reads 0 us.
    int64_t coarsest = 1;
    for (const braid::trace::Dump& d : in.dumps) coarsest = std::max(coarsest, d.header.clock_ns);
    if (coarsest > 1)
      std::printf(
          "  (times to %.0f ms: the calls were recorded with BRAID_TRACE=calls; record with "
          "BRAID_TRACE=steps, or a perf binary's -X, to profile)\n",
          coarsest / 1e6);
    printProblems(problems);
  }
  int status = 0;
  if (o.timeline) {
    const std::string path = o.timelineFile.empty() ? defaultTimeline(o.paths) : o.timelineFile;
    if (writeTimeline(path, in))
      std::fprintf(notes,
                   "\nTimeline: %s (open it in https://ui.perfetto.dev or chrome://tracing)\n",
                   path.c_str());
    else
      status = 1;
  }
  if (!o.png.empty()) {
    const std::optional<bt::CallRef> call = o.call ? o.call : defaultCall(verdict);
    if (!call) {
      std::fprintf(stderr, "braid-trace: no call to draw (no rank finished or is in one)\n");
      return 1;
    }
    const int drawn = bt::drawGantt(o.png, comms, *call);
    if (drawn == 0)
      std::fprintf(notes, "Chart of comm %s #%lld: %s\n", call->comm.substr(0, 8).c_str(),
                   static_cast<long long>(call->seq), o.png.c_str());
    status = drawn ? drawn : status;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parseOptions(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "braid-trace: %s\n", e.what());
    usage(stderr);
    return 2;
  }
  if (o.help) {
    usage(stdout);
    return 0;
  }
  try {
    return run(o);
  } catch (const std::runtime_error& e) {  // a path on the command line that cannot be read
    std::fprintf(stderr, "braid-trace: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // a bug of this tool: said, not a crash
    std::fprintf(stderr, "braid-trace: internal error: %s\n", e.what());
    return 1;
  }
}
