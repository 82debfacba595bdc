// The state of one symbolic run of a Program, and the checks made on it once the run has ended
// (verifier_checks.cc): the deadlock described, messages nobody received, every output element
// against the collective's meaning, and the barrier's "every rank has heard from every other".
// verifier.cc's Sim, which runs the simulation over this state, derives from it. Internal to the
// verifier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/verifier_program.h"

namespace braid::verify {

class SimState {
 protected:
  enum StepState : uint8_t { kPending, kStarted, kDone };

  SimState(const Program& p, size_t slots) : p_(p), slots_(static_cast<int64_t>(slots)) {}

  bool fail(std::string msg) {
    if (!failed_) error_ = std::move(msg);
    failed_ = true;
    return false;
  }

  // ---- Final checks (verifier_checks.cc) ------------------------------------------------

  bool checkBarrier();
  std::string describeDeadlock() const;
  std::string whyStuck(int32_t g) const;
  std::string waitReason(int32_t g) const;
  bool checkLeftoverMessages();
  template <typename Expect>
  bool expectRange(int r, size_t offset, size_t len, Expect expect);
  bool checkOutputs();

  static constexpr int kCache = 8;
  static constexpr int64_t kMaxClockWidth = 256;
  static constexpr size_t kClockBudget = size_t{1} << 26;  // int32 entries: 256 MB

  const Program& p_;
  const int64_t slots_;  // 0: unbounded
  bool failed_ = false;
  std::string error_;

  std::vector<Sym> mem_, tmp_;
  int64_t remaining_ = 0;
  uint32_t clock_ = 0;
  // Per step, together so that one cache line serves a step's whole state.
  struct Dyn {
    uint32_t doneTime;  // 0: not done; else when it finished, in completions
    StepState state;
    uint8_t depsLeft;
  };
  std::vector<Dyn> dyn_;
  std::vector<int64_t> payload_;  // send: where its message lies in arena_; -1: none
  // Per queue, what the simulation reads and changes, in one record.
  struct QState {
    int32_t head;  // into qSteps: the step at its head
    int32_t begin, end;
    int32_t partner;
    QueueKind kind;
    uint8_t inWork;  // on the worklist
    int64_t aux;     // slots of the head message pushed (send) or drained (recv)
    int64_t occ;     // send: slots in the connection
  };
  std::vector<QState> qs_;
  std::vector<int32_t> work_;

  // Messages in flight.
  std::vector<Sym> arena_;
  std::vector<int32_t> liveSends_;
  size_t liveElems_ = 0;

  // Races: per element, the last writer and the readers since (one inline, more pooled).
  std::vector<int32_t> writer_, reader_, overflow_;
  std::vector<std::pair<int32_t, int32_t>> pool_;
  std::vector<uint32_t> visited_;
  uint32_t stamp_ = 0;
  std::vector<int32_t> stack_;
  std::vector<int64_t> clockAt_;  // per step: its local clock in clocks_; -1: not computed
  std::vector<int32_t> clocks_, clockStack_;
  int32_t cacheOwner_ = -1;
  int32_t cache_[kCache] = {};
  int cacheN_ = 0, cacheNext_ = 0;

  // Barrier.
  size_t words_ = 0;
  std::vector<uint64_t> heard_, setPool_;
  std::vector<int32_t> stepSet_, refs_, freeSets_;
};

}  // namespace braid::verify
