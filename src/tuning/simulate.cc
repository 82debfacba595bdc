// The schedule simulator (simulate.h): a discrete-event run of every rank's schedule against
// a Fabric.
//
// The model.
//   Schedules. Every rank's schedule is built with the algorithm's build function, as the
//   executor would (CollArgs from the call with rank, nranks, the fabric's hostOf when it
//   has more than one host, its ring, and pieceElems = chunk_bytes / elemSize, at least 1).
//   The steps fall into the executor's queues: one per peer and direction, one for local
//   steps. The k-th receive by rank p from rank r matches the k-th send by r to p, as the
//   transports deliver messages in posting order.
//   Readiness. A step is ready when its dependencies have finished and so has the step
//   before it in its queue; its ready time is the latest of those finish times.
//   Resources. Each rank has one progress engine: the executor is one thread per rank that
//   works its queues one step (one piece) at a time (core/executor.cc), so everything that
//   thread does for a step holds the engine, and a rank's steps take it one after another.
//   Each rank also has one intra-host send port and one receive port (bandwidth
//   fabric.intra.bw_gbs each); each host has nicsPerHost NICs, each with a transmit and a
//   receive side of fabric.inter.bw_gbs. A rank uses NIC (local index % nicsPerHost), its
//   local index being its place among its host's ranks in rank order. Every resource is
//   taken first come, first served: a step asks for what it needs when it can run (event
//   time; at equal times finished steps release their successors first, and ties go by
//   step id), and waits for the latest of their free times; a send that finds its ports or
//   NICs busy leaves the engine to the rank's other steps and asks again when they free.
//   Send of b bytes from r to p. Within a host it holds r's send port and p's receive
//   port; between hosts the transmit side of r's NIC and the receive side of p's NIC; and
//   r's engine. start = max(ready, each one's free time); the port or NIC stays busy until
//   start + b / bw (a NIC inter_step_overhead_us longer: its proxy's per-message work); the
//   data arrives at start + latency + b / bw (the hop's latency). The
//   send finishes at start + b / bw + step_overhead_us. Within a host the sending thread
//   itself copies the data into the receiver's FIFO (transport/fifo.cc, shm.cc), so the
//   engine is held for the whole b / bw + step_overhead_us; towards another host the
//   network proxy moves the bytes, and the engine is held for step_overhead_us only (not
//   modelled: the copy of a message under 32 KiB into the proxy's FIFO, and such a send
//   finishing once copied rather than once sent).
//   Receive (and recv-reduce) starts at max(ready, arrival, engine free) and holds the
//   engine until it finishes, step_overhead_us later, plus b / reduce_gbs for recv-reduce
//   (the receiving thread reduces from the FIFO). Its copy out of the FIFO runs alongside
//   the sender's copy in, within the transfer. A copy holds the engine for b / copy_gbs +
//   step_overhead_us from max(ready, engine free). A send within a host also holds the
//   engine intra_send_overhead_us (waking the receiver), and finishes that much later.
//   On GPU fabrics (engine_moves_data false) the kernel's warps copy and reduce alongside
//   each other: steps hold the engine for step_overhead_us only, and a receive's reduction
//   or a copy delays only the step's own finish.
//   Step bytes are count * elemSize; GB/s are 1e9 bytes/s, times are microseconds.
//   Connections are bounded as the transports' FIFOs are: with fabric.fifo_slots > 0 a
//   connection holds that many pieces, so a send waits until the receive fifo_slots
//   messages earlier on its connection has finished (0: unbounded, sends never wait).
//   With fabric.host_bw_gbs > 0, a host's memory system is one more resource: every
//   transfer within the host also holds it for b / host_bw_gbs (copies of all its ranks
//   share the host's cores and memory bandwidth). Not modelled: reductions competing for it,
//   a host with fewer cores than ranks (engines are independent), and a port or NIC shared
//   by flows in a fairer way than one after another.
// The run takes O(S log S) time for S steps in all: each step is readied, started and
// finished once (a send may ask again each time its ports free), through one priority queue
// of events.
//
// Outcomes. A step naming a peer outside the communicator, a dependency outside its
// schedule, a receive whose size differs from its matching send or a send nobody receives
// is an error; steps left when no event remains are a deadlock, reported at a rank, its
// step and what it waits for.
#include "tuning/simulate.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/verifier_program.h"

namespace braid::tuning {
namespace {

// printf into a std::string (the verifier's helper).
using verify::format;

SimResult failure(std::string why) {
  SimResult r;
  r.error = std::move(why);
  return r;
}

// Microseconds to move `bytes` at `gbs` GB/s.
double transferUs(double bytes, double gbs) { return bytes / (gbs * 1e3); }

enum State : uint8_t { kWaiting, kReady, kStarted, kDone };

// One step as the simulation holds it; indices are global step ids.
struct SimStep {
  double bytes;
  int32_t rank;
  int32_t peer;   // -1 for a copy
  int32_t next;   // the next step of its queue, -1 none
  int32_t match;  // send: its receive; receive: its send; -1 none
  int32_t waits;  // unfinished dependencies and queue predecessor
  StepKind kind;
  State state;
  int16_t join = -1;  // >= 0: the zero-cost step marking this rank's end of call `join`
};

class Simulation {
 public:
  Simulation(const Fabric& f, size_t elemSize) : f_(f), elemSize_(elemSize) {}

  // Builds and links every rank's schedule, `calls` times back to back (a rank starts call
  // k+1 once all its steps of call k are done, as the executor returns from a call only
  // then; messages of later calls queue behind earlier ones); "" or the error.
  std::string build(const AlgorithmInfo& algo, const std::vector<CollArgs>& args, int calls);
  // Plays the schedules; "" or the error.
  std::string run();

  const SimResult& result() const { return res_; }
  // Time per call once calls follow each other: the whole run over the calls. (Not from the
  // end of the first call: a later call's traffic may delay the first call's last steps, so
  // that end says little.)
  double steadyCallUs() const { return res_.time_us / static_cast<double>(callEnd_.size() + 1); }

 private:
  bool isSend(int32_t g) const { return steps_[g].kind == StepKind::kSend; }
  bool isRecv(int32_t g) const {
    return steps_[g].kind == StepKind::kRecv || steps_[g].kind == StepKind::kRecvReduce;
  }
  int local(int32_t g) const { return static_cast<int>(g - stepBase_[steps_[g].rank]); }
  std::string describe(int32_t g) const;
  // The 1-based number of receive g among its rank's receives from the same peer.
  int messageIndex(int32_t g) const;

  void ready(int32_t g, double t);
  // Sends g once its ports or NICs and its rank's engine are free, or asks again later.
  void startSend(int32_t g, double t);
  // Starts receive g once it is ready and its message has arrived.
  void tryFinishRecv(int32_t g);
  void startRecv(int32_t g, double t);
  // Takes g's rank's engine at t or when it frees, for `hold` us; returns the start.
  double takeEngine(int32_t g, double t, double hold);
  void finish(int32_t g, double t) { events_.push({t, kFinish, t, g}); }
  // Asks again at t for what g needs; among asks at one time, the one asking longest goes
  // first (first come, first served), then ties by step id.
  void retry(int32_t g, double t) { events_.push({t, kRetry, askedAt_[g], g}); }
  std::string deadlock() const;

  const Fabric& f_;
  const size_t elemSize_;
  SimResult res_;
  std::vector<SimStep> steps_;
  std::vector<int64_t> stepBase_;
  std::vector<int64_t> revBegin_;
  std::vector<int32_t> rev_;     // who depends on each step: rev_[revBegin_[g] ..]
  std::vector<double> readyAt_;  // receive: when it became ready
  std::vector<double> arrival_;  // receive: when its message arrives; < 0 unknown
  std::vector<int> localIndex_;
  // Resource free times: progress engine, intra send / receive port per rank, NIC TX / RX
  // per host and NIC, memory system per host.
  std::vector<double> engine_, portTx_, portRx_, nicTx_, nicRx_, hostMem_;
  std::vector<double> callEnd_;  // per call but the last: when its last rank finished it
  double now_ = 0;               // the time of the event being played
  // At equal times a step's finish (which readies its successors) comes before a step's
  // retry, so successors ask for resources in the same round; retries then go by when
  // their steps first asked, then by step id.
  enum EventKind : uint8_t { kFinish, kRetry };
  using Event = std::tuple<double, EventKind, double, int32_t>;  // time, kind, asked at, step
  std::vector<double> askedAt_;  // when a step became ready (first asked for resources)
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
};

std::string Simulation::describe(int32_t g) const {
  const SimStep& s = steps_[g];
  const std::string head = format("rank %d step %d", s.rank, local(g));
  const size_t count = static_cast<size_t>(s.bytes / static_cast<double>(elemSize_));
  switch (s.kind) {
    case StepKind::kSend:
      return head + format(" (send %zu elements to rank %d)", count, s.peer);
    case StepKind::kRecv:
    case StepKind::kRecvReduce:
      return head + format(" (%s %zu elements from rank %d)", stepKindName(s.kind), count, s.peer);
    case StepKind::kCopy:
      return head + format(" (copy %zu elements)", count);
  }
  return head;
}

int Simulation::messageIndex(int32_t g) const {
  int k = 0;
  for (int64_t x = stepBase_[steps_[g].rank]; x <= g; ++x)
    if (isRecv(static_cast<int32_t>(x)) && steps_[x].peer == steps_[g].peer) ++k;
  return k;
}

std::string Simulation::build(const AlgorithmInfo& algo, const std::vector<CollArgs>& args,
                              int calls) {
  callEnd_.assign(std::max(calls - 1, 0), 0);
  const int n = static_cast<int>(args.size());
  stepBase_.assign(n + 1, 0);
  std::vector<int32_t> lastSend(n, -1), lastRecv(n, -1);
  std::vector<int32_t> depOf;  // (dependency, dependent) pairs, flattened
  // Sends and receives by connection, key sender * n + receiver, in posting order.
  std::vector<std::pair<int64_t, int32_t>> sends, recvs;
  Schedule sched;
  for (int r = 0; r < n; ++r) {
    algo.build(args[r], &sched);
    stepBase_[r] = static_cast<int64_t>(steps_.size());
    const int nsteps = static_cast<int>(sched.steps.size());
    if (stepBase_[r] + static_cast<int64_t>(nsteps + 1) * calls >=
        std::numeric_limits<int32_t>::max())
      return "too many steps in all to simulate";
    int32_t lastLocal = -1, join = -1;
    std::vector<int> touched;
    for (int c = 0; c < calls; ++c) {
      const int64_t base = static_cast<int64_t>(steps_.size());
      for (int i = 0; i < nsteps; ++i) {
        const Step& s = sched.steps[i];
        const int32_t g = static_cast<int32_t>(base + i);
        const bool comm = s.kind != StepKind::kCopy;
        if (comm && s.kind != StepKind::kSend && s.kind != StepKind::kRecv &&
            s.kind != StepKind::kRecvReduce)
          return format("rank %d step %d has an unknown kind %d", r, i, static_cast<int>(s.kind));
        if (comm && (s.peer < 0 || s.peer >= n || s.peer == r))
          return format("rank %d step %d (%s) names peer %d: not another rank of %d", r, i,
                        stepKindName(s.kind), s.peer, n);
        SimStep st;
        st.bytes = static_cast<double>(s.count) * static_cast<double>(elemSize_);
        st.rank = r;
        st.peer = comm ? s.peer : -1;
        st.next = st.match = -1;
        st.waits = 0;
        st.kind = s.kind;
        st.state = kWaiting;
        for (int32_t d : s.deps) {
          if (d == -1) continue;
          if (d < 0 || d >= nsteps || d == i)
            return format(
                "rank %d step %d depends on step %d: not another step of its schedule "
                "(%d steps)",
                r, i, d, nsteps);
          depOf.push_back(static_cast<int32_t>(base + d));
          depOf.push_back(g);
          ++st.waits;
        }
        if (join >= 0) {  // the call before must be over on this rank
          depOf.push_back(join);
          depOf.push_back(g);
          ++st.waits;
        }
        int32_t* last = !comm                       ? &lastLocal
                        : s.kind == StepKind::kSend ? &lastSend[s.peer]
                                                    : &lastRecv[s.peer];
        if (*last >= 0) {
          steps_[*last].next = g;
          ++st.waits;
        } else if (comm) {
          touched.push_back(s.peer);
        }
        *last = g;
        steps_.push_back(st);
        if (s.kind == StepKind::kSend)
          sends.push_back({static_cast<int64_t>(r) * n + s.peer, g});
        else if (comm)
          recvs.push_back({static_cast<int64_t>(s.peer) * n + r, g});
      }
      if (c + 1 == calls) break;
      // This rank's end of call c: waits for every step of it (none: at once).
      SimStep end;
      end.bytes = 0;
      end.rank = r;
      end.peer = end.next = end.match = -1;
      end.waits = nsteps;
      end.kind = StepKind::kCopy;
      end.state = kWaiting;
      end.join = static_cast<int16_t>(c);
      join = static_cast<int32_t>(steps_.size());
      for (int i = 0; i < nsteps; ++i) {
        depOf.push_back(static_cast<int32_t>(base + i));
        depOf.push_back(join);
      }
      steps_.push_back(end);
    }
    for (int p : touched) lastSend[p] = lastRecv[p] = -1;
  }
  stepBase_[n] = static_cast<int64_t>(steps_.size());

  // The k-th send on a connection meets its k-th receive: sorted by connection, then step
  // id, which is posting order within a rank.
  std::string mismatch;
  verify::matchInOrder(&sends, &recvs, [&](int32_t s, int32_t v) {
    if (steps_[s].bytes != steps_[v].bytes) {
      mismatch = describe(v) + " matches " + describe(s) + ", but their sizes differ";
      return false;
    }
    steps_[s].match = v;
    steps_[v].match = s;
    return true;
  });
  if (!mismatch.empty()) return mismatch;
  // Bounded connections: a connection holds fifo_slots pieces, so the k-th send waits until
  // the receive of send k - slots has taken its piece out (sends are sorted by connection,
  // then posting order).
  if (f_.fifo_slots > 0) {
    const size_t slots = static_cast<size_t>(f_.fifo_slots);
    for (size_t i = slots; i < sends.size(); ++i) {
      if (sends[i - slots].first != sends[i].first) continue;
      const int32_t earlier = steps_[sends[i - slots].second].match;
      if (earlier < 0) continue;
      depOf.push_back(earlier);
      depOf.push_back(sends[i].second);
      ++steps_[sends[i].second].waits;
    }
  }

  const size_t total = steps_.size();
  revBegin_.assign(total + 1, 0);
  for (size_t k = 0; k < depOf.size(); k += 2) ++revBegin_[depOf[k] + 1];
  for (size_t g = 0; g < total; ++g) revBegin_[g + 1] += revBegin_[g];
  rev_.resize(depOf.size() / 2);
  std::vector<int64_t> fill(revBegin_.begin(), revBegin_.end() - 1);
  for (size_t k = 0; k < depOf.size(); k += 2) rev_[fill[depOf[k]]++] = depOf[k + 1];
  return "";
}

double Simulation::takeEngine(int32_t g, double t, double hold) {
  double& free = engine_[steps_[g].rank];
  const double start = std::max(t, free);
  free = start + hold;
  return start;
}

void Simulation::startSend(int32_t g, double t) {
  SimStep& s = steps_[g];
  const int r = s.rank, p = s.peer;
  const bool intra = f_.hostOf[r] == f_.hostOf[p];
  double* a;
  double* b;
  const LinkCost* link;
  if (intra) {
    a = &portTx_[r];
    b = &portRx_[p];
    link = &f_.intra;
  } else {
    const int nics = std::max(1, f_.nicsPerHost);
    a = &nicTx_[static_cast<size_t>(f_.hostOf[r]) * nics + localIndex_[r] % nics];
    b = &nicRx_[static_cast<size_t>(f_.hostOf[p]) * nics + localIndex_[p] % nics];
    link = &f_.inter;
  }
  // Within a host the copies of all its ranks share the memory system (host_bw_gbs): the
  // transfer also holds the host's share of it, so concurrent copies slow each other down.
  double* mem = intra && f_.host_bw_gbs > 0 ? &hostMem_[f_.hostOf[r]] : nullptr;
  // A send starts only when its links and its engine are all free: while one is busy it
  // holds none of the others (the executor moves on to its other queues while a FIFO is
  // full), and asks again when the last of them frees.
  const double free = std::max({*a, *b, mem ? *mem : 0.0, engine_[r]});
  s.state = kReady;
  if (free > t) {
    retry(g, free);
    return;
  }
  const double x = transferUs(s.bytes, link->bw_gbs);
  // The sending thread copies into a peer's FIFO on this host (unless a GPU kernel's warps
  // move the data: engine_moves_data false); the proxy sends to other hosts, busy
  // inter_step_overhead_us a message besides the bytes.
  const double wake = intra ? f_.intra_send_overhead_us : 0;
  const double start =
      takeEngine(g, t, f_.step_overhead_us + wake + (intra && f_.engine_moves_data ? x : 0));
  (intra ? res_.intra_bytes : res_.net_bytes) += s.bytes;
  if (mem) *mem = start + transferUs(s.bytes, f_.host_bw_gbs);
  *a = *b = start + x + (intra ? 0 : f_.inter_step_overhead_us);
  s.state = kStarted;
  finish(g, start + x + f_.step_overhead_us + wake);
  if (s.match >= 0) {
    ++res_.messages;
    arrival_[s.match] = start + link->latency_us + x;
    tryFinishRecv(s.match);
  }
}

void Simulation::tryFinishRecv(int32_t g) {
  SimStep& s = steps_[g];
  if (s.state != kReady || arrival_[g] < 0) return;
  s.state = kStarted;
  const double t = std::max(readyAt_[g], arrival_[g]);
  // The engine is taken when the message is there, not reserved ahead of it.
  if (t > now_)
    retry(g, t);
  else
    startRecv(g, t);
}

void Simulation::startRecv(int32_t g, double t) {
  const SimStep& s = steps_[g];
  // The reduction holds the engine unless a GPU kernel's warps do it alongside.
  const double reduce = s.kind == StepKind::kRecvReduce ? transferUs(s.bytes, f_.reduce_gbs) : 0;
  const double hold = f_.step_overhead_us + (f_.engine_moves_data ? reduce : 0);
  finish(g, takeEngine(g, t, hold) + f_.step_overhead_us + reduce);
}

void Simulation::ready(int32_t g, double t) {
  SimStep& s = steps_[g];
  switch (s.kind) {
    case StepKind::kSend:
      // Through the event queue, so that sends already waiting for the same port or NIC
      // since earlier get it first.
      askedAt_[g] = t;
      steps_[g].state = kReady;
      retry(g, t);
      break;
    case StepKind::kRecv:
    case StepKind::kRecvReduce:
      s.state = kReady;
      readyAt_[g] = askedAt_[g] = t;
      tryFinishRecv(g);
      break;
    case StepKind::kCopy:
      s.state = kStarted;
      if (s.join >= 0) {
        callEnd_[s.join] = std::max(callEnd_[s.join], t);
        finish(g, t);
        break;
      }
      {
        const double copy = transferUs(s.bytes, f_.copy_gbs);
        const double hold = f_.step_overhead_us + (f_.engine_moves_data ? copy : 0);
        finish(g, takeEngine(g, t, hold) + f_.step_overhead_us + copy);
      }
      break;
  }
}

std::string Simulation::run() {
  const int n = f_.nranks();
  const int nics = std::max(1, f_.nicsPerHost);
  const size_t nh = static_cast<size_t>(f_.nhosts());
  localIndex_.assign(n, 0);
  std::vector<int> seen(nh, 0);
  for (int r = 0; r < n; ++r) localIndex_[r] = seen[f_.hostOf[r]]++;
  engine_.assign(n, 0);
  portTx_.assign(n, 0);
  portRx_.assign(n, 0);
  nicTx_.assign(nh * nics, 0);
  hostMem_.assign(nh, 0);
  nicRx_.assign(nh * nics, 0);
  const size_t total = steps_.size();
  readyAt_.assign(total, 0);
  askedAt_.assign(total, 0);
  arrival_.assign(total, -1);

  for (size_t g = 0; g < total; ++g)
    if (steps_[g].waits == 0) ready(static_cast<int32_t>(g), 0);
  size_t done = 0;
  while (!events_.empty()) {
    const auto [t, kind, asked, g] = events_.top();
    events_.pop();
    now_ = t;
    if (kind == kRetry) {
      if (isSend(g))
        startSend(g, t);
      else
        startRecv(g, t);
      continue;
    }
    steps_[g].state = kDone;
    ++done;
    res_.time_us = std::max(res_.time_us, t);
    const double at = t;  // a structured binding cannot be captured before C++20 (clang 14)
    auto release = [&](int32_t d) {
      if (--steps_[d].waits == 0) ready(d, at);
    };
    for (int64_t k = revBegin_[g]; k < revBegin_[g + 1]; ++k) release(rev_[k]);
    if (steps_[g].next >= 0) release(steps_[g].next);
  }
  res_.steps = done - callEnd_.size() * static_cast<size_t>(n);  // the call ends are no steps
  if (done < total) return deadlock();
  for (size_t g = 0; g < total; ++g)
    if (isSend(static_cast<int32_t>(g)) && steps_[g].match < 0)
      return describe(static_cast<int32_t>(g)) + " is never received: rank " +
             std::to_string(steps_[g].peer) + " posts fewer receives from rank " +
             std::to_string(steps_[g].rank);
  return "";
}

// Names the first stuck receive (a step ready but without its message) in rank order, or,
// where none is, the first unfinished step (its dependencies form a cycle).
std::string Simulation::deadlock() const {
  int32_t pick = -1;
  size_t left = 0;
  for (size_t g = 0; g < steps_.size(); ++g) {
    if (steps_[g].state == kDone) continue;
    ++left;
    if (pick < 0 || (steps_[pick].state != kReady && steps_[g].state == kReady))
      pick = static_cast<int32_t>(g);
  }
  const SimStep& s = steps_[pick];
  std::string why;
  if (s.state == kReady) {
    const int k = messageIndex(pick);
    if (s.match < 0)
      why = format("message %d from rank %d never comes: that rank posts fewer sends to rank %d", k,
                   s.peer, s.rank);
    else
      why = format("message %d from rank %d waits on %s, which never starts", k, s.peer,
                   describe(s.match).c_str());
  } else {
    why = "its dependencies or queue predecessor never finish";
  }
  const std::string what = s.kind == StepKind::kCopy
                               ? std::string("copy")
                               : format("%s from rank %d", stepKindName(s.kind), s.peer);
  return format("deadlock: rank %d waits at step %d (%s); %s; %zu steps never run", s.rank,
                local(pick), what.c_str(), why.c_str(), left);
}

// Whether v lists each of 0..n-1 once.
bool isPermutation(const std::vector<int>& v, int n) {
  if (static_cast<int>(v.size()) != n) return false;
  std::vector<char> seen(n, 0);
  for (int x : v) {
    if (x < 0 || x >= n || seen[x]) return false;
    seen[x] = 1;
  }
  return true;
}

// "" when the fabric can carry a simulation, else why not.
std::string checkFabric(const Fabric& f, int maxRanks) {
  const int n = f.nranks();
  if (n < 1) return "the fabric has no ranks";
  if (n > maxRanks)
    return format("%d ranks: the simulator plays at most %d (maxRanks); use the cost model", n,
                  maxRanks);
  int next = 0;
  for (int r = 0; r < n; ++r) {
    if (f.hostOf[r] < 0 || f.hostOf[r] > next)
      return format("rank %d's host %d: hosts must be numbered 0, 1, ... by first appearance", r,
                    f.hostOf[r]);
    next = std::max(next, f.hostOf[r] + 1);
  }
  if (!f.ring.empty() && !isPermutation(f.ring, n))
    return format("the ring (%zu entries) is not a permutation of the %d ranks", f.ring.size(), n);
  if (f.ranksPerHost() > 1 && !(f.intra.bw_gbs > 0)) return "intra-host bandwidth must be positive";
  if (f.nhosts() > 1 && !(f.inter.bw_gbs > 0)) return "inter-host bandwidth must be positive";
  if (!(f.reduce_gbs > 0) || !(f.copy_gbs > 0))
    return "reduction and copy throughput must be positive";
  return "";
}

}  // namespace

SimResult simulateSchedules(const AlgorithmInfo& algo, const CollArgs& proto, size_t elemSize,
                            const Fabric& fabric, int maxRanks, int calls) {
  if (elemSize == 0) return failure("element size 0");
  if (std::string why = checkFabric(fabric, maxRanks); !why.empty()) return failure(why);
  const int n = fabric.nranks();
  if (isRooted(algo.coll) && (proto.root < 0 || proto.root >= n))
    return failure(format("root %d is not a rank of %d", proto.root, n));
  const int* hostOf = fabric.nhosts() > 1 ? fabric.hostOf.data() : nullptr;
  std::vector<CollArgs> args(n, proto);
  for (int r = 0; r < n; ++r) {
    CollArgs& a = args[r];
    a.coll = algo.coll;
    a.rank = r;
    a.nranks = n;
    a.hostOf = hostOf;
    a.ring = fabric.ring.empty() ? nullptr : fabric.ring.data();
    a.pieceElems = std::max<size_t>(1, fabric.chunk_bytes / elemSize);
    if (const char* why = unsupportedReason(algo, a))
      return failure(format("%s %s on %d ranks: not supported on rank %d: %s", algo.name,
                            collectiveName(algo.coll), n, r, why));
  }
  Simulation sim(fabric, elemSize);
  std::string error = sim.build(algo, args, std::max(calls, 1));
  if (error.empty()) error = sim.run();
  SimResult res = sim.result();
  res.per_call_us = sim.steadyCallUs();
  res.ok = error.empty();
  if (!res.ok)
    res.error = format("%s %s on %d ranks: ", algo.name, collectiveName(algo.coll), n) + error;
  return res;
}

}  // namespace braid::tuning
