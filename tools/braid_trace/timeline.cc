// The timeline: every call and step of every rank in the Trace Event Format
// (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU), which
// chrome://tracing and Perfetto open. A rank is a process, a communicator's calls a thread, and
// its steps a thread per peer. Each rank's CLOCK_MONOTONIC times are put on the wall clock with
// the two clocks its header read together at the dump, so the ranks line up as far as their
// wall clocks agree.
#include <algorithm>
#include <climits>
#include <ostream>
#include <set>

#include "trace.h"

namespace braid::trace {

namespace {

// A span on one rank's monotonic clock; an unfinished one ends at the dump.
struct Span {
  int64_t start = 0, end = 0;
  bool unfinished = false;
};

Span callSpan(const Call& c, const Dump& d) {
  const int64_t start = c.t_start_ns ? c.t_start_ns : c.t_enqueue_ns;
  return {start, c.t_end_ns ? c.t_end_ns : d.header.time_ns, c.t_end_ns == 0};
}

Span stepSpan(const Step& s, const Dump& d) {
  return {s.t_start_ns, s.t_end_ns ? s.t_end_ns : d.header.time_ns, s.t_end_ns == 0};
}

// The earliest wall-clock start of any event: the timeline's zero.
int64_t earliestWallNs(const Input& in) {
  int64_t first = INT64_MAX;
  for (const Dump& d : in.dumps) {
    for (const Call& c : d.calls)
      if (const Span s = callSpan(c, d); s.start) first = std::min(first, s.start + d.wallOffset());
    for (const Step& st : d.steps)
      if (st.t_start_ns) first = std::min(first, st.t_start_ns + d.wallOffset());
  }
  return first == INT64_MAX ? 0 : first;
}

json metadata(const char* name, int pid, int tid, json args) {
  return {{"name", name}, {"ph", "M"}, {"ts", 0}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

// The traceEvents list, written as the events come (one a line) rather than built whole: a
// 16k-rank job's timeline holds millions of events.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) { out_ << "{\"traceEvents\":[\n"; }
  void push_back(const json& event) {
    out_ << (first_ ? "" : ",\n") << event.dump();
    first_ = false;
  }
  void finish(const json& otherData) {
    out_ << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":" << otherData.dump() << "}\n";
  }

 private:
  std::ostream& out_;
  bool first_ = true;
};

// One rank's events: its process, its threads (created as first used) and its spans.
class RankEvents {
 public:
  RankEvents(const Dump& d, int pid, int64_t zeroWallNs, EventWriter& events)
      : d_(d), pid_(pid), zero_(zeroWallNs), events_(events) {
    const std::string host = d.header.host.empty() ? "" : " (" + d.header.host + ")";
    events_.push_back(metadata("process_name", pid, 0,
                               {{"name", "rank " + std::to_string(d.header.rank) + host}}));
    events_.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
  }

  void calls() {
    for (const Call& c : d_.calls) {
      const Span s = callSpan(c, d_);
      if (!s.start) continue;  // neither enqueued nor started at a known time
      json args = callJson(c);
      if (s.unfinished) args["state"] = c.state + " (not finished at the dump)";
      complete(c.call + " #" + std::to_string(c.seq), "call",
               thread("comm " + c.comm.substr(0, 8) + " calls"), s, std::move(args));
    }
  }

  void steps() {
    for (const Step& st : d_.steps) {
      if (!st.t_start_ns) continue;
      const std::string lane = st.peer < 0 ? "copy" : "peer " + std::to_string(st.peer);
      complete(st.kind + " " + std::to_string(st.bytes) + "B", "step",
               thread("comm " + st.comm.substr(0, 8) + " " + lane), stepSpan(st, d_),
               {{"wait_ns", st.wait_ns},
                {"copy_ns", st.copy_ns},
                {"reduce_ns", st.reduce_ns},
                {"seq", st.seq},
                {"step", st.step},
                {"peer", st.peer}});
    }
  }

 private:
  int thread(const std::string& name) {
    const auto [it, added] = tids_.emplace(name, static_cast<int>(tids_.size()) + 1);
    if (added) {
      events_.push_back(metadata("thread_name", pid_, it->second, {{"name", name}}));
      events_.push_back(
          metadata("thread_sort_index", pid_, it->second, {{"sort_index", it->second}}));
    }
    return it->second;
  }

  void complete(const std::string& name, const char* cat, int tid, const Span& s, json args) {
    const double ts = static_cast<double>(s.start + d_.wallOffset() - zero_) / 1000.0;
    const double dur = static_cast<double>(std::max<int64_t>(0, s.end - s.start)) / 1000.0;
    events_.push_back({{"name", name},
                       {"cat", cat},
                       {"ph", "X"},
                       {"ts", ts},
                       {"dur", dur},
                       {"pid", pid_},
                       {"tid", tid},
                       {"args", std::move(args)}});
  }

  const Dump& d_;
  int pid_;
  int64_t zero_;
  EventWriter& events_;
  std::map<std::string, int> tids_;
};

}  // namespace

void writeTimeline(const Input& in, std::ostream& out) {
  const int64_t zero = earliestWallNs(in);
  EventWriter events(out);
  json files = json::array();
  std::set<int> pids;
  for (size_t i = 0; i < in.dumps.size(); ++i) {
    const Dump& d = in.dumps[i];
    // pid is the rank; a second dump for one rank (a second recorder) gets one of its own.
    int pid = d.header.rank;
    if (pid < 0 || !pids.insert(pid).second) pids.insert(pid = 1000000 + static_cast<int>(i));
    RankEvents rank(d, pid, zero, events);
    rank.calls();
    rank.steps();
    files.push_back(d.file);
  }
  events.finish({{"tool", "braid-trace"},
                 {"job", in.dumps.empty() ? "" : in.dumps.front().header.job},
                 {"dumps", files},
                 {"zero_wall_ns", zero}});
}

}  // namespace braid::trace
