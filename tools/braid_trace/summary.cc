// The time summary: per (collective, bytes, algorithm), how long the finished calls took and,
// where the dumps hold step records (BRAID_TRACE=steps), where that time went: waiting for a
// peer, copying, reducing, and the rest (the executor's own bookkeeping, "unaccounted"). Two
// algorithms run on one topology can so be compared phase by phase; a phase is a step kind.
#include <climits>
#include <cmath>
#include <tuple>

#include "trace.h"

namespace braid::trace {

namespace {

// Wait, copy and reduce time, summed over steps.
struct Phases {
  int64_t wait = 0, copy = 0, reduce = 0;
  void add(const Step& s) {
    wait += s.wait_ns;
    copy += s.copy_ns;
    reduce += s.reduce_ns;
  }
  int64_t accounted() const { return wait + copy + reduce; }
};

struct KindTotals {
  int steps = 0;
  int64_t time = 0;  // sum of t_end_ns - t_start_ns
  Phases phases;
};

struct Row {
  int calls = 0;
  int64_t total = 0, min = INT64_MAX;
  int withSteps = 0;
  int64_t stepCallsTotal = 0;  // the time of the calls with steps
  Phases phases;               // over the calls with steps
  std::map<std::string, KindTotals> kinds;
};

// total / n ns in microseconds to the nanosecond: the dumps' resolution, and exact in the JSON
// for whole ns.
double meanUs(int64_t totalNs, int n) {
  return std::round(static_cast<double>(totalNs) / n) / 1000.0;
}
double us(int64_t ns) { return meanUs(ns, 1); }
// part / whole in percent, to a tenth.
double percent(int64_t part, int64_t whole) {
  if (whole <= 0) return 0.0;
  return std::round(1000.0 * static_cast<double>(part) / static_cast<double>(whole)) / 10.0;
}

// One dump's steps, by the id of the call they belong to.
std::map<int64_t, std::vector<const Step*>> stepsByCall(const Dump& d) {
  std::map<int64_t, std::vector<const Step*>> out;
  for (const Step& s : d.steps) out[s.call].push_back(&s);
  return out;
}

void addCall(Row& row, const Call& c, const std::vector<const Step*>* steps) {
  const int64_t ns = c.t_end_ns - c.t_start_ns;
  ++row.calls;
  row.total += ns;
  row.min = std::min(row.min, ns);
  if (!steps) return;
  ++row.withSteps;
  row.stepCallsTotal += ns;
  for (const Step* s : *steps) {
    row.phases.add(*s);
    KindTotals& k = row.kinds[s->kind.empty() ? "(no kind)" : s->kind];
    ++k.steps;
    k.time += std::max<int64_t>(0, s->t_end_ns - s->t_start_ns);
    k.phases.add(*s);
  }
}

json phasesJson(const Phases& p, int calls, int64_t callTime) {
  const int64_t unaccounted = callTime - p.accounted();
  return {{"wait_us", meanUs(p.wait, calls)},
          {"copy_us", meanUs(p.copy, calls)},
          {"reduce_us", meanUs(p.reduce, calls)},
          {"unaccounted_us", meanUs(unaccounted, calls)},
          {"wait_pct", percent(p.wait, callTime)},
          {"copy_pct", percent(p.copy, callTime)},
          {"reduce_pct", percent(p.reduce, callTime)},
          {"unaccounted_pct", percent(unaccounted, callTime)}};
}

json rowJson(const std::tuple<std::string, int64_t, std::string>& key, const Row& r) {
  const auto& [collective, bytes, algo] = key;
  json j = {{"collective", collective},
            {"bytes", bytes},
            {"algo", algo},
            {"calls", r.calls},
            {"mean_us", meanUs(r.total, r.calls)},
            {"min_us", us(r.min)},
            {"calls_with_steps", r.withSteps}};
  if (!r.withSteps) return j;
  j.update(phasesJson(r.phases, r.withSteps, r.stepCallsTotal));
  json kinds = json::object();
  for (const auto& [kind, k] : r.kinds)
    kinds[kind] = {{"steps", k.steps},
                   {"time_us", us(k.time)},
                   {"wait_us", us(k.phases.wait)},
                   {"copy_us", us(k.phases.copy)},
                   {"reduce_us", us(k.phases.reduce)}};
  j["kinds"] = kinds;
  return j;
}

}  // namespace

json summarize(const Input& in) {
  std::map<std::tuple<std::string, int64_t, std::string>, Row> rows;
  for (const Dump& d : in.dumps) {
    const auto steps = stepsByCall(d);
    for (const Call& c : d.calls) {
      if (c.state != "done" || c.t_end_ns < c.t_start_ns) continue;
      const auto s = steps.find(c.id);
      addCall(rows[{c.call, c.bytes, c.algo}], c, s == steps.end() ? nullptr : &s->second);
    }
  }
  json out = json::array();
  for (const auto& [key, row] : rows) out.push_back(rowJson(key, row));
  return out;
}

}  // namespace braid::trace
