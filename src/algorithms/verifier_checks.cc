// The verifier's checks of a run that has ended (verifier_sim.h; the checks are listed in
// verifier.h): a deadlock described (up to 5 stuck ranks, each with the step it waits at and
// why), a message nobody received, an output element with the wrong symbol (all-to-all-v: or a
// write between the blocks), and a barrier rank that may leave before another entered.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "algorithms/verifier_program.h"
#include "algorithms/verifier_sim.h"

namespace braid::verify {

bool SimState::checkBarrier() {
  if (!p_.barrier) return true;
  for (int r = 0; r < p_.n; ++r)
    for (int s = 0; s < p_.n; ++s)
      if (!(heard_[static_cast<size_t>(r) * words_ + s / 64] >> (s % 64) & 1))
        return fail(
            format("rank %d may leave the barrier before rank %d enters: no chain of "
                   "messages leads from rank %d to rank %d's last step",
                   r, s, s, r));
  return true;
}

std::string SimState::describeDeadlock() const {
  int stuck = 0, shown = 0;
  std::string detail;
  for (int r = 0; r < p_.n; ++r) {
    int32_t g = -1;
    for (int64_t i = p_.stepBase[r]; i < p_.stepBase[r + 1] && g < 0; ++i)
      if (dyn_[i].state != kDone) g = static_cast<int32_t>(i);
    if (g < 0) continue;
    ++stuck;
    if (shown < 5) {
      ++shown;
      detail += "; " + whyStuck(g);
    }
  }
  return format("deadlock: %d of %d ranks cannot finish", stuck, p_.n) + detail +
         (stuck > shown ? "; ..." : "");
}

// Follows what holds g back on its own rank to a step blocked on communication.
std::string SimState::whyStuck(int32_t g) const {
  std::string chain;
  for (int hops = 0; hops < 64; ++hops) {
    const PStep& s = p_.steps[g];
    int32_t blocker = -1;
    for (int k = 0; k < s.ndeps && blocker < 0; ++k)
      if (dyn_[p_.deps[s.depBegin + k]].state != kDone) blocker = p_.deps[s.depBegin + k];
    const int32_t atHead = p_.qSteps[qs_[s.queue].head];
    if (blocker < 0 && atHead != g) blocker = atHead;
    if (blocker < 0) return p_.describeStep(g) + chain + " " + waitReason(g);
    chain += format(" (holding up step %d)", p_.local(g));
    g = blocker;
  }
  return p_.describeStep(g) + " is in a cycle of dependencies";
}

std::string SimState::waitReason(int32_t g) const {
  const PStep& s = p_.steps[g];
  const Queue& Q = p_.queues[s.queue];
  if (Q.kind == kSendQ) {
    std::string why = format("waits for room: its connection to rank %d holds %lld slots", s.peer,
                             static_cast<long long>(qs_[s.queue].occ));
    if (Q.partner < 0)
      return why + format(" and rank %d posts no receive from rank %d", s.peer, s.rank);
    const Queue& R = p_.queues[Q.partner];
    if (qs_[Q.partner].head >= R.end)
      return why + format(" and rank %d has received all %d messages it expects", s.peer,
                          R.end - R.begin);
    return why + ", drained only by " + p_.describeStep(p_.qSteps[qs_[Q.partner].head]) +
           ", which cannot run";
  }
  if (Q.kind == kRecvQ) {
    const int32_t k = qs_[s.queue].head - Q.begin;
    if (Q.partner < 0)
      return format(
          "waits for a message that rank %d never sends (it posts no send to this "
          "rank)",
          s.peer);
    const Queue& S = p_.queues[Q.partner];
    if (k >= S.end - S.begin)
      return format("waits for message %d from rank %d, which sends only %d", k + 1, s.peer,
                    S.end - S.begin);
    return format("waits for message %d from rank %d, whose %s has not run", k + 1, s.peer,
                  p_.describeStep(p_.qSteps[S.begin + k]).c_str());
  }
  return "is ready but did not run (a verifier bug)";
}

bool SimState::checkLeftoverMessages() {
  for (const Queue& Q : p_.queues) {
    if (Q.kind != kSendQ) continue;
    const int32_t sent = Q.end - Q.begin;
    const int32_t received =
        Q.partner >= 0 ? p_.queues[Q.partner].end - p_.queues[Q.partner].begin : 0;
    if (sent > received)
      return fail(format(
          "rank %d sends %d messages to rank %d, which receives only %d: the "
          "first never received is %s",
          Q.rank, sent, Q.peer, received, p_.describeStep(p_.qSteps[Q.begin + received]).c_str()));
  }
  return true;
}

// Compares rank r's recv[offset + k] with expect(k) for k < len.
template <typename Expect>
bool SimState::expectRange(int r, size_t offset, size_t len, Expect expect) {
  const BufInfo& bi = p_.buf(r, 1);
  for (size_t k = 0; k < len; ++k) {
    const Sym& got = mem_[bi.base + static_cast<int64_t>(offset + k)];
    const Sym want = expect(k);
    if (same(got, want)) continue;
    size_t wrong = 0;
    for (size_t j = k; j < len; ++j)
      wrong += !same(mem_[bi.base + static_cast<int64_t>(offset + j)], expect(j));
    return fail(
        format("wrong result: rank %d's recv[%zu] holds %s, but should hold %s (%zu "
               "wrong elements in rank %d's recv[%zu..%zu))",
               r, offset + k, p_.describeSym(got).c_str(), p_.describeSym(want).c_str(), wrong, r,
               offset, offset + len));
  }
  return true;
}

bool SimState::checkOutputs() {
  const size_t c = p_.args[0].count;
  const size_t nn = static_cast<size_t>(p_.n);
  const int root = p_.root;
  for (int r = 0; r < p_.n; ++r) {
    bool ok = true;
    switch (p_.coll) {
      case Collective::kAllReduce:
        ok = expectRange(r, 0, c, [&](size_t k) { return p_.fullSym(k); });
        break;
      case Collective::kReduceScatter:
        ok = expectRange(r, 0, c, [&](size_t k) { return p_.fullSym(r * c + k); });
        break;
      case Collective::kReduce:
        if (r == root) ok = expectRange(r, 0, c, [&](size_t k) { return p_.fullSym(k); });
        break;
      case Collective::kAllGather:
        ok = expectRange(r, 0, nn * c, [&](size_t k) { return p_.dataSym(k / c, k % c); });
        break;
      case Collective::kBroadcast:
        ok = expectRange(r, 0, c, [&](size_t k) { return p_.dataSym(root, k); });
        break;
      case Collective::kAllToAll:
        ok = expectRange(r, 0, nn * c, [&](size_t k) { return p_.dataSym(k / c, r * c + k % c); });
        break;
      case Collective::kAllToAllv: {
        const CollArgs& a = p_.args[r];
        const BufInfo& bi = p_.buf(r, 1);
        std::vector<uint8_t> covered(bi.size, 0);
        for (int i = 0; i < p_.n && ok; ++i) {
          const size_t from = p_.args[i].sendDispls[r];
          ok = expectRange(r, a.recvDispls[i], a.recvCounts[i],
                           [&](size_t k) { return p_.dataSym(i, from + k); });
          std::fill_n(covered.begin() + a.recvDispls[i], a.recvCounts[i], 1);
        }
        for (size_t k = 0; k < covered.size() && ok; ++k)
          if (!covered[k] && mem_[bi.base + k].cnt != 0)
            ok =
                fail(format("rank %d's recv[%zu] lies outside every block it receives, but "
                            "was written (%s)",
                            r, k, p_.describeSym(mem_[bi.base + k]).c_str()));
        break;
      }
      case Collective::kGather:
        if (r == root)
          ok = expectRange(r, 0, nn * c, [&](size_t k) { return p_.dataSym(k / c, k % c); });
        break;
      case Collective::kScatter:
        ok = expectRange(r, 0, c, [&](size_t k) { return p_.dataSym(root, r * c + k); });
        break;
      case Collective::kBarrier:
        break;
    }
    if (!ok) return false;
  }
  return true;
}

}  // namespace braid::verify
