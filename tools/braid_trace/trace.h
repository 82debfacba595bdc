// braid-trace's parts, one file each: reading the flight-recorder dumps (read.cc, the format of
// ../ci/trace_spec.md and docs/trace.md, read line by line so that a cut file still gives what
// it holds), the job seen per communicator (job.cc), the hang verdict (verdict.cc), the
// cross-rank argument check (mismatch.cc), the time summary (summary.cc), the Trace Event
// timeline (timeline.cc), the Gantt chart of one call (gantt.cc) and the command line
// (braid_trace.cc). The tool reads files only: it does not link the library.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace braid::trace {

using nlohmann::json;

// The dump's "header": who wrote it, why, and the two clocks at the moment of the dump.
struct Header {
  std::string job, host, reason, detail;
  int rank = -1, nranks = 0;
  int64_t pid = 0;
  int64_t time_ns = 0;  // CLOCK_MONOTONIC at the dump; every t_* of this dump is on this clock
  int64_t wall_ns = 0;  // CLOCK_REALTIME at the dump
  int64_t buffer = 0, recorded = 0, steps_recorded = 0;
  bool steps_mode = false;
  int64_t clock_ns = 1;  // resolution of the calls' times (BRAID_TRACE=calls: the coarse clock's)
};

// One communicator this rank belongs to.
struct Comm {
  std::string hash;  // 16 hex digits, the same on every rank of the communicator
  int rank = -1, nranks = 0;
  std::string parent;  // "" for a root communicator
  int color = -1, key = -1;
  std::vector<int> world_ranks;
  std::vector<std::string> hosts;
};

// One recorded call (a collective, a send/recv or a group of them).
struct Call {
  int64_t id = 0;  // the recorder's record number, which steps point to
  std::string comm;
  int64_t seq = 0;  // 1-based on its communicator, the same on every rank for the same call
  std::string call, dtype, op, algo, state, error;
  int64_t count = 0, bytes = 0;
  int root = -1, peer = -1;
  int step = 0, steps = 0;
  int64_t t_enqueue_ns = 0, t_start_ns = 0, t_end_ns = 0;  // t_end_ns 0: not finished
  int waiting_on = -1;                                     // rank in the communicator, -1: none
};

// One schedule step of a recorded call (BRAID_TRACE=steps only).
struct Step {
  int64_t call = 0;  // the Call's id
  std::string comm, kind;
  int64_t seq = 0;
  int step = 0, peer = -1;
  int64_t bytes = 0;
  int64_t t_start_ns = 0, t_end_ns = 0, wait_ns = 0, copy_ns = 0, reduce_ns = 0;
};

// One rank's file, as far as it could be read.
struct Dump {
  std::string file;
  Header header;
  std::vector<Comm> comms;
  std::vector<Call> calls;
  std::vector<Step> steps;
  bool cut = false;  // the file ends before its closing: later records are lost
  // header.wall_ns - header.time_ns: adds to a t_* to give wall-clock ns.
  int64_t wallOffset() const { return header.wall_ns - header.time_ns; }
};

// Something in the input that was not as the format says; line 0: the file as a whole.
struct Problem {
  std::string file;
  int line = 0;
  std::string what;
};

// What the input gave: the dumps read and what was wrong on the way. `unreadable` names, per
// rank taken from a file name rank-N*.json, the file that could not be read as a dump.
struct Input {
  std::vector<Dump> dumps;
  std::vector<Problem> problems;
  std::map<int, std::string> unreadable;
};

// Reads the dumps of `paths`: a folder gives its *.json but timeline.json, a file is read
// as it is. Each file is read as far as it goes (read.cc); a path that cannot be opened
// throws std::runtime_error naming it (the command line's mistake, not the data's).
Input readInput(const std::vector<std::string>& paths);

// Whether the call ended well ("done"); a failed one counts as where the rank stopped.
bool finished(const Call& c);

// One rank's part in a communicator: its dump and its calls on it in seq order.
struct Member {
  const Dump* dump = nullptr;
  std::vector<const Call*> calls;
  int world_rank = -1;  // in the recorder's root communicator, -1: unknown
  const Call* at(int64_t seq) const;
  int64_t lastFinished() const;  // 0: none
  const Call* open() const;      // the oldest call not finished, or null
};

// A communicator across the job: each rank that wrote a dump naming it.
struct CommView {
  std::string hash, parent;
  int nranks = 0;
  std::map<int, Member> members;  // by rank in the communicator
  std::vector<int> world_ranks;   // from any member's comms entry ([] if none gave it)
  std::vector<int> missing() const;
  std::string shortHash() const { return hash.substr(0, 8); }
};

// The communicators with calls in the job, root communicators first (the largest first),
// then the others in the order first seen. Adds a problem where two dumps claim one rank.
std::vector<CommView> viewComms(const Input& in, std::vector<Problem>& problems);

// Whether two ranks' calls at one seq agree: the same collective, count, dtype, root and op,
// where each matters (not the count of all_to_allv, whose counts are per rank; not the op of a
// non-reducing call nor the root of a non-rooted one). Point-to-point calls (send, recv,
// send_recv) agree with each other whatever their counts: different pairs move different data.
bool sameCall(const Call& a, const Call& b);
// "all_reduce count 1024 float32 sum" / "broadcast count 8 int32 root 0" / "barrier".
std::string describeCall(const Call& c);
// "all_reduce #12 (count 1024 float32 sum)"
std::string callAt(const Call& c);
// "0,1,3" with runs of three or more as "4-9".
std::string rankList(const std::vector<int>& ranks);
// A duration for people: "850 ns", "12.5 us", "3.20 ms", "2.50 s".
std::string formatDuration(int64_t ns);
// The call's fields as a JSON object, under the dump's names (read.cc, from the table that
// reads them).
json callJson(const Call& c);

// The call most ranks of v made at seq (ties: the lowest rank's), null if none made one.
const Call* majorityCall(const CommView& v, int64_t seq);

// The hang verdict: {"status","text","comm","seq","comms":[...]} (verdict.cc).
json hangVerdict(const std::vector<CommView>& comms, const Input& in);
// The calls that differ across ranks for the same communicator and seq (mismatch.cc), each
// {"comm","seq","rank","text",...}; a rank that skipped a call gives one "skipped" entry.
json findMismatches(const std::vector<CommView>& comms);
// Per (collective, bytes, algo): time and, with steps, where it went (summary.cc).
json summarize(const Input& in);
// Writes the Trace Event Format document of every call and step to out (timeline.cc).
void writeTimeline(const Input& in, std::ostream& out);

// The call a Gantt chart shows: the communicator (a prefix of its hash) and seq.
struct CallRef {
  std::string comm;
  int64_t seq = 0;
};
// Writes PNG (and its .dat and .gp beside it) of the call across ranks; returns the exit status
// braid-trace ends with: 0 drawn, 1 the call is not in the dumps or a file cannot be
// written, 3 gnuplot is not installed (the .dat and .gp are written).
int drawGantt(const std::string& png, const std::vector<CommView>& comms, const CallRef& ref);

}  // namespace braid::trace
