// Calls that differ across ranks at the same communicator and seq: a rank that passed another
// count, dtype, root or op, or called another collective. Each rank is compared with the
// majority's call at that seq (ties: the lowest rank's), so N ranks give at most N-1 entries per
// seq. A rank that skipped a call is out by one from there on; comparing it seq by seq would list
// every later call, so that shift is recognised and said once.
#include <algorithm>
#include <set>

#include "trace.h"

namespace braid::trace {

namespace {

// The call most ranks made at one seq, and the lowest rank that made it.
struct Reference {
  int rank = -1;
  const Call* call = nullptr;
  size_t agreeing = 0;  // ranks whose call is the same
};

Reference majority(const CommView& v, int64_t seq) {
  std::vector<Reference> classes;  // in rank order, so a tie keeps the lowest rank's
  for (const auto& [rank, m] : v.members) {
    const Call* c = m.at(seq);
    if (!c) continue;
    const auto same = std::find_if(classes.begin(), classes.end(),
                                   [&](const Reference& r) { return sameCall(*r.call, *c); });
    if (same == classes.end())
      classes.push_back({rank, c, 1});
    else
      ++same->agreeing;
  }
  Reference best;
  for (const Reference& r : classes)
    if (r.agreeing > best.agreeing) best = r;
  return best;
}

class CommMismatches {
 public:
  CommMismatches(const CommView& v, json& out) : v_(v), out_(out) {
    std::set<int64_t> seqs;
    for (const auto& [rank, m] : v.members)
      for (const Call* c : m.calls) seqs.insert(c->seq);
    for (int64_t s : seqs) refs_[s] = majority(v, s);
  }

  // Adds the communicator's entries to out in seq order (then rank order).
  void run() {
    for (const auto& [rank, m] : v_.members)
      for (const Call* c : m.calls) {
        const Reference& ref = refs_.at(c->seq);
        if (sameCall(*c, *ref.call)) continue;
        if (skipped(m, c->seq)) {
          addSkip(rank, *c, ref);
          break;  // its later calls are the others' next ones: not mismatches
        }
        addMismatch(rank, *c, ref);
      }
    std::stable_sort(found_.begin(), found_.end(),
                     [](const json& a, const json& b) { return a["seq"] < b["seq"]; });
    for (json& e : found_) out_.push_back(std::move(e));
  }

 private:
  const Reference* refAt(int64_t seq) const {
    const auto it = refs_.find(seq);
    return it == refs_.end() ? nullptr : &it->second;
  }

  // Whether m's calls from seq on are the majority's from seq + 1 on, as far as both go.
  bool skipped(const Member& m, int64_t seq) const {
    const Reference* next = refAt(seq + 1);
    if (!next || !sameCall(*m.at(seq), *next->call)) return false;
    for (const Call* c : m.calls)
      if (c->seq > seq)
        if (const Reference* r = refAt(c->seq + 1); r && !sameCall(*c, *r->call)) return false;
    return true;
  }

  std::string others(const Reference& ref) const {
    return ref.agreeing > 1 ? "the others'" : "rank " + std::to_string(ref.rank) + "'s";
  }

  void addSkip(int rank, const Call& c, const Reference& ref) {
    const std::string k = std::to_string(c.seq), k1 = std::to_string(c.seq + 1);
    add(rank, c, ref, "skipped",
        "comm " + v_.shortHash() + ": rank " + std::to_string(rank) + " appears to have skipped " +
            callAt(*ref.call) + ": its #" + k + " is " + others(*refAt(c.seq + 1)) + " #" + k1);
  }

  void addMismatch(int rank, const Call& c, const Reference& ref) {
    add(rank, c, ref, "mismatch",
        "comm " + v_.shortHash() + " #" + std::to_string(c.seq) + ": rank " +
            std::to_string(ref.rank) + " called " + describeCall(*ref.call) + ", rank " +
            std::to_string(rank) + " called " + describeCall(c));
  }

  void add(int rank, const Call& c, const Reference& ref, const char* kind,
           const std::string& text) {
    found_.push_back({{"comm", v_.hash},
                      {"seq", c.seq},
                      {"kind", kind},
                      {"rank", rank},
                      {"call", callJson(c)},
                      {"reference_rank", ref.rank},
                      {"reference", callJson(*ref.call)},
                      {"text", text}});
  }

  const CommView& v_;
  json& out_;
  std::vector<json> found_;
  std::map<int64_t, Reference> refs_;
};

}  // namespace

const Call* majorityCall(const CommView& v, int64_t seq) { return majority(v, seq).call; }

json findMismatches(const std::vector<CommView>& comms) {
  json out = json::array();
  for (const CommView& v : comms) CommMismatches(v, out).run();
  return out;
}

}  // namespace braid::trace
