// The flight recorder's side of a communicator (comm.h: startRecording ... dumpTrace) and
// braidCommDumpTrace (braid/braid_trace.h). trace.h holds the recorder itself.
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "core/comm.h"
#include "core/trace.h"

namespace braid {

namespace {

trace::CommInfo commInfo(const braidComm* comm) {
  trace::CommInfo info;
  info.hash = comm->commHash;
  info.parent = comm->parentHash;
  info.rank = comm->rank;
  info.nranks = comm->nranks;
  info.color = comm->splitColor;
  info.key = comm->splitKey;
  info.worldRanks = comm->worldRanks;
  for (const PeerCard& p : comm->peers) info.hosts.push_back(p.hostId);
  return info;
}

bool traceDirSet() {
  const char* dir = std::getenv("BRAID_TRACE_DIR");
  return dir && *dir;
}

// Under braidrun (BRAID_LAUNCHER_PID): it forwards SIGUSR1 to every rank, so that the ranks
// still in their calls, or stuck in their own code, dump too.
void askLauncherToDump() {
  const char* pid = std::getenv("BRAID_LAUNCHER_PID");
  if (!pid || !*pid || !traceDirSet()) return;
  char* end = nullptr;
  const long p = std::strtol(pid, &end, 10);
  if (end && *end == '\0' && p > 1) kill(static_cast<pid_t>(p), SIGUSR1);
}

}  // namespace

void startRecording(braidComm* comm) {
  const trace::Mode mode = trace::Recorder::modeFromEnv();
  comm->worldRanks.resize(static_cast<size_t>(comm->nranks));
  for (int r = 0; r < comm->nranks; ++r) comm->worldRanks[static_cast<size_t>(r)] = r;
  if (mode == trace::Mode::kOff) return;
  comm->recorder = std::make_shared<trace::Recorder>(mode, trace::Recorder::capacityFromEnv(),
                                                     comm->rank, comm->commHash);
  comm->recorder->addComm(commInfo(comm));
  trace::registerRecorder(comm->recorder);
}

void inheritRecorder(braidComm* child, const braidComm* parent, int color, int key) {
  child->parentHash = parent->commHash;
  child->splitColor = color;
  child->splitKey = key;
  child->worldRanks.assign(static_cast<size_t>(child->nranks), -1);
  for (size_t r = 0; r < child->parentRanks.size() && r < child->worldRanks.size(); ++r) {
    const int p = child->parentRanks[r];
    if (p >= 0 && static_cast<size_t>(p) < parent->worldRanks.size())
      child->worldRanks[r] = parent->worldRanks[static_cast<size_t>(p)];
  }
  if (!parent->recorder) return;
  child->recorder = parent->recorder;  // the child's own (made by its init) is dropped
  child->recorder->addComm(commInfo(child));
}

void traceCallBegin(braidComm* comm, const trace::CallInfo& call, uint32_t steps,
                    ExecContext* ctx) {
  trace::Recorder* rec = comm->recorder.get();
  if (!rec) return;
  ctx->traceCall = rec->begin(call, steps);
  if (rec->mode() != trace::Mode::kSteps) return;
  comm->stepTimes.assign(steps, trace::StepTimes{});
  ctx->stepTimes = comm->stepTimes.data();
}

braidResult_t traceCallEnd(braidComm* comm, const ExecContext& ctx, braidResult_t res) {
  trace::Recorder* rec = comm->recorder.get();
  if (!rec) return res;
  if (res != braidSuccess && ctx.blamed) ctx.traceCall.waitingOn(*ctx.blamed);
  const std::string error = res == braidSuccess ? std::string() : lastError();
  rec->end(ctx.traceCall, res == braidSuccess, error.c_str(), ctx.stepTimes,
           ctx.stepTimes ? comm->stepTimes.size() : 0);
  if (res == braidSuccess || comm->traceDumped.exchange(true)) return res;
  const char* reason = comm->aborted.load()                           ? "abort"
                       : error.find("timed out") != std::string::npos ? "timeout"
                                                                      : "error";
  std::string where;
  if (rec->dump(reason, error, &where)) {
    BRAID_WARN("TRACE", "flight recorder written to %s (braid-trace reads its folder)",
               where.c_str());
    askLauncherToDump();
  } else if (traceDirSet()) {  // unset: the user asked for no dump
    BRAID_WARN("TRACE", "flight recorder not written: %s", where.c_str());
  }
  return res;
}

braidResult_t dumpTrace(braidComm* comm, const char* reason, const std::string& detail,
                        std::string* path) {
  if (!comm->recorder)
    return fail(braidInvalidUsage,
                "braidCommDumpTrace: BRAID_TRACE=off when this communicator was made: nothing "
                "was recorded");
  if (!comm->recorder->dump(reason, detail, path))
    return fail(traceDirSet() ? braidSystemError : braidInvalidUsage, "braidCommDumpTrace: %s",
                path->c_str());
  return braidSuccess;
}

}  // namespace braid

extern "C" braidResult_t braidCommDumpTrace(braidComm_t comm, char* path, size_t pathSize) {
  return braid::guardApi("braidCommDumpTrace", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommDumpTrace"));
    if (path && pathSize == 0)
      return braid::fail(braidInvalidArgument, "braidCommDumpTrace: path given with pathSize 0");
    std::string where;
    BRAID_TRY(braid::dumpTrace(comm, "api", "braidCommDumpTrace", &where));
    if (path && where.size() >= pathSize)
      return braid::fail(braidInvalidArgument,
                         "braidCommDumpTrace: the dump was written to %s, whose name needs "
                         "pathSize %zu (%zu given)",
                         where.c_str(), where.size() + 1, pathSize);
    if (path) std::snprintf(path, pathSize, "%s", where.c_str());
    return braidSuccess;
  });
}
