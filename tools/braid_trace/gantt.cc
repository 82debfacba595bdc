// The Gantt chart of one call across ranks, through gnuplot (as braid-tune's plot): a row per
// rank of the communicator, a bar per step coloured by its kind, the step's wait drawn in a
// colour of its own at the step's start (the dump gives how long a step waited, not when), or
// one bar for the whole call where the dump has no step records. Time runs from the call's
// earliest start on any rank, in microseconds, on the wall clock (as the timeline).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "trace.h"

namespace braid::trace {

namespace {

// The bar categories, in the key's order, with their colours.
struct Category {
  const char* name;
  const char* colour;
};
constexpr Category kCategories[] = {{"wait", "#d62728"}, {"send", "#1f77b4"},
                                    {"recv", "#2ca02c"}, {"recv_reduce", "#9467bd"},
                                    {"copy", "#ff7f0e"}, {"other step", "#8c564b"},
                                    {"call", "#7f7f7f"}, {"call (unfinished)", "#bcbd22"}};
constexpr size_t kNumCategories = sizeof(kCategories) / sizeof(kCategories[0]);

size_t categoryOf(const std::string& kind) {
  for (size_t i = 1; i < 5; ++i)
    if (kind == kCategories[i].name) return i;
  return 5;
}

// Bars per category: "start_us end_us rank" lines.
using Bars = std::vector<std::ostringstream>;

void bar(Bars& bars, size_t category, int64_t start, int64_t end, int rank) {
  const auto us = [](int64_t ns) { return static_cast<double>(ns) / 1000.0; };
  bars[category] << std::fixed << std::setprecision(3) << us(start) << ' '
                 << us(std::max(start, end)) << ' ' << rank << '\n';
}

// gnuplot's single-quoted string: a quote is written twice.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

const CommView* findComm(const std::vector<CommView>& comms, const std::string& prefix) {
  const CommView* found = nullptr;
  for (const CommView& v : comms)
    if (v.hash.rfind(prefix, 0) == 0) {
      if (found) return nullptr;  // ambiguous
      found = &v;
    }
  return found;
}

// Each rank's bars for its call c (its steps, or the call as one), times from `zero` (wall ns).
void rankBars(Bars& bars, int rank, const Member& m, const Call& c, int64_t zero) {
  const Dump& d = *m.dump;
  const int64_t off = d.wallOffset() - zero;
  bool anyStep = false;
  for (const Step& s : d.steps) {
    if (s.call != c.id || s.comm != c.comm || !s.t_start_ns) continue;
    anyStep = true;
    const int64_t end = s.t_end_ns ? s.t_end_ns : d.header.time_ns;
    const int64_t waitEnd =
        s.t_start_ns + std::min(s.wait_ns, std::max<int64_t>(0, end - s.t_start_ns));
    if (s.wait_ns > 0) bar(bars, 0, s.t_start_ns + off, waitEnd + off, rank);
    bar(bars, categoryOf(s.kind), waitEnd + off, end + off, rank);
  }
  if (anyStep) return;
  const int64_t start = c.t_start_ns ? c.t_start_ns : c.t_enqueue_ns;
  const bool open = c.t_end_ns == 0;
  bar(bars, open ? 7 : 6, start + off, (open ? d.header.time_ns : c.t_end_ns) + off, rank);
}

bool onPath(const char* program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

// gnuplot run directly (no shell), so no path can inject a command.
bool runGnuplot(const std::string& script) {
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// What a rank's row says when it has no bar: its dump is missing, or it has no such call.
std::string rowNote(const CommView& v, int rank, int64_t seq) {
  const auto m = v.members.find(rank);
  if (m == v.members.end()) return " (no dump)";
  return m->second.at(seq) ? "" : " (no #" + std::to_string(seq) + ")";
}

std::string writeScript(const std::string& png, const std::string& dat, const CommView& v,
                        const Call& ref, const std::vector<size_t>& used) {
  std::ostringstream s;
  s << "set terminal pngcairo size 1000," << 120 + 28 * v.nranks << " noenhanced\n"
    << "set output " << quoted(png) << "\n"
    << "set title " << quoted("comm " + v.shortHash() + ": " + callAt(ref) + " across ranks")
    << "\n"
    << "set xlabel 'us from the call''s earliest start'\nset grid x\nset key outside right\n"
    << "set style fill solid 0.85 border rgb '#333333'\n"
    << "set yrange [" << v.nranks - 0.5 << ":-0.5]\nset ytics (";
  for (int r = 0; r < v.nranks; ++r)
    s << (r ? ", " : "") << quoted("rank " + std::to_string(r) + rowNote(v, r, ref.seq)) << ' '
      << r;
  s << ")\nplot ";
  for (size_t i = 0; i < used.size(); ++i)
    s << (i ? ", " : "") << quoted(dat) << " index " << i
      << " using (($1+$2)/2):3:(($2-$1)/2):(0.35) with boxxyerror lc rgb "
      << quoted(kCategories[used[i]].colour) << " title " << quoted(kCategories[used[i]].name);
  s << "\n";
  return s.str();
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) std::fprintf(stderr, "braid-trace: cannot write %s\n", path.c_str());
  return static_cast<bool>(f);
}

}  // namespace

int drawGantt(const std::string& png, const std::vector<CommView>& comms, const CallRef& ref) {
  const CommView* v = findComm(comms, ref.comm);
  if (!v) {
    std::fprintf(stderr,
                 "braid-trace: --call %s:%lld: no communicator (or more than one) "
                 "whose hash starts with '%s'\n",
                 ref.comm.c_str(), static_cast<long long>(ref.seq), ref.comm.c_str());
    return 1;
  }
  int64_t zero = INT64_MAX;
  const Call* any = nullptr;
  for (const auto& [rank, m] : v->members)
    if (const Call* c = m.at(ref.seq)) {
      const int64_t start = c->t_start_ns ? c->t_start_ns : c->t_enqueue_ns;
      if (start) zero = std::min(zero, start + m.dump->wallOffset());
      any = any ? any : c;
    }
  if (!any || zero == INT64_MAX) {
    std::fprintf(stderr, "braid-trace: comm %s has no call #%lld with a start time to draw\n",
                 v->shortHash().c_str(), static_cast<long long>(ref.seq));
    return 1;
  }
  Bars bars(kNumCategories);
  for (const auto& [rank, m] : v->members)
    if (const Call* c = m.at(ref.seq)) rankBars(bars, rank, m, *c, zero);
  const std::string base =
      png.size() > 4 && png.substr(png.size() - 4) == ".png" ? png.substr(0, png.size() - 4) : png;
  std::string data;
  std::vector<size_t> used;  // the categories with bars, one gnuplot index each
  for (size_t i = 0; i < kNumCategories; ++i)
    if (const std::string b = bars[i].str(); !b.empty()) {
      data += "# " + std::string(kCategories[i].name) + "\n" + b + "\n\n";
      used.push_back(i);
    }
  const std::string dat = base + ".dat", gp = base + ".gp";
  if (!writeFile(dat, data) || !writeFile(gp, writeScript(png, dat, *v, *any, used))) return 1;
  if (!onPath("gnuplot")) {
    std::fprintf(stderr,
                 "braid-trace: gnuplot is not installed (apt-get install gnuplot-nox); "
                 "the chart's data and script are %s and %s\n",
                 dat.c_str(), gp.c_str());
    return 3;
  }
  if (!runGnuplot(gp)) {
    std::fprintf(stderr, "braid-trace: gnuplot %s failed\n", gp.c_str());
    return 1;
  }
  return 0;
}

}  // namespace braid::trace
