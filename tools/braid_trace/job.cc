// The job seen per communicator: the dumps are per rank, but a hang or a mismatch is a matter
// between the ranks of one communicator at one sequence number, so every analysis starts from
// this view. Also the small words every report shares (a call, a list of ranks, a duration).
#include <algorithm>
#include <cstdio>

#include "trace.h"

namespace braid::trace {

// A failed call is not finished: the rank gave up inside it (a timeout, a lost peer, a
// mismatch), which is where the verdict must place it.
bool finished(const Call& c) { return c.state == "done"; }

const Call* Member::at(int64_t seq) const {
  const auto it = std::lower_bound(calls.begin(), calls.end(), seq,
                                   [](const Call* c, int64_t s) { return c->seq < s; });
  return it != calls.end() && (*it)->seq == seq ? *it : nullptr;
}

int64_t Member::lastFinished() const {
  for (auto it = calls.rbegin(); it != calls.rend(); ++it)
    if (finished(**it)) return (*it)->seq;
  return 0;
}

const Call* Member::open() const {
  for (const Call* c : calls)
    if (!finished(*c)) return c;
  return nullptr;
}

std::vector<int> CommView::missing() const {
  std::vector<int> out;
  for (int r = 0; r < nranks; ++r)
    if (!members.count(r)) out.push_back(r);
  return out;
}

namespace {

// The dump's own entry for a communicator; a call naming one the dump does not list is taken
// as the recorder's own (its rank and size from the header) and reported.
const Comm* findComm(const Dump& d, const std::string& hash) {
  for (const Comm& c : d.comms)
    if (c.hash == hash) return &c;
  return nullptr;
}

void addMember(CommView& v, const Dump& d, std::vector<Problem>& problems) {
  const Comm* entry = findComm(d, v.hash);
  Comm fallback;
  if (!entry) {
    problems.push_back(
        {d.file, 0,
         "calls on communicator " + v.hash + ", which \"comms\" does not list: taken as rank " +
             std::to_string(d.header.rank) + " of " + std::to_string(d.header.nranks)});
    fallback.rank = d.header.rank;
    fallback.nranks = d.header.nranks;
    entry = &fallback;
  }
  if (entry->rank < 0) return;
  if (v.members.count(entry->rank)) {
    problems.push_back({d.file, 0,
                        "rank " + std::to_string(entry->rank) + " of communicator " + v.hash +
                            " is also in " + v.members.at(entry->rank).dump->file +
                            ": this one ignored"});
    return;
  }
  v.nranks = std::max({v.nranks, entry->nranks, entry->rank + 1});
  if (v.parent.empty()) v.parent = entry->parent;
  if (v.world_ranks.empty()) v.world_ranks = entry->world_ranks;
  Member& m = v.members[entry->rank];
  m.dump = &d;
  for (const Call& c : d.calls)
    if (c.comm == v.hash) m.calls.push_back(&c);
  std::stable_sort(m.calls.begin(), m.calls.end(),
                   [](const Call* a, const Call* b) { return a->seq < b->seq; });
}

}  // namespace

std::vector<CommView> viewComms(const Input& in, std::vector<Problem>& problems) {
  std::vector<std::string> hashes;  // in the order first seen
  for (const Dump& d : in.dumps)
    for (const Call& c : d.calls)
      if (std::find(hashes.begin(), hashes.end(), c.comm) == hashes.end()) hashes.push_back(c.comm);
  std::vector<CommView> views;
  for (const std::string& h : hashes) {
    CommView v;
    v.hash = h;
    for (const Dump& d : in.dumps)
      if (findComm(d, h) ||
          std::any_of(d.calls.begin(), d.calls.end(), [&](const Call& c) { return c.comm == h; }))
        addMember(v, d, problems);
    for (auto& [rank, m] : v.members)
      if (rank < static_cast<int>(v.world_ranks.size())) m.world_rank = v.world_ranks[rank];
    views.push_back(std::move(v));
  }
  std::stable_sort(views.begin(), views.end(), [](const CommView& a, const CommView& b) {
    return std::pair(!a.parent.empty(), -a.nranks) < std::pair(!b.parent.empty(), -b.nranks);
  });
  return views;
}

namespace {

bool reducing(const std::string& call) {
  return call == "all_reduce" || call == "reduce" || call == "reduce_scatter";
}
bool rooted(const std::string& call) {
  return call == "broadcast" || call == "reduce" || call == "gather" || call == "scatter";
}

bool pointToPoint(const std::string& call) {
  return call == "send" || call == "recv" || call == "send_recv";
}

}  // namespace

bool sameCall(const Call& a, const Call& b) {
  if (pointToPoint(a.call) || pointToPoint(b.call))
    return pointToPoint(a.call) && pointToPoint(b.call);
  return a.call == b.call && a.dtype == b.dtype &&
         (a.call == "all_to_allv" || a.count == b.count) && (!reducing(a.call) || a.op == b.op) &&
         (!rooted(a.call) || a.root == b.root);
}

std::string describeCall(const Call& c) {
  std::string s = c.call.empty() ? "(unnamed call)" : c.call;
  if (c.call == "barrier") return s;
  s += " count " + std::to_string(c.count);
  if (!c.dtype.empty()) s += " " + c.dtype;
  if (reducing(c.call) && !c.op.empty()) s += " " + c.op;
  if (rooted(c.call)) s += " root " + std::to_string(c.root);
  if (c.peer >= 0) s += " peer " + std::to_string(c.peer);
  return s;
}

std::string callAt(const Call& c) {
  const std::string args = describeCall(c);
  const size_t space = args.find(' ');
  return c.call + " #" + std::to_string(c.seq) +
         (space == std::string::npos ? "" : " (" + args.substr(space + 1) + ")");
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    if (j >= i + 2) {
      s += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      s += std::to_string(ranks[i++]);
    }
  }
  return s;
}

std::string formatDuration(int64_t ns) {
  char buf[32];
  const double x = static_cast<double>(ns);
  if (ns < 1000)
    std::snprintf(buf, sizeof buf, "%lld ns", static_cast<long long>(ns));
  else if (ns < 1000000)
    std::snprintf(buf, sizeof buf, "%.1f us", x / 1e3);
  else if (ns < 1000000000)
    std::snprintf(buf, sizeof buf, "%.2f ms", x / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f s", x / 1e9);
  return buf;
}

}  // namespace braid::trace
