// The ring's phases over any group of ranks: a ring reduce-scatter and a ring all-gather in
// units that pipeline, each unit a run of elements with its own places. ring.cc's
// reduce-scatter and all-gather are these over the communicator's ring; the hierarchical
// algorithms (hierarchical.cc) compose them over the ranks of a host and across hosts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/schedule.h"

namespace braid {

// One unit of a ring phase: a run of elements that travels as one message.
struct RingUnit {
  size_t len = 0;
  // Reduce-scatter: this rank's contribution. All-gather, own block: where the data is.
  BufRef in{BufferId::kSend, 0};
  // Reduce-scatter: where the partial sum goes (without slots) and, in the own block, the
  // result. All-gather: where the unit lands (and is forwarded from).
  BufRef at{BufferId::kRecv, 0};
  size_t slotOff = 0;  // reduce-scatter with slots: the unit's place in a slot
  // The step that must finish first: before `in` is read (reduce-scatter; all-gather own
  // block), or before `at` is overwritten (all-gather, other blocks). -1: none.
  int32_t ready = -1;
};

// A ring over `ranks` (ring order), this rank at position `me`; block b is the one that
// ends on ranks[b] (reduce-scatter) or starts there (all-gather), and consists of
// perBlock units: units[b * perBlock + k].
struct RingPhase {
  std::vector<int> ranks;
  int me = 0;
  size_t perBlock = 0;
  std::vector<RingUnit> units;
  // All-gather: each unit of the own block is also copied from `in` to `at`, after its send
  // (in place the two overlap, and the copy must not overwrite what the send still reads).
  bool copyOwn = false;

  int size() const { return static_cast<int>(ranks.size()); }
  int block(int b) const { return ((b % size()) + size()) % size(); }
  int right() const { return ranks[block(me + 1)]; }
  int left() const { return ranks[block(me - 1)]; }
  RingUnit& unit(int b, size_t k) { return units[static_cast<size_t>(b) * perBlock + k]; }
  const RingUnit& unit(int b, size_t k) const {
    return units[static_cast<size_t>(b) * perBlock + k];
  }
  size_t index(int b, size_t k) const { return static_cast<size_t>(b) * perBlock + k; }
};

// Ring reduce-scatter (Patarasuk & Yuan 2009, in the form of ring.cc's reduce-scatter):
// steps s = 0 .. m-2 send block (me-s-1) to the right (at s = 0 the contribution, later
// the partial sum received the step before) and recv-reduce block (me-s-2) from the left
// with this rank's contribution; at s = m-2 that is block me, summed over the ring, and it
// lands at its units' `at` (divided by `divisor` if > 1). Partial sums go to `at` when
// slots is null (each block has its own place, so a contribution there is replaced by
// the partial sum that includes it), else alternately to slots[0] and slots[1] at the
// unit's slotOff. Unit by unit, so pieces pipeline. *done gets, per unit k of the own
// block, the step leaving its result; *sent, per unit of every block, the send that read
// it here (-1: none). Needs size() >= 2.
void ringReduceScatter(const RingPhase& ph, const BufRef* slots, int divisor, Schedule* out,
                       std::vector<int32_t>* done, std::vector<int32_t>* sent);

// Ring all-gather (ring.cc's): steps s = 0 .. m-2 send block (me-s) to the right (at s = 0
// the own block from its units' `in`, later the block received the step before) and
// receive block (me-s-1) from the left into its units' `at` (with copyOwn, the own block's
// units are copied to their `at` after their first send). *got gets, per unit of every
// block, the receive that brought it here (-1: none). Needs size() >= 2.
void ringAllGather(const RingPhase& ph, Schedule* out, std::vector<int32_t>* got);

}  // namespace braid
