// braid-tune's results: the closing summary, the table as JSON (--json, which BRAID_TUNE_TABLE
// reads) and the plot of time against size (--png, through gnuplot).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tune.h"

namespace braid::perf::tune {

void printSummary(const Flags& f, const std::vector<Row>& rows) {
  for (const Tuned* t : f.colls) {
    int n = 0, good = 0;
    for (const Row& r : rows)
      if (r.collective == t->name && r.regret > 0) {
        ++n;
        good += r.regret <= 1.10;
      }
    if (n)
      std::printf("# %s: regret <= 1.10 at %d of %d sizes (%.0f%%)\n", t->name, good, n,
                  100.0 * good / n);
  }
  // How far the predictions are from the measurements, per algorithm: the median of
  // |predicted / measured - 1| over the sizes of at least 64 KiB.
  for (const Tuned* t : f.colls) {
    std::vector<std::string> algos;
    for (const Row& r : rows)
      if (r.collective == t->name)
        for (const Cell& c : r.cells)
          if (std::find(algos.begin(), algos.end(), c.algo) == algos.end()) algos.push_back(c.algo);
    std::string line;
    for (const std::string& a : algos) {
      std::vector<double> err;
      for (const Row& r : rows)
        if (r.collective == t->name && r.bytes >= (64u << 10))
          for (const Cell& c : r.cells)
            if (c.algo == a && c.measured_us > 0)
              err.push_back(std::fabs(c.predicted_us / c.measured_us - 1));
      if (err.empty()) continue;
      std::sort(err.begin(), err.end());
      const double med = err.size() % 2 ? err[err.size() / 2]
                                        : (err[err.size() / 2 - 1] + err[err.size() / 2]) / 2;
      char buf[96];
      std::snprintf(buf, sizeof(buf), " %s %.0f%%", a.c_str(), 100 * med);
      line += buf;
    }
    if (!line.empty())
      std::printf("# %s: median |predicted/measured - 1| at >= 64 KiB:%s\n", t->name, line.c_str());
  }
}

bool writeJson(const std::string& path, const std::vector<Row>& rows, int nranks) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "braid-tune: cannot write --json %s: %s\n", path.c_str(), strerror(errno));
    return false;
  }
  std::fprintf(f, "[");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f,
                 "%s\n  {\"collective\": \"%s\", \"bytes\": %zu, \"count\": %zu, \"ranks\": %d, "
                 "\"chosen\": \"%s\", \"best\": \"%s\", \"regret\": %.4f, \"algorithms\": {",
                 i ? "," : "", r.collective, r.bytes, r.count, nranks, r.chosen.c_str(),
                 r.best.c_str(), r.regret);
    bool first = true;
    for (const Cell& c : r.cells) {
      std::fprintf(f, "%s\"%s\": ", first ? "" : ", ", c.algo.c_str());
      if (c.measured_us < 0)
        std::fprintf(f, "{\"unsupported\": true}");
      else
        std::fprintf(f, "{\"measured_us\": %.3f, \"predicted_us\": %.3f}", c.measured_us,
                     c.predicted_us);
      first = false;
    }
    std::fprintf(f, "}}");
  }
  std::fprintf(f, "\n]\n");
  return std::fclose(f) == 0;
}

// One panel per collective: measured time (points) and predicted time (lines) per
// algorithm against size, log-log. gnuplot draws it; the data and script stay beside FILE.
bool writePlot(const std::string& png, const std::vector<Row>& rows) {
  const std::string base =
      png.size() > 4 && png.substr(png.size() - 4) == ".png" ? png.substr(0, png.size() - 4) : png;
  std::vector<std::string> colls;
  for (const Row& r : rows)
    if (std::find(colls.begin(), colls.end(), r.collective) == colls.end())
      colls.push_back(r.collective);
  const std::string gp = base + ".gp";
  FILE* s = std::fopen(gp.c_str(), "w");
  if (!s) {
    std::fprintf(stderr, "braid-tune: cannot write %s: %s\n", gp.c_str(), strerror(errno));
    return false;
  }
  const int cols = colls.size() > 1 ? 2 : 1;
  const int panelRows = static_cast<int>((colls.size() + cols - 1) / cols);
  std::fprintf(s,
               "set terminal pngcairo size %d,%d noenhanced\nset output '%s'\n"
               "set multiplot layout %d,%d\nset logscale xy\nset key left top font ',8'\n"
               "set xlabel 'bytes'\nset ylabel 'time (us)'\nset grid\n",
               700 * cols, 480 * panelRows, png.c_str(), panelRows, cols);
  for (const std::string& coll : colls) {
    const std::string dat = base + "-" + coll + ".dat";
    FILE* d = std::fopen(dat.c_str(), "w");
    if (!d) continue;
    std::vector<std::string> algos;
    for (const Row& r : rows)
      if (r.collective == coll)
        for (const Cell& c : r.cells)
          if (std::find(algos.begin(), algos.end(), c.algo) == algos.end()) algos.push_back(c.algo);
    // One block per algorithm: bytes measured predicted (NaN where it cannot run).
    for (const std::string& a : algos) {
      std::fprintf(d, "# %s\n", a.c_str());
      for (const Row& r : rows) {
        if (r.collective != coll) continue;
        for (const Cell& c : r.cells)
          if (c.algo == a && c.measured_us >= 0)
            std::fprintf(d, "%zu %.3f %.3f\n", r.bytes, c.measured_us, c.predicted_us);
      }
      std::fprintf(d, "\n\n");
    }
    std::fclose(d);
    std::fprintf(s, "set title '%s: points measured, lines predicted'\nplot ", coll.c_str());
    for (size_t i = 0; i < algos.size(); ++i)
      std::fprintf(s,
                   "%s'%s' index %zu using 1:2 with points pt 7 lc %zu title '%s', "
                   "'%s' index %zu using 1:3 with lines lc %zu notitle",
                   i ? ", " : "", dat.c_str(), i, i + 1, algos[i].c_str(), dat.c_str(), i, i + 1);
    std::fprintf(s, "\n");
  }
  std::fprintf(s, "unset multiplot\n");
  std::fclose(s);
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::fprintf(stderr,
                 "braid-tune: gnuplot not found (apt-get install gnuplot-nox); the plot's script "
                 "is %s\n",
                 gp.c_str());
    return true;  // the data and script are written; drawing is up to the user
  }
  // gnuplot run directly (no shell), so no path can inject a command.
  const pid_t pid = fork();
  if (pid == 0) {
    execlp("gnuplot", "gnuplot", gp.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = -1;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
    std::fprintf(stderr, "braid-tune: gnuplot %s failed (status %d)\n", gp.c_str(), status);
    return false;
  }
  std::printf("# plot: %s\n", png.c_str());
  return true;
}

}  // namespace braid::perf::tune
