// The flight recorder: trace.h says what it keeps and when it writes; docs/trace.md gives the
// file's format, which braid-trace reads.
#include "core/trace.h"

#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <thread>

#include "algorithms/schedule.h"
#include "base/config.h"
#include "base/error.h"

namespace braid::trace {

namespace {

constexpr size_t kStepsPerCall = 32;  // the steps ring holds this many per call kept
constexpr size_t kErrorsKept = 64;
constexpr size_t kCommsKept = 256;
constexpr size_t kMaxStepRecords = size_t{1} << 20;  // 72 MiB of step records at most

// Every file name in use by a recorder of this process ("rank-3"), so a second recorder for the
// same rank number (two communicators made by init) writes a file of its own.
std::mutex& namesMu() {
  static auto* mu = new std::mutex;  // left alive: a dump may run while the process exits
  return *mu;
}
std::set<std::string>& namesTaken() {
  static auto* names = new std::set<std::string>;
  return *names;
}

void appendEscaped(std::string* out, const std::string& text) {
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      *out += buf;
    } else {
      out->push_back(c);
    }
  }
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  appendEscaped(&out, text);
  out += '"';
  return out;
}

template <typename T>
std::string jsonList(const std::vector<T>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    if constexpr (std::is_same_v<T, std::string>)
      out += quoted(items[i]);
    else
      out += std::to_string(items[i]);
  }
  return out + "]";
}

const char* stateName(uint32_t s) {
  static const char* const kNames[] = {"enqueued", "started", "done", "failed"};
  return s < 4 ? kNames[s] : "?";
}

// A whole copy of a slot, or false when it was never written or moved while read.
struct SlotCopy {
  uint64_t id, comm, seq, count, bytes, kindDtype, opRoot, tEnqueue, tStart, tEnd;
  int32_t peer, waitingOn;
  const char* algo;
  uint32_t state, step, steps;
};
bool readSlot(const Slot& s, SlotCopy* c) {
  const uint64_t v1 = s.version.load(std::memory_order_acquire);
  if (v1 & 1) return false;
  c->id = s.id.load(std::memory_order_relaxed);
  c->comm = s.comm.load(std::memory_order_relaxed);
  c->seq = s.seq.load(std::memory_order_relaxed);
  c->count = s.count.load(std::memory_order_relaxed);
  c->bytes = s.bytes.load(std::memory_order_relaxed);
  c->kindDtype = s.kindDtype.load(std::memory_order_relaxed);
  c->opRoot = s.opRoot.load(std::memory_order_relaxed);
  c->peer = s.peer.load(std::memory_order_relaxed);
  c->algo = s.algo.load(std::memory_order_relaxed);
  c->tEnqueue = s.tEnqueue.load(std::memory_order_relaxed);
  c->tStart = s.tStart.load(std::memory_order_relaxed);
  // The end before the state: a call read as done has its end time.
  c->state = s.state.load(std::memory_order_acquire);
  c->tEnd = s.tEnd.load(std::memory_order_relaxed);
  c->step = s.step.load(std::memory_order_relaxed);
  c->steps = s.steps.load(std::memory_order_relaxed);
  c->waitingOn = s.waitingOn.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return c->id != 0 && s.version.load(std::memory_order_relaxed) == v1;
}

uint64_t wallNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string hostName() {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  return host;
}

bool makeDirs(const std::string& path, std::string* why) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos < path.size() && path[pos] != '/') continue;
    const std::string part = path.substr(0, pos);
    if (mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      *why = "cannot make " + part + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

// The resolution of the calls' times: the coarse clock's, or 1 ns with steps.
uint64_t clockResolution(Mode mode) {
  if (mode == Mode::kSteps) return 1;
  timespec res{};
  clock_getres(CLOCK_MONOTONIC_COARSE, &res);
  return static_cast<uint64_t>(res.tv_sec) * 1000000000ull + static_cast<uint64_t>(res.tv_nsec);
}

}  // namespace

thread_local uint64_t t_enqueuedAt = 0;

uint64_t coarseNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string hashText(uint64_t hash) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

uint64_t hashBytes(const void* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ static_cast<const unsigned char*>(data)[i]) * 1099511628211ull;
  return h;
}

const char* callName(uint32_t kind) {
  static const char* const kCollectives[] = {
      "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
      "all_to_all", "all_to_allv",    "gather",     "scatter",   "barrier"};
  static_assert(std::size(kCollectives) == kNumCollectives);
  if (kind < std::size(kCollectives)) return kCollectives[kind];
  if (kind == kSend) return "send";
  if (kind == kRecv) return "recv";
  if (kind == kSendRecv) return "send_recv";
  return "?";
}

const char* stepKindName(uint32_t kind) {
  static const char* const kNames[] = {"send", "recv", "recv_reduce", "copy"};
  return kind < std::size(kNames) ? kNames[kind] : "?";
}

Mode Recorder::modeFromEnv() {
  const char* v = std::getenv("BRAID_TRACE");
  if (!v || !*v || std::strcmp(v, "calls") == 0 || std::strcmp(v, "1") == 0) return Mode::kCalls;
  if (std::strcmp(v, "steps") == 0) return Mode::kSteps;
  if (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0) return Mode::kOff;
  static std::once_flag warned;
  std::call_once(warned, [v] {
    BRAID_WARN("INIT", "BRAID_TRACE=%s is not off, calls or steps: recording calls", v);
  });
  return Mode::kCalls;
}

size_t Recorder::capacityFromEnv() {
  constexpr size_t kDefault = 2000;
  const char* v = std::getenv("BRAID_TRACE_BUFFER");
  if (!v || !*v) return kDefault;
  size_t n = 0;
  if (parseByteSize(v, &n) && n >= 1 && n <= kMaxCapacity) return n;
  static std::once_flag warned;
  std::call_once(warned, [v] {
    BRAID_WARN("INIT", "BRAID_TRACE_BUFFER=%s is not a count of calls in [1, 16M]: keeping %zu", v,
               kDefault);
  });
  return kDefault;
}

Recorder::Recorder(Mode mode, size_t capacity, int rank, uint64_t rootHash)
    : mode_(mode),
      rank_(rank),
      rootHash_(rootHash),
      slots_(new Slot[std::max<size_t>(1, capacity)]),
      capacity_(std::max<size_t>(1, capacity)),
      coarseNow_(coarseNowNs()) {
  if (mode_ == Mode::kSteps)
    steps_.resize(std::clamp<size_t>(capacity_ * kStepsPerCall, 4096, kMaxStepRecords));
}

Recorder::~Recorder() {
  if (file_.empty()) return;
  std::lock_guard<std::mutex> lock(namesMu());
  namesTaken().erase(file_);
}

uint64_t Recorder::startTime(uint64_t id, uint64_t bytes) {
  if (mode_ == Mode::kSteps) return nowNs();
  if (id % kClockEvery != 0 && bytes < kTimedBytes)
    return coarseNow_.load(std::memory_order_relaxed);
  const uint64_t now = coarseNowNs();
  coarseNow_.store(now, std::memory_order_relaxed);
  return now;
}

CallHandle Recorder::begin(const CallInfo& c, uint32_t steps) {
  // One communicator's calls hold its lock: a plain increment (the atomic add costs as much as
  // the rest of the record). Several communicators may record at once: the atomic add.
  const uint64_t id = shared_.load(std::memory_order_relaxed)
                          ? next_.fetch_add(1, std::memory_order_relaxed) + 1
                          : next_.load(std::memory_order_relaxed) + 1;
  if (!shared_.load(std::memory_order_relaxed)) next_.store(id, std::memory_order_relaxed);
  Slot& s = slots_[(id - 1) % capacity_];
  const uint64_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.id.store(id, std::memory_order_relaxed);
  s.comm.store(c.comm, std::memory_order_relaxed);
  s.seq.store(c.seq, std::memory_order_relaxed);
  s.count.store(c.count, std::memory_order_relaxed);
  s.bytes.store(c.bytes, std::memory_order_relaxed);
  s.kindDtype.store(uint64_t{c.kind} << 32 | static_cast<uint32_t>(c.dtype),
                    std::memory_order_relaxed);
  s.opRoot.store(static_cast<uint64_t>(static_cast<uint32_t>(c.op + 1)) << 32 |
                     static_cast<uint32_t>(c.root + 1),
                 std::memory_order_relaxed);
  s.peer.store(c.peer, std::memory_order_relaxed);
  s.algo.store(c.algo, std::memory_order_relaxed);
  const uint64_t now = startTime(id, c.bytes);
  s.tEnqueue.store(c.tEnqueue ? c.tEnqueue : t_enqueuedAt, std::memory_order_relaxed);
  s.tStart.store(now, std::memory_order_relaxed);
  s.tEnd.store(0, std::memory_order_relaxed);
  s.state.store(static_cast<uint32_t>(State::kStarted), std::memory_order_relaxed);
  s.step.store(0, std::memory_order_relaxed);
  s.steps.store(steps, std::memory_order_relaxed);
  s.waitingOn.store(-1, std::memory_order_relaxed);
  s.waited.store(0, std::memory_order_relaxed);
  s.version.store(v + 2, std::memory_order_release);
  return {&s, id, mode_ != Mode::kSteps};
}

void Recorder::end(const CallHandle& h, bool ok, const char* error, const StepTimes* steps,
                   size_t n) {
  if (!h.slot || h.slot->id.load(std::memory_order_relaxed) != h.id) return;  // overwritten
  if (!ok || n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      if (errors_.size() >= kErrorsKept) errors_.erase(errors_.begin());
      errors_.emplace_back(h.id, error ? error : "");
    }
    if (!steps_.empty()) {
      const uint64_t comm = h.slot->comm.load(std::memory_order_relaxed);
      const uint64_t seq = h.slot->seq.load(std::memory_order_relaxed);
      for (size_t i = 0; i < n; ++i) {
        steps_[stepsNext_] = StepRecord{h.id, comm, seq, static_cast<uint32_t>(i), steps[i]};
        stepsNext_ = (stepsNext_ + 1) % steps_.size();
        ++stepsRecorded_;
      }
    }
  }
  Slot& s = *h.slot;
  uint64_t end;
  if (mode_ == Mode::kSteps)
    end = nowNs();
  else if (!ok || s.waited.load(std::memory_order_relaxed) ||
           s.bytes.load(std::memory_order_relaxed) >= kTimedBytes)
    coarseNow_.store(end = coarseNowNs(), std::memory_order_relaxed);
  else
    end = s.tStart.load(std::memory_order_relaxed);
  // The coarse clock lags the precise one a waited call's start may have come from.
  s.tEnd.store(std::max(end, s.tStart.load(std::memory_order_relaxed)), std::memory_order_relaxed);
  h.slot->state.store(static_cast<uint32_t>(ok ? State::kDone : State::kFailed),
                      std::memory_order_release);
}

void Recorder::addComm(const CommInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  // The oldest after the first (the recorder's own communicator, the one a job's calls are on).
  if (comms_.size() >= kCommsKept) comms_.erase(comms_.begin() + 1);
  comms_.push_back(info);
  // A second communicator: its calls and the first one's may run at once from here on. Set
  // before any of its calls, under no call of the first (split, shrink and grow run on it).
  if (comms_.size() > 1) shared_.store(true, std::memory_order_relaxed);
}

std::string Recorder::json(const char* reason, const std::string& detail) const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t now = nowNs(), wall = wallNs();
  const uint64_t recorded = next_.load(std::memory_order_relaxed);
  std::string out = "{\"format\":\"braid-trace\",\"version\":1,\n";
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "\"header\":{\"job\":%s,\"rank\":%d,\"nranks\":%d,\"host\":%s,\"pid\":%d,"
                "\"reason\":%s,\"detail\":%s,\"time_ns\":%llu,\"wall_ns\":%llu,\"buffer\":%zu,"
                "\"recorded\":%llu,\"steps_mode\":%s,\"steps_recorded\":%llu,\"clock_ns\":%llu},\n",
                quoted(fileName().substr(0, fileName().find('/'))).c_str(), rank_,
                comms_.empty() ? 1 : comms_.front().nranks, quoted(hostName()).c_str(),
                static_cast<int>(getpid()), quoted(reason).c_str(), quoted(detail).c_str(),
                static_cast<unsigned long long>(now), static_cast<unsigned long long>(wall),
                capacity_, static_cast<unsigned long long>(recorded),
                mode_ == Mode::kSteps ? "true" : "false",
                static_cast<unsigned long long>(stepsRecorded_),
                static_cast<unsigned long long>(clockResolution(mode_)));
  out += buf;
  out += "\"comms\":[\n";
  for (size_t i = 0; i < comms_.size(); ++i) {
    const CommInfo& c = comms_[i];
    std::snprintf(buf, sizeof(buf),
                  "{\"comm\":\"%s\",\"rank\":%d,\"nranks\":%d,\"parent\":\"%s\",\"color\":%d,"
                  "\"key\":%d,\"world_ranks\":",
                  hashText(c.hash).c_str(), c.rank, c.nranks,
                  c.parent ? hashText(c.parent).c_str() : "", c.color, c.key);
    out += buf + jsonList(c.worldRanks) + ",\"hosts\":" + jsonList(c.hosts) + "}";
    out += i + 1 < comms_.size() ? ",\n" : "\n";
  }
  out += "],\n\"calls\":[\n";
  // Oldest first: the slots after the newest, then up to it.
  bool first = true;
  const uint64_t lo = recorded > capacity_ ? recorded - capacity_ : 0;
  for (uint64_t id = lo + 1; id <= recorded; ++id) {
    SlotCopy c;
    if (!readSlot(slots_[(id - 1) % capacity_], &c) || c.id != id) continue;
    const uint32_t kind = static_cast<uint32_t>(c.kindDtype >> 32);
    const auto dtype = static_cast<braidDataType_t>(static_cast<uint32_t>(c.kindDtype));
    const int op = static_cast<int>(c.opRoot >> 32) - 1;
    const int root = static_cast<int>(static_cast<uint32_t>(c.opRoot)) - 1;
    std::string error;
    for (const auto& [eid, text] : errors_)
      if (eid == id) error = text;
    std::snprintf(buf, sizeof(buf),
                  "%s{\"id\":%llu,\"comm\":\"%s\",\"seq\":%llu,\"call\":\"%s\",\"dtype\":\"%s\","
                  "\"count\":%llu,\"bytes\":%llu,\"root\":%d,\"peer\":%d,\"op\":\"%s\","
                  "\"algo\":\"%s\",\"state\":\"%s\",\"step\":%u,\"steps\":%u,"
                  "\"t_enqueue_ns\":%llu,\"t_start_ns\":%llu,\"t_end_ns\":%llu,"
                  "\"waiting_on\":%d,\"error\":",
                  first ? "" : ",\n", static_cast<unsigned long long>(id), hashText(c.comm).c_str(),
                  static_cast<unsigned long long>(c.seq), callName(kind), braidTypeName(dtype),
                  static_cast<unsigned long long>(c.count),
                  static_cast<unsigned long long>(c.bytes), root, c.peer,
                  op >= 0 ? braidOpName(static_cast<braidRedOp_t>(op)) : "", c.algo,
                  stateName(c.state), c.step, c.steps, static_cast<unsigned long long>(c.tEnqueue),
                  static_cast<unsigned long long>(c.tStart),
                  static_cast<unsigned long long>(c.tEnd), c.waitingOn);
    out += buf + quoted(error) + "}";
    first = false;
  }
  out += first ? "],\n\"steps\":[\n" : "\n],\n\"steps\":[\n";
  const size_t nsteps = std::min<uint64_t>(stepsRecorded_, steps_.size());
  for (size_t k = 0; k < nsteps; ++k) {
    const StepRecord& r = steps_[(stepsNext_ + steps_.size() - nsteps + k) % steps_.size()];
    std::snprintf(
        buf, sizeof(buf),
        "{\"call\":%llu,\"comm\":\"%s\",\"seq\":%llu,\"step\":%u,\"kind\":\"%s\","
        "\"peer\":%d,\"bytes\":%llu,\"t_start_ns\":%llu,\"t_end_ns\":%llu,"
        "\"wait_ns\":%llu,\"copy_ns\":%llu,\"reduce_ns\":%llu}%s\n",
        static_cast<unsigned long long>(r.callId), hashText(r.comm).c_str(),
        static_cast<unsigned long long>(r.seq), r.index, stepKindName(r.t.kind), r.t.peer,
        static_cast<unsigned long long>(r.t.bytes), static_cast<unsigned long long>(r.t.start),
        static_cast<unsigned long long>(r.t.end), static_cast<unsigned long long>(r.t.wait),
        static_cast<unsigned long long>(r.t.copy), static_cast<unsigned long long>(r.t.reduce),
        k + 1 < nsteps ? "," : "");
    out += buf;
  }
  out += "]}\n";
  return out;
}

// "job-<root hash>/rank-N" (BRAID_TRACE_JOB for the folder when set), chosen at the first dump.
std::string Recorder::fileName() const {
  std::lock_guard<std::mutex> lock(namesMu());
  if (!file_.empty()) return file_;
  const char* job = std::getenv("BRAID_TRACE_JOB");
  const std::string folder = job && *job ? job : "job-" + hashText(rootHash_);
  std::string name = folder + "/rank-" + std::to_string(rank_);
  if (namesTaken().count(name)) name += "-" + hashText(rootHash_);
  namesTaken().insert(name);
  file_ = name;
  return file_;
}

bool Recorder::dump(const char* reason, const std::string& detail, std::string* pathOrWhy) {
  const char* dir = std::getenv("BRAID_TRACE_DIR");
  if (!dir || !*dir) {
    *pathOrWhy = "BRAID_TRACE_DIR is not set: no folder to write the flight recorder to";
    return false;
  }
  if (mode_ == Mode::kOff) {
    *pathOrWhy = "BRAID_TRACE=off: nothing was recorded";
    return false;
  }
  // One dump at a time (the signal's thread, a failed call, braidCommDumpTrace): they share
  // the file and its temporary.
  std::lock_guard<std::mutex> one(dumpMu_);
  const std::string text = json(reason, detail);
  const std::string path = std::string(dir) + "/" + fileName() + ".json";
  if (!makeDirs(path.substr(0, path.rfind('/')), pathOrWhy)) return false;
  // Written beside, then renamed: a reader never sees half a file of this dump (a crash
  // mid-write leaves the older one whole).
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) {
    *pathOrWhy = "cannot write " + tmp + ": " + std::strerror(errno);
    return false;
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !written || std::rename(tmp.c_str(), path.c_str()) != 0) {
    *pathOrWhy = "cannot write " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  lastDump_.store(nowNs(), std::memory_order_relaxed);
  *pathOrWhy = path;
  return true;
}

// SIGUSR1: the handler posts; the dumper thread writes every live recorder's file.
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<Recorder>> recorders;
  sem_t wake;
  bool started = false;
};
Registry& registry() {
  static auto* r = new Registry;  // left alive: the dumper may run while the process exits
  return *r;
}

void onSigusr1(int) {
  const int saved = errno;
  sem_post(&registry().wake);  // async-signal-safe
  errno = saved;
}

void dumperLoop() {
  Registry& reg = registry();
  for (;;) {
    if (sem_wait(&reg.wake) != 0) continue;  // EINTR
    std::vector<std::shared_ptr<Recorder>> live;
    {
      std::lock_guard<std::mutex> lock(reg.mu);
      for (const auto& w : reg.recorders)
        if (auto r = w.lock()) live.push_back(std::move(r));
    }
    for (const auto& r : live) {
      if (r->dumpedWithin(2000000000ull)) continue;  // a failed call's dump, moments ago
      std::string where;
      if (r->dump("signal", "SIGUSR1", &where))
        BRAID_WARN("TRACE", "flight recorder written to %s (SIGUSR1)", where.c_str());
      else
        BRAID_WARN("TRACE", "SIGUSR1: flight recorder not written: %s", where.c_str());
    }
  }
}

}  // namespace

void registerRecorder(const std::shared_ptr<Recorder>& r) {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  reg.recorders.erase(std::remove_if(reg.recorders.begin(), reg.recorders.end(),
                                     [](const std::weak_ptr<Recorder>& w) { return w.expired(); }),
                      reg.recorders.end());
  reg.recorders.push_back(r);
  const char* dir = std::getenv("BRAID_TRACE_DIR");
  if (reg.started || !dir || !*dir) return;
  // Only where the program left SIGUSR1 alone: its own handler is never replaced.
  struct sigaction old {};
  if (sigaction(SIGUSR1, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return;
  reg.started = true;
  sem_init(&reg.wake, 0, 0);
  std::thread(dumperLoop).detach();
  struct sigaction sa {};
  sa.sa_handler = onSigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

}  // namespace braid::trace
