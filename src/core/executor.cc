// The executor's run of one plan (executor.h): every queue advanced as far as its dependencies
// and its connection allow, pieces of consecutive steps in flight together, received pieces
// copied or reduced where the call's buffers are, and, when a pass moves nothing, the wait:
// spin, yield, then sleep on the doorbell (waitForProgress). What a long wait finds and says is
// wait_diagnosis.cc's; plans are compiled in plan.cc, device memory is device_buffer.cc's.
// The run is written once over where the call's bytes lie (exec_memory.h: HostMemory,
// DeviceMemory), and execute() picks one instantiation per call.
#include "core/executor.h"

#include <errno.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/exec_memory.h"
#include "core/stall.h"
#include "core/wait_diagnosis.h"
#include "device/device.h"
#include "kernels/reduce.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;
// The longest a waiting rank yields its core before it sleeps on the doorbell (waitForProgress).
constexpr auto kYieldFor = std::chrono::microseconds(200);

using Cursor = Plan::Cursor;

// Receive-reduce of a piece in another process's memory: read in blocks of this many bytes
// into a buffer that stays in this core's cache, and reduce from there.
constexpr size_t kPullBlock = 64 << 10;

// Bytes a queue copies or reduces in one pass before the pass moves on to the other queues.
// Without a bound, a receive queue fed by an idle peer never runs dry: the peer posts a new
// piece for every slot this rank frees, so this rank reduces the peer's whole stream before
// it goes back to post its own sends, and the peer waits the whole time. Two ranks then take
// turns instead of working together (2-rank ring reduce-scatter of 256 MiB: half of each
// call spent waiting). Small enough that the other queues are served every few pieces, large
// enough that small pieces still go in batches.
constexpr size_t kPassBytes = 256 << 10;

template <class Memory>
class Run : WaitDiagnosis {
 public:
  Run(Plan* plan, const ExecContext& ctx)
      : WaitDiagnosis(plan, ctx), steps_(ctx.stepTimes), nsteps_(plan->schedule.steps.size()) {
    bases_ = ctx.bases;
  }
  ~Run() {
    if (stallWarned_ && ctx_.stall) ctx_.stall->callEnded();
    if (restoreDevice_ >= 0) device::runtime().setDevice(restoreDevice_);
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  braidResult_t go() {
    char* scratch = plan_.scratch.data();
    // On the communicator's device (a proxy is on it already; a thread of a synchronous
    // group call, or the caller's, may not be), for this call only.
    if (ctx_.cudaDevice >= 0) {
      const int current = device::runtime().currentDevice(nullptr);
      if (current != ctx_.cudaDevice) {
        BRAID_TRY(device::runtime().setDevice(ctx_.cudaDevice));
        restoreDevice_ = current;
      }
    }
    BRAID_TRY(Memory::begin(ctx_, plan_, &scratch));
    if (ctx_.nbases > static_cast<size_t>(BufferId::kScratch))
      bases_[static_cast<int>(BufferId::kScratch)] = scratch;
    std::fill(plan_.done.begin(), plan_.done.end(), 0);
    std::fill(sendCur_.begin(), sendCur_.end(), Cursor{});
    std::fill(recvCur_.begin(), recvCur_.end(), Cursor{});
    localCur_ = 0;
    remaining_ = nsteps_;
    if (steps_) describeSteps();
    while (remaining_ > 0) {
      bool progressed = false;
      BRAID_TRY(pass(&progressed));
      if (!progressed) BRAID_TRY(steps_ ? timedWait() : waitForProgress());
    }
    return braidSuccess;
  }

  // After a pass that moved nothing: passes again until one moves something. Spin briefly,
  // yield a few times (ranks may outnumber cores), then sleep on the doorbell until a peer
  // publishes or frees a slot. Oversubscribed (more ranks on this host than cores): the peer
  // we wait for needs this core, so hand it over at once with sched_yield, many times, before
  // sleeping: a yield gives the core to a runnable peer without the futex round trip of a
  // sleep (4 ranks on 2 cores, 8-byte all-reduce: 44 us sleeping at once, 7 us after up to
  // 1,000 yields; perf/compare_peers.sh 4). Oversubscribed or not, a rank yields for at most
  // kYieldFor: a peer still silent after that has work of its own or waits itself, and polling
  // it spends CPU that others need (CI's ASan+UBSan run: allreduce_test 61 CPU-s to 45,
  // matrix_tcp 45 to 37; the 8-byte latency at 4 ranks on 2 cores stayed 14-18 us). Fails on
  // the timeout or a lost peer. Never inlined, so
  // that profiles (perf/callgrind_allreduce.sh) tell the time a rank waits from the time it works.
  [[gnu::noinline]] braidResult_t waitForProgress() {
    const double timeout = ctx_.timeoutSec > 0 ? ctx_.timeoutSec : config().timeoutSec;
    const double stallWarn = ctx_.stallWarnSec >= 0 ? ctx_.stallWarnSec : config().stallWarnSec;
    const unsigned spins = ctx_.oversubscribed ? 32 : 4096;
    unsigned yieldsEnd = spins + (ctx_.oversubscribed ? 1000 : 64);
    Clock::time_point idleSince{}, lastLivenessCheck{};
    double nextPeerCheck = kFirstPeerCheckSec;
    for (unsigned idle = 1;; ++idle) {
      if (ctx_.aborted && ctx_.aborted->load(std::memory_order_relaxed))
        return fail(braidInvalidUsage, "%s #%llu: aborted (braidCommAbort)", ctx_.what,
                    static_cast<unsigned long long>(ctx_.opCount));
      if (ctx_.revokedBy)
        if (const int by = ctx_.revokedBy->load(std::memory_order_relaxed); by >= 0)
          return fail(braidInvalidUsage,
                      "%s #%llu: the communicator was revoked (braidCommRevoke on rank %d)",
                      ctx_.what, static_cast<unsigned long long>(ctx_.opCount), by);
      if (idle == spins) {
        idleSince = lastLivenessCheck = Clock::now();
        ctx_.traceCall.waited(trace::nowNs());  // the record's times: trace.h
      }
      if (idle >= spins && idle < yieldsEnd) {
        sched_yield();
        // Yields while the peer answers soon; one that is slow to (its own work, its own
        // wait) is slept on instead of polled.
        if (Clock::now() - idleSince > kYieldFor) yieldsEnd = idle + 1;
      } else if (idle >= spins) {
        if (ctx_.doorbell) {
          uint32_t seen = ctx_.doorbell->read();
          ctx_.doorbell->sleeping.store(1, std::memory_order_seq_cst);
          bool progressed = false;
          braidResult_t res = pass(&progressed);
          if (res == braidSuccess && !progressed) ctx_.doorbell->wait(seen, 10000);
          ctx_.doorbell->sleeping.store(0, std::memory_order_relaxed);
          BRAID_TRY(res);
          if (progressed) return braidSuccess;
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        Clock::time_point now = Clock::now();
        double waited = std::chrono::duration<double>(now - idleSince).count();
        // A peer in another call that sends this rank nothing (mismatched roots): found by
        // asking it, well within the timeout.
        if (ctx_.peerCheck && ctx_.kind > 0 && (waited > nextPeerCheck || waited > timeout)) {
          nextPeerCheck = waited + kPeerCheckSec;
          const int peer = waitedPeer();
          if (peer >= 0 && ctx_.peerCheck->check(peer) != braidSuccess) {
            if (ctx_.blamed) *ctx_.blamed = peer;
            return fail(braidInvalidUsage, "%s #%llu: %s", ctx_.what,
                        static_cast<unsigned long long>(ctx_.opCount),
                        withoutRankPrefix(lastError(), ctx_.rank));
          }
        }
        if (waited > timeout) return timeoutError(waited);
        if (stallWarn > 0 && waited > stallWarn && !stallWarned_) {
          stallWarned_ = true;  // once per call
          char what[160] = "";
          // A collective's arguments (send/recv groups have no count of their own), its op
          // where it has one.
          if (ctx_.count > 0 && !ctx_.checkExchange) {
            const bool reducing =
                ctx_.kind > 0 && isReducing(static_cast<Collective>(ctx_.kind - 1));
            std::snprintf(what, sizeof(what), " (count %zu of %s%s%s)", ctx_.count,
                          braidTypeName(ctx_.dtype), reducing ? ", op " : "",
                          reducing ? braidOpName(ctx_.op) : "");
          }
          BRAID_WARN("STALL", "%s #%llu%s has made no progress for %s (BRAID_STALL_WARN): %s",
                     ctx_.what, static_cast<unsigned long long>(ctx_.opCount), what,
                     secondsText(waited).c_str(), waitingFor().c_str());
          if (ctx_.stall) {
            StallReport mine;
            mine.rank = ctx_.rank;
            mine.seq = ctx_.opCount;
            mine.kind = ctx_.kind;
            mine.bytes = ctx_.checkExchange ? 0 : ctx_.count * ctx_.elemSize;  // 0: unsaid
            mine.waitingOn = waitedPeer();
            // Rank 0 gathers the others' reports for a while before its summary: long enough
            // for ranks that entered the call with it, short beside BRAID_STALL_WARN.
            ctx_.stall->stalled(mine, std::clamp(stallWarn / 2, 0.2, 5.0));
          }
        }
        if (stallWarned_ && ctx_.stall) ctx_.stall->poll();
        // A peer process on this host that has exited will never answer: say so now rather
        // than at the timeout.
        if (now - lastLivenessCheck > std::chrono::milliseconds(100)) {
          lastLivenessCheck = now;
          ctx_.traceCall.waitingOn(waitedPeer());  // what a dump says of this call now
          int lost = lostPeer();
          if (lost >= 0) {
            // The peer may have published its last pieces just before it went: take them
            // first (its loss is marked after them, so this pass sees them).
            bool moved = false;
            BRAID_TRY(pass(&moved));
            if (moved) return braidSuccess;
            return lostPeerError(lost);
          }
        }
      }
      bool progressed = false;
      BRAID_TRY(pass(&progressed));
      if (progressed) return braidSuccess;
    }
  }

 private:
  braidResult_t pass(bool* progressed) {
    for (size_t q = 0; q < plan_.sends.size(); ++q) BRAID_TRY(progressSend(q, progressed));
    for (size_t q = 0; q < plan_.recvs.size(); ++q) BRAID_TRY(progressRecv(q, progressed));
    BRAID_TRY(progressLocal(progressed));
    return braidSuccess;
  }

  // A piece's 64-bit tag: the call's fingerprint above the per-peer message number, so a
  // peer in a different call is told apart from one that is merely out of step.
  uint64_t frame(uint64_t messageSeq) const {
    return static_cast<uint64_t>(ctx_.callTag) << 32 | (messageSeq & 0xffffffffu);
  }

  bool ready(const Step& s) const {
    for (int32_t d : s.deps)
      if (d >= 0 && !plan_.done[d]) return false;
    return true;
  }
  char* addr(const BufRef& b) const {
    return bases_[static_cast<int>(b.buf)] + b.offset * ctx_.elemSize;
  }
  void finish(int32_t idx) {
    plan_.done[idx] = 1;
    --remaining_;
    ctx_.traceCall.progress(static_cast<uint32_t>(nsteps_ - remaining_));
    if (steps_) steps_[idx].end = trace::nowNs();
  }

  // BRAID_TRACE=steps (steps_ set): each step's kind, peer and bytes, then the time spent on it.
  void describeSteps() {
    for (size_t i = 0; i < nsteps_; ++i) {
      const Step& s = plan_.schedule.steps[i];
      steps_[i].kind = static_cast<uint32_t>(s.kind);
      steps_[i].peer = s.peer;
      steps_[i].bytes = s.count * ctx_.elemSize;
    }
  }
  // Runs work (a copy or a reduction of step idx) and adds its time to the step's `field`.
  template <typename Work>
  braidResult_t timed(int32_t idx, uint64_t trace::StepTimes::*field, Work&& work) {
    if (!steps_) return work();
    const uint64_t t0 = trace::nowNs();
    if (!steps_[idx].start) steps_[idx].start = t0;
    const braidResult_t res = work();
    const uint64_t spent = trace::nowNs() - t0;
    steps_[idx].*field += spent;
    busy_ += spent;
    return res;
  }
  // A wait, charged to the step at the head of what this rank waits on (less the copies and
  // reductions the wait's own passes made, which are charged to their steps).
  braidResult_t timedWait() {
    int32_t idx = -1;
    const Stuck s = stuck();
    if (s.recvQueue >= 0) {
      const auto q = static_cast<size_t>(s.recvQueue);
      idx = plan_.recvs[q].steps[recvCur_[q].index];
    } else if (s.sendQueue >= 0) {
      const auto q = static_cast<size_t>(s.sendQueue);
      const std::vector<int32_t>& queued = plan_.sends[q].steps;
      idx = queued[std::min(sendCur_[q].retired, queued.size() - 1)];
    }
    const uint64_t t0 = trace::nowNs(), busy0 = busy_;
    if (idx >= 0 && !steps_[idx].start) steps_[idx].start = t0;  // before the wait's own passes
    const braidResult_t res = waitForProgress();
    if (idx >= 0) steps_[idx].wait += trace::nowNs() - t0 - (busy_ - busy0);
    return res;
  }

  braidResult_t progressSend(size_t q, bool* progressedOut) {
    Plan::Queue& queue = plan_.sends[q];
    Cursor& cur = sendCur_[q];
    Connection* conn = ctx_.connections[queue.peer];
    bool progressed = false;
    size_t copied = 0;
    while (cur.index < queue.steps.size() && copied < kPassBytes) {
      int32_t idx = queue.steps[cur.index];
      const Step& s = plan_.schedule.steps[idx];
      if (!ready(s)) break;
      const size_t total = s.count * ctx_.elemSize;
      const char* src = addr(s.src);
      const SendKind kind =
          conn->sendKind({src, total, Memory::kDevice, ctx_.outgrowsCache, cur.bytesDone > 0});
      if (kind != SendKind::kCopy) {
        // The far end (the network proxy, or a receiver that pulls, maps or opens) reads
        // straight from src; the step finishes when it is done with it.
        uint64_t ticket = 0;
        while (cur.bytesDone < total) {
          size_t n = std::min(conn->maxPiece(), total - cur.bytesDone);
          Sent sent;
          BRAID_TRY(timed(idx, &trace::StepTimes::copy, [&] {
            return conn->send({src + cur.bytesDone, n, frame(ctx_.sendSeq[queue.peer]), kind},
                              &sent);
          }));
          if (!sent.sent) break;
          ticket = sent.ticket;
          cur.bytesDone += n;
          progressed = true;
        }
        if (cur.bytesDone < total) break;
        queue.tickets[cur.index] = ticket;
      } else {
        // Device memory goes into the connection's host memory on the device's own stream.
        Sent sent;
        BRAID_TRY(timed(idx, &trace::StepTimes::copy, [&] {
          return conn->send({src + cur.bytesDone, total - cur.bytesDone,
                             frame(ctx_.sendSeq[queue.peer]), SendKind::kCopy, Memory::kStage},
                            &sent);
        }));
        if (!sent.sent) break;  // no free slot (a barrier's buffers are null, and its pieces empty)
        const size_t n = sent.taken;
        cur.bytesDone += n;
        copied += n;
        progressed = true;
        if (cur.bytesDone < total) {
          if (copied >= kPassBytes) break;
          continue;
        }
        queue.tickets[cur.index] = Plan::kCopied;
      }
      ++ctx_.sendSeq[queue.peer];
      cur.bytesDone = 0;
      ++cur.index;
    }
    // Steps finish in queue order: copied ones at once, in-place ones once retired.
    while (cur.retired < cur.index) {
      uint64_t t = queue.tickets[cur.retired];
      if (t != Plan::kCopied && !conn->retired(t)) break;
      finish(queue.steps[cur.retired]);
      ++cur.retired;
      progressed = true;
    }
    *progressedOut |= progressed;
    return braidSuccess;
  }

  braidResult_t progressRecv(size_t q, bool* progressed) {
    const Plan::Queue& queue = plan_.recvs[q];
    Cursor& cur = recvCur_[q];
    Connection* conn = ctx_.connections[queue.peer];
    size_t moved = 0;
    while (cur.index < queue.steps.size() && moved < kPassBytes) {
      int32_t idx = queue.steps[cur.index];
      const Step& s = plan_.schedule.steps[idx];
      if (!ready(s)) break;
      RecvPiece piece;
      if (!conn->recv(&piece)) break;
      const size_t bytes = piece.bytes;
      const uint64_t seq = piece.seq;
      size_t total = s.count * ctx_.elemSize;
      const uint64_t want = frame(ctx_.recvSeq[queue.peer]);
      // A peer in another call: the one to name, here and in the cause every rank reports.
      if (seq != want && ctx_.blamed) *ctx_.blamed = queue.peer;
      if (seq != want && static_cast<uint32_t>(seq) == static_cast<uint32_t>(want) &&
          ctx_.checkExchange)  // its count, datatype and op are the exchange's, not the user's
        return fail(braidInvalidUsage,
                    "%s #%llu: rank %d is in a different call at this point (not in this "
                    "exchange): every rank must make the same calls in the same order",
                    ctx_.what, static_cast<unsigned long long>(ctx_.opCount), queue.peer);
      if (seq != want && static_cast<uint32_t>(seq) == static_cast<uint32_t>(want)) {
        const bool reducing = ctx_.kind > 0 && isReducing(static_cast<Collective>(ctx_.kind - 1));
        return fail(braidInvalidUsage,
                    "%s #%llu: rank %d is in a different call at this point (another collective, "
                    "count, datatype, op, root, algorithm or call number); this rank called %s "
                    "with count %zu, datatype %s%s%s: every rank must make the same calls in the "
                    "same order",
                    ctx_.what, static_cast<unsigned long long>(ctx_.opCount), queue.peer, ctx_.what,
                    ctx_.count, braidTypeName(ctx_.dtype), reducing ? ", op " : "",
                    reducing ? braidOpName(ctx_.op) : "");
      }
      if (seq != want || bytes > total - cur.bytesDone || bytes % ctx_.elemSize != 0)
        return fail(braidInvalidUsage,
                    "%s #%llu: rank %d sent a piece of %zu bytes as message %llu, but this rank "
                    "expects message %llu with %zu bytes left: the ranks called different "
                    "collectives or counts",
                    ctx_.what, static_cast<unsigned long long>(ctx_.opCount), queue.peer, bytes,
                    static_cast<unsigned long long>(seq & 0xffffffffu),
                    static_cast<unsigned long long>(ctx_.recvSeq[queue.peer] & 0xffffffffu),
                    total - cur.bytesDone);
      char* dst = addr(s.dst) + cur.bytesDone;
      // A plain receive has no source (a non-root's broadcast send buffer may be null).
      const char* src = s.kind == StepKind::kRecv ? nullptr : addr(s.src) + cur.bytesDone;
      const char* data = static_cast<const char*>(piece.data);
      BRAID_TRY(timed(
          idx, s.kind == StepKind::kRecv ? &trace::StepTimes::copy : &trace::StepTimes::reduce,
          [&]() -> braidResult_t {
            if (piece.where == PieceAt::kRemote) return pull(conn, s, dst, src, bytes, queue.peer);
            if (!Memory::kDevice && piece.where == PieceAt::kHere) {  // the host's fast path
              landOnHost(s, dst, src, data, bytes);
              return braidSuccess;
            }
            return combine(s, dst, src, data, bytes, piece.where == PieceAt::kDevice);
          }));
      conn->release();
      cur.bytesDone += bytes;
      moved += bytes;
      *progressed = true;
      if (cur.bytesDone == total) {
        ++ctx_.recvSeq[queue.peer];
        cur.bytesDone = 0;
        ++cur.index;
        finish(idx);
      }
    }
    return braidSuccess;
  }

  // A received piece of `bytes` at data (device memory if onDevice) lands at dst: copied for
  // a receive, reduced with src for a receive-reduce. Host pieces of a host call are copied or
  // reduced on this core; anything else goes through the device. A reduction runs where the
  // call's buffers are (Memory): a piece on the other side (from a peer that passed host
  // buffers) comes over first, in blocks.
  braidResult_t combine(const Step& s, char* dst, const char* src, const char* data, size_t bytes,
                        bool onDevice) {
    if (!Memory::kDevice && !onDevice) {
      landOnHost(s, dst, src, data, bytes);
      return braidSuccess;
    }
    const device::Runtime& rt = device::runtime();
    if (s.kind == StepKind::kRecv)
      return bytes ? rt.copyOnOwnStream(dst, data, bytes) : braidSuccess;
    if (onDevice == Memory::kDevice) return reduceHere(s, dst, src, data, bytes);
    char* block = nullptr;
    BRAID_TRY(Memory::foreignBlock(ctx_, plan_, kPullBlock, &block));
    for (size_t off = 0; off < bytes; off += kPullBlock) {
      const size_t n = std::min(kPullBlock, bytes - off);
      BRAID_TRY(rt.copyOnOwnStream(block, data + off, n));
      BRAID_TRY(reduceHere(s, dst + off, src + off, block, n));
    }
    return braidSuccess;
  }

  // combine() of a host piece in a host call: a copy or a reduction on this core. In a call
  // that outgrows the cache, a received piece and a reduction that no later step reads
  // (Plan::finalOutput; s is one of the plan's steps) go to memory with streaming stores.
  [[gnu::always_inline]] void landOnHost(const Step& s, char* dst, const char* src,
                                         const char* data, size_t bytes) {
    const bool stream = ctx_.streamStores && bytes >= kStreamMinBytes;
    if (s.kind == StepKind::kRecv) {
      if (stream)
        kernels::copyStreaming(dst, data, bytes);
      else if (bytes)
        std::memcpy(dst, data, bytes);
    } else if (stream && plan_.finalOutput[&s - plan_.schedule.steps.data()]) {
      kernels::reduceStreaming(ctx_.dtype, ctx_.op, dst, src, data, bytes / ctx_.elemSize,
                               s.divisor);
    } else {
      kernels::reduce(ctx_.dtype, ctx_.op, dst, src, data, bytes / ctx_.elemSize, s.divisor);
    }
  }

  // dst = op(src, data) where the call's buffers are; every operand is there.
  braidResult_t reduceHere(const Step& s, char* dst, const char* src, const char* data,
                           size_t bytes) {
    return Memory::reduce(ctx_, dst, src, data, bytes / ctx_.elemSize, s.divisor);
  }

  // A piece that lies in the sending process's memory (single copy): a receive into host
  // memory reads it straight into place; anything else reads it in cache-sized blocks of
  // host memory and lands each (combine).
  braidResult_t pull(Connection* conn, const Step& s, char* dst, const char* src, size_t bytes,
                     int peer) {
    int err = 0;
    if (s.kind == StepKind::kRecv && !Memory::kDevice) {
      err = conn->pull(dst, 0, bytes);
    } else {
      std::vector<char>& block = Memory::pullBlock(plan_);
      if (block.size() < kPullBlock) block.resize(kPullBlock);
      for (size_t off = 0; off < bytes && !err; off += kPullBlock) {
        const size_t n = std::min(kPullBlock, bytes - off);
        err = conn->pull(block.data(), off, n);
        if (!err)
          BRAID_TRY(combine(s, dst + off, src ? src + off : nullptr, block.data(), n, false));
      }
    }
    if (!err) return braidSuccess;
    if (err == ESRCH && ctx_.peerPids) return deadPeer(peer);
    return fail(braidSystemError,
                "%s #%llu: reading rank %d's piece from its memory (process_vm_readv, single "
                "copy) failed: %s",
                ctx_.what, static_cast<unsigned long long>(ctx_.opCount), peer, strerror(err));
  }

  braidResult_t progressLocal(bool* progressed) {
    while (localCur_ < plan_.locals.size()) {
      int32_t idx = plan_.locals[localCur_];
      const Step& s = plan_.schedule.steps[idx];
      if (!ready(s)) break;
      char* dst = addr(s.dst);
      const char* src = addr(s.src);
      const size_t bytes = s.count * ctx_.elemSize;
      if (s.divisor > 1)
        BRAID_TRY(timed(idx, &trace::StepTimes::reduce,
                        [&] { return Memory::divide(ctx_, dst, src, s.count, s.divisor); }));
      else if (dst != src)
        BRAID_TRY(
            timed(idx, &trace::StepTimes::copy, [&] { return Memory::copy(dst, src, bytes); }));
      ++localCur_;
      finish(idx);
      *progressed = true;
    }
    return braidSuccess;
  }

  char** bases_;
  trace::StepTimes* const steps_;  // BRAID_TRACE=steps' table, one per step; null: not timed
  const size_t nsteps_;
  uint64_t busy_ = 0;  // ns copying and reducing so far (timed), for timedWait
  size_t localCur_ = 0;
  size_t remaining_ = 0;
  bool stallWarned_ = false;
  int restoreDevice_ = -1;  // the caller's current device, to set back (-1: unchanged)
};

}  // namespace

braidResult_t execute(Plan* plan, const ExecContext& ctx) {
  if (ctx.device) {
    Run<DeviceMemory> run(plan, ctx);
    return run.go();
  }
  Run<HostMemory> run(plan, ctx);
  return run.go();
}

}  // namespace braid
