// The hang verdict, per communicator. Every rank of a communicator makes its calls in the same
// order, numbered by seq, so a hang shows as the oldest call some rank is still in: the ranks in
// it wait (their waiting_on says on whom), and the cause is usually a rank that never posted it
// (it went elsewhere, or its process stopped: then it wrote no dump) or, when every rank is in
// it, the rank the others wait on.
#include <algorithm>
#include <climits>

#include "trace.h"

namespace braid::trace {

namespace {

// How long the call has been running when the dump was written, -1 if the dump does not say.
// How long the rank was in the call: until it gave up (a failed call), else until the dump.
int64_t elapsedNs(const Call& c, const Dump& d) {
  const int64_t start = c.t_start_ns ? c.t_start_ns : c.t_enqueue_ns;
  const int64_t end = c.t_end_ns ? c.t_end_ns : d.header.time_ns;
  return start && end ? end - start : -1;
}

std::string ranksWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankList(ranks);
}

// "rank 0 is in" / "ranks 0,1 are in": the verb agreeing with the number of ranks.
std::string ranksDo(const std::vector<int>& ranks, const char* one, const char* many) {
  return ranksWord(ranks) + " " + (ranks.size() == 1 ? one : many);
}

// "rank 2" or, in a communicator split from the root one, "rank 2 (world rank 6)".
std::string who(const CommView& v, int rank) {
  std::string s = "rank " + std::to_string(rank);
  if (rank < static_cast<int>(v.world_ranks.size()) && v.world_ranks[rank] != rank)
    s += " (world rank " + std::to_string(v.world_ranks[rank]) + ")";
  return s;
}

// One communicator's verdict, built up line by line.
class CommVerdict {
 public:
  CommVerdict(const CommView& v, const Input& in) : v_(v), in_(in) {
    out_ = {{"comm", v.hash},
            {"nranks", v.nranks},
            {"parent", v.parent},
            {"in_call", json::array()},
            {"never_posted", json::array()},
            {"missing", json::array()},
            {"ahead", json::array()},
            {"longest_in_call", nullptr},
            {"seq", nullptr},
            {"call", nullptr}};
    int64_t reached = INT64_MAX, frontier = 0;
    json withDump = json::array();
    for (const auto& [rank, m] : v.members) {
      withDump.push_back(rank);
      reached = std::min(reached, m.lastFinished());
      if (!m.calls.empty()) frontier = std::max(frontier, m.calls.back()->seq);
      if (const Call* c = m.open()) hung_ = std::min(hung_, c->seq);
    }
    out_["ranks_with_dump"] = withDump;
    out_["reached"] = reached == INT64_MAX ? 0 : reached;
    out_["frontier"] = frontier;
  }

  json build() {
    if (hung_ != INT64_MAX)
      hang();
    else
      noCallOpen();
    longestInCall();
    out_["lines"] = lines_;
    return out_;
  }

 private:
  void headline(const std::string& status, const std::string& text) {
    out_["status"] = status;
    const std::string split = v_.parent.empty() ? "" : ", split from " + v_.parent.substr(0, 8);
    out_["text"] = "comm " + v_.shortHash() + " (" + std::to_string(v_.nranks) + " ranks" + split +
                   "): " + text;
  }

  // Some rank is in call #hung_ (the oldest call any rank is still in).
  void hang() {
    std::vector<int> inCall, ahead, notPosted, differing;
    const Call* ref = majorityCall(v_, hung_);  // some rank is in it: never null
    for (const auto& [rank, m] : v_.members) {
      const Call* c = m.at(hung_);
      if (!c) {
        notPosted.push_back(rank);
        continue;
      }
      (finished(*c) ? ahead : inCall).push_back(rank);
      if (!finished(*c) && c->waiting_on >= 0) waiters_[c->waiting_on].push_back(rank);
      if (!sameCall(*c, *ref)) differing.push_back(rank);
    }
    out_["seq"] = hung_;
    out_["call"] = callJson(*ref);
    std::string text = "hang in " + callAt(*ref) + ": " + ranksWord(inCall) + " in it";
    if (!notPosted.empty()) text += ", " + ranksWord(notPosted) + " never posted it";
    if (!v_.missing().empty()) text += ", no dump from " + ranksWord(v_.missing());
    headline("hang", text);
    for (int r : notPosted) neverPosted(r, *ref, inCall, "is in", "are in");
    for (int r : v_.missing()) missing(r, *ref);
    if (notPosted.empty() && v_.missing().empty()) everyRankPosted(ahead);
    if (!differing.empty()) callsDiffer(differing, *ref);
    if (!ahead.empty()) {
      out_["ahead"] = ahead;
      lines_.push_back(ranksWord(ahead) + " finished #" + std::to_string(hung_) + " and went on");
    }
    describeInCall(inCall);
  }

  // The ranks in the oldest open call that wait on `rank` (none when no call is open).
  std::vector<int> waitersOn(int rank) const {
    const auto it = waiters_.find(rank);
    return it == waiters_.end() ? std::vector<int>() : it->second;
  }

  // The ranks at the hung seq whose call is not the majority's: the likely cause, in words.
  void callsDiffer(const std::vector<int>& differing, const Call& ref) {
    const std::string mismatch = ": the calls do not match, the likely cause (see the mismatches)";
    if (differing.size() == 1)
      lines_.push_back(who(v_, differing[0]) + " called it as " +
                       describeCall(*v_.members.at(differing[0]).at(hung_)) + ", the others as " +
                       describeCall(ref) + mismatch);
    else
      lines_.push_back(ranksWord(differing) + " called it otherwise than the others' " +
                       describeCall(ref) + mismatch);
    out_["differing"] = differing;
  }

  void neverPosted(int r, const Call& ref, const std::vector<int>& others, const char* verbOne,
                   const char* verbMany) {
    const Member& m = v_.members.at(r);
    const std::vector<int> waiters = waitersOn(r);
    // A dump cut off before its end may have lost the call: say what the file shows.
    std::string line = who(v_, r) +
                       (m.dump->cut ? "'s dump, which is cut off, shows no " : " never posted ") +
                       callAt(ref) + ", which " + ranksDo(others, verbOne, verbMany);
    if (!waiters.empty())
      line += waiters == others ? ", waiting on rank " + std::to_string(r)
                                : "; " + ranksDo(waiters, "waits on it", "wait on it");
    line += "; its last finished call is #" + std::to_string(m.lastFinished());
    if (!m.calls.empty() && m.calls.back()->seq > ref.seq)
      line +=
          ", yet it went on to #" + std::to_string(m.calls.back()->seq) + " (see the mismatches)";
    lines_.push_back(line);
    // The call as the others made it: its arguments, not their progress in it.
    out_["never_posted"].push_back({{"rank", r},
                                    {"comm", ref.comm},
                                    {"seq", ref.seq},
                                    {"call", ref.call},
                                    {"count", ref.count},
                                    {"dtype", ref.dtype},
                                    {"op", ref.op},
                                    {"root", ref.root},
                                    {"bytes", ref.bytes},
                                    {"last_finished", m.lastFinished()},
                                    {"waited_on_by", waiters},
                                    {"dump_cut_off", m.dump->cut}});
  }

  void missing(int r, const Call& ref) {
    const int world = r < static_cast<int>(v_.world_ranks.size()) ? v_.world_ranks[r]
                      : v_.parent.empty()                         ? r
                                                                  : -1;
    const auto bad = in_.unreadable.find(world);
    const std::string file = bad == in_.unreadable.end() ? "" : bad->second;
    const std::vector<int> waiters = waitersOn(r);
    std::string line =
        who(v_, r) + (file.empty() ? " wrote no dump (stopped, killed or stuck "
                                     "where it cannot dump)"
                                   : "'s dump " + file + " could not be read (see the problems)");
    if (!waiters.empty())
      line += "; " + ranksDo(waiters, "waits on it in ", "wait on it in ") + ref.call + " #" +
              std::to_string(ref.seq) + ": the likely cause";
    lines_.push_back(line);
    out_["missing"].push_back({{"rank", r},
                               {"world_rank", world},
                               {"file", file},
                               {"seq", ref.seq},
                               {"waited_on_by", waiters}});
  }

  // Every rank posted the call: the ones waited on are where to look.
  void everyRankPosted(const std::vector<int>& ahead) {
    std::string waits;
    for (const auto& [target, ranks] : waiters_) {
      waits +=
          (waits.empty() ? "" : "; ") + ranksWord(ranks) + " on rank " + std::to_string(target);
      if (std::find(ahead.begin(), ahead.end(), target) != ahead.end())
        lines_.push_back(ranksDo(ranks, "waits on rank ", "wait on rank ") +
                         std::to_string(target) + ", which finished #" + std::to_string(hung_) +
                         ": their calls may not match (see the mismatches)");
    }
    lines_.insert(lines_.begin(),
                  "every rank with a dump posted it" +
                      (waits.empty() ? std::string(" (no rank says on whom it waits)")
                                     : "; waiting: " + waits));
  }

  void describeInCall(const std::vector<int>& inCall) {
    constexpr size_t kMaxLines = 16;  // a 16k-rank job: the JSON has them all
    for (int r : inCall) {
      const Member& m = v_.members.at(r);
      const Call& c = *m.at(hung_);
      const int64_t ns = elapsedNs(c, *m.dump);
      if (out_["in_call"].size() < kMaxLines) {
        std::string line = who(v_, r) + ": in " + c.call + " #" + std::to_string(c.seq);
        if (ns >= 0) line += " for " + formatDuration(ns);
        line +=
            " (" + c.state + ", step " + std::to_string(c.step) + " of " + std::to_string(c.steps);
        if (c.waiting_on >= 0) line += ", waiting on rank " + std::to_string(c.waiting_on);
        line += ")";
        if (c.state == "failed" && !c.error.empty()) {  // the library's own words, cut short
          constexpr size_t kErrorChars = 200;
          line +=
              ": " + c.error.substr(0, kErrorChars) + (c.error.size() > kErrorChars ? "..." : "");
        }
        lines_.push_back(line);
      }
      json e = callJson(c);
      e.update({{"rank", r}, {"elapsed_ns", ns}});
      out_["in_call"].push_back(e);
    }
    if (inCall.size() > kMaxLines)
      lines_.push_back("... and " + std::to_string(inCall.size() - kMaxLines) +
                       " more ranks in the call (--json lists them)");
  }

  // No rank is in a call: either all stopped at the same one, or some stopped earlier.
  void noCallOpen() {
    int64_t last = 0;
    for (const auto& [r, m] : v_.members) last = std::max(last, m.lastFinished());
    std::vector<int> behind, atLast;
    for (const auto& [r, m] : v_.members) (m.lastFinished() < last ? behind : atLast).push_back(r);
    const std::vector<int> absent = v_.missing();
    if (behind.empty()) {
      std::string text = "no hang: every rank " +
                         std::string(absent.empty() ? "" : "with a dump ") + "finished #" +
                         std::to_string(last) + " and is in no call";
      if (!absent.empty()) text += "; no dump from " + ranksWord(absent);
      headline("ok", text);
    } else {
      headline("stopped", "no rank is in a call, but " + ranksWord(behind) + " stopped before #" +
                              std::to_string(last) + ", which " + ranksWord(atLast) + " finished");
      for (int r : behind) {
        const int64_t next = v_.members.at(r).lastFinished() + 1;
        const auto withNext = std::find_if(v_.members.begin(), v_.members.end(),
                                           [&](const auto& rm) { return rm.second.at(next); });
        if (withNext != v_.members.end())
          neverPosted(r, *withNext->second.at(next), atLast, "finished", "finished");
      }
    }
    Call after;  // what the ranks with a dump finished last
    after.seq = last;
    for (int r : absent) missing(r, after);
  }

  // A rank in a call far longer than any other rank is in one: where it entered first.
  void longestInCall() {
    std::vector<std::pair<int64_t, int>> spans;  // (ns in its open call, rank)
    for (const auto& [r, m] : v_.members)
      if (const Call* c = m.open(); c && c->state == "started")
        if (const int64_t ns = elapsedNs(*c, *m.dump); ns >= 0) spans.push_back({ns, r});
    if (spans.size() < 2) return;
    std::sort(spans.rbegin(), spans.rend());
    const auto [longest, r] = spans[0];
    const int64_t next = spans[1].first;
    if (longest < 2 * next || longest - next < 1000000) return;  // not notably longer
    const Call& c = *v_.members.at(r).open();
    lines_.push_back(who(v_, r) + " has been in " + c.call + " #" + std::to_string(c.seq) +
                     " for " + formatDuration(longest) +
                     ", longer than any other rank (next: " + formatDuration(next) + ")");
    out_["longest_in_call"] = {{"rank", r}, {"seq", c.seq}, {"elapsed_ns", longest}};
  }

  const CommView& v_;
  const Input& in_;
  json out_;
  std::vector<std::string> lines_;
  int64_t hung_ = INT64_MAX;                 // the oldest seq some rank is still in
  std::map<int, std::vector<int>> waiters_;  // in call #hung_: by the rank waited on
};

}  // namespace

json hangVerdict(const std::vector<CommView>& comms, const Input& in) {
  json all = json::array();
  for (const CommView& v : comms) all.push_back(CommVerdict(v, in).build());
  if (all.empty()) return {{"status", "no calls"}, {"text", "no call recorded"}, {"comms", all}};
  // The verdict is the first communicator (root ones first) that is not ok, else the root's.
  const auto first =
      std::find_if(all.begin(), all.end(), [](const json& c) { return c["status"] != "ok"; });
  json verdict = first == all.end() ? all.front() : *first;
  verdict["comms"] = all;
  return verdict;
}

}  // namespace braid::trace
