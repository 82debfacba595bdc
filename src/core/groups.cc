// Groups: braidGroupStart/End (and braidGroupSimulateEnd, which predicts instead of running)
// and the calling thread's open group. Inside it, the calls that
// collectives.cc checks are deferred (entry_points.h), and the outermost braidGroupEnd runs them:
// nothing if one was refused, else each communicator's share in posting order, consecutive sends
// and receives fused into one schedule, the communicators of one stream as one piece of work on
// it, side by side.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "braid/braid.h"
#include "core/comm.h"
#include "core/device_staging.h"
#include "core/entry_points.h"
#include "core/stream.h"
#include "device/device.h"
#include "tuning/cost_model.h"

using braid::fail;
using braid::Pending;
using braid::record;
using braid::runP2PStaged;
using braid::t_groupDepth;
using braid::t_groupError;
using braid::t_groupErrorMessage;
using braid::t_groupErrorRank;
using braid::t_pending;

// The open group's state (entry_points.h says what each is).
namespace braid {

thread_local braidResult_t t_groupError = braidSuccess;
thread_local std::string t_groupErrorMessage;
thread_local int t_groupErrorRank = -1;
BRAID_STATIC_TLS constinit thread_local int t_groupDepth = 0;
thread_local std::vector<Pending> t_pending;

}  // namespace braid

namespace {

// Runs one communicator's share of a group in posting order; consecutive sends and
// receives become one fused schedule.
braidResult_t runGroupItems(braidComm* comm, const std::vector<Pending>& items) {
  std::vector<braid::P2POp> batch;
  for (size_t i = 0; i <= items.size(); ++i) {
    bool flush = i == items.size() || !items[i].isP2P;
    if (flush && !batch.empty()) {
      BRAID_TRY(runP2PStaged(comm, batch));
      batch.clear();
    }
    if (i == items.size()) break;
    if (items[i].isP2P)
      batch.push_back(items[i].p2p);
    else
      BRAID_TRY(items[i].work());
  }
  return braidSuccess;
}

// One communicator's share of a group, and the stream it goes to (NULL: none).
struct GroupPart {
  braidComm* comm;
  braidStream_t stream;
  std::vector<Pending> items;
};

// Runs the parts at once: one alone on the calling thread, several each on a thread of its
// own (their ranks wait on each other). On a CUDA stream's proxy each thread is a proxy too,
// staging on its own communicator's device. Returns the first failure (its message kept).
braidResult_t runSideBySide(const std::vector<GroupPart>& parts, int* failedPart) {
  std::vector<braidResult_t> results(parts.size(), braidSuccess);
  std::vector<std::string> messages(parts.size());
  const bool proxy = braid::device::proxyDevice() != braid::device::kNotProxy;
  auto run = [&](size_t k) {
    std::optional<braid::device::ProxyScope> scope;
    if (proxy && parts.size() > 1) scope.emplace(parts[k].comm->cudaDevice);
    results[k] = runGroupItems(parts[k].comm, parts[k].items);
    if (results[k] != braidSuccess) messages[k] = braid::lastError();
  };
  if (parts.size() == 1) {
    run(0);
  } else {
    // jthreads: one that cannot start leaves the others joined, not joinable (see api.cc).
    std::vector<std::jthread> workers;
    for (size_t k = 0; k < parts.size(); ++k) workers.emplace_back(run, k);
  }
  for (size_t k = 0; k < parts.size(); ++k)
    if (results[k] != braidSuccess) {
      if (failedPart) *failedPart = static_cast<int>(k);
      return braid::failVerbatim(results[k], messages[k]);
    }
  return braidSuccess;
}

// One fused run of sends and receives (runP2PStaged): every peer's queue progresses at once,
// and a rank's transfers share its ports (cost.h's Fabric): one send and one receive port
// within the host, the NIC beyond it. So the run takes the largest link latency it meets plus,
// per port and direction, the bytes over that port's bandwidth; the host and network ports
// work side by side, a copy to itself beside them.
double predictP2PUs(const braidComm* comm, const std::vector<braid::P2POp>& batch) {
  const braid::tuning::Fabric& f = comm->fabric;
  double intra[2] = {0, 0}, inter[2] = {0, 0}, self = 0, latency = 0;  // [send, receive] bytes
  for (const braid::P2POp& op : batch) {
    if (op.bytes == 0) continue;
    if (op.peer == comm->rank) {
      if (op.isSend) self += static_cast<double>(op.bytes);
      continue;
    }
    const bool sameHost = f.hostOf.empty() || f.hostOf[op.peer] == f.hostOf[comm->rank];
    (sameHost ? intra : inter)[op.isSend ? 0 : 1] += static_cast<double>(op.bytes);
    latency = std::max(latency, (sameHost ? f.intra : f.inter).latency_us);
  }
  auto over = [](double bytes, double gbs) { return gbs > 0 ? bytes / (gbs * 1e3) : 0.0; };
  const double moving =
      std::max({over(std::max(intra[0], intra[1]), f.intra.bw_gbs),
                over(std::max(inter[0], inter[1]), f.inter.bw_gbs), over(self, f.copy_gbs)});
  if (moving == 0 && latency == 0) return 0;
  return f.step_overhead_us + latency + moving;
}

// One communicator's share of a group, predicted in posting order as runGroupItems would run it.
braidResult_t predictGroupItems(braidComm* comm, const std::vector<Pending>& items, double* us) {
  std::lock_guard<std::mutex> lock(comm->mu);  // chooseAlgorithm reads the forced algorithms
  std::vector<braid::P2POp> batch;
  *us = 0;
  for (size_t i = 0; i <= items.size(); ++i) {
    const bool flush = i == items.size() || !items[i].isP2P;
    if (flush && !batch.empty()) {
      *us += predictP2PUs(comm, batch);
      batch.clear();
    }
    if (i == items.size()) break;
    if (items[i].isP2P) {
      batch.push_back(items[i].p2p);
      continue;
    }
    if (!items[i].call) continue;  // a call of nothing
    braid::CollArgs args = *items[i].call;
    args.hostOf = comm->nhosts > 1 ? comm->hostOf.data() : nullptr;
    args.ring = comm->ring.empty() ? nullptr : comm->ring.data();
    const braid::AlgorithmInfo* algo = nullptr;
    BRAID_TRY(braid::chooseAlgorithm(comm, args, &algo));
    *us += braid::tuning::predictCallUs(*algo, args, braidTypeSize(args.dtype), comm->fabric);
  }
  return braidSuccess;
}

// braidGroupEnd's refusal of a group one of whose calls was refused: nothing of it runs, and
// each of its communicators keeps the message.
braidResult_t refuseGroup(const char* fn, const std::vector<Pending>& pending) {
  const braidResult_t res = t_groupError;
  t_groupError = braidSuccess;
  braid::LogRankScope rankScope(t_groupErrorRank);  // "rank 1: braidGroupEnd: ..."
  fail(res, "%s: a call of the group was refused (%s); nothing of the group ran, as with %s", fn,
       t_groupErrorMessage.c_str(),
       std::strcmp(fn, "braidGroupEnd") == 0 ? "ncclGroupEnd" : "ncclGroupSimulateEnd");
  for (const Pending& p : pending) record(p.comm, res);
  return res;
}

}  // namespace

extern "C" {

braidResult_t braidGroupStart(void) {
  return braid::guardApi("braidGroupStart", [&]() -> braidResult_t {
    ++t_groupDepth;
    return braidSuccess;
  });
}

braidResult_t braidGroupEnd(void) {
  return braid::guardApi("braidGroupEnd", [&]() -> braidResult_t {
    if (t_groupDepth == 0)
      return fail(braidInvalidUsage, "braidGroupEnd without a matching braidGroupStart");
    if (--t_groupDepth > 0) return braidSuccess;
    std::vector<Pending> pending;
    pending.swap(t_pending);
    if (t_groupError != braidSuccess) return refuseGroup("braidGroupEnd", pending);
    // Each communicator's items, in first-appearance order; a communicator's stream is that
    // of its first item.
    std::vector<GroupPart> parts;
    for (const Pending& p : pending) {
      auto it = std::find_if(parts.begin(), parts.end(),
                             [&](const GroupPart& g) { return g.comm == p.comm; });
      if (it == parts.end()) it = parts.insert(parts.end(), GroupPart{p.comm, p.stream, {}});
      it->items.push_back(p);
    }
    std::vector<std::unique_ptr<braid::InFlight>> running;
    for (const GroupPart& g : parts) running.push_back(std::make_unique<braid::InFlight>(g.comm));
    // The communicators on one stream go to it as one piece of work, which runs them side by
    // side: queued one after the other, the first would wait forever for the ranks of the
    // second (one thread driving several ranks, as nccl-tests does).
    std::vector<GroupPart> unstreamed;
    std::vector<braidStream_t> streams;
    for (const GroupPart& g : parts) {
      if (!g.stream)
        unstreamed.push_back(g);
      else if (std::find(streams.begin(), streams.end(), g.stream) == streams.end())
        streams.push_back(g.stream);
    }
    braidResult_t first = braidSuccess;
    std::string firstMessage;
    for (braidStream_t stream : streams) {
      std::vector<GroupPart> same;
      std::vector<braidComm*> comms;
      for (const GroupPart& g : parts)
        if (g.stream == stream) {
          same.push_back(g);
          comms.push_back(g.comm);
        }
      braidResult_t res =
          braid::enqueueOnStream(comms, stream, [same] { return runSideBySide(same, nullptr); });
      // The other streams' shares and the unstreamed ones still go: their peers wait for them.
      if (res != braidSuccess && first == braidSuccess) {
        first = record(comms[0], res);
        firstMessage = braid::lastError();
      }
    }
    if (!unstreamed.empty()) {
      int failed = 0;
      braidResult_t res = runSideBySide(unstreamed, &failed);
      if (res != braidSuccess && first == braidSuccess) {
        first = record(unstreamed[failed].comm, res);
        firstMessage = braid::lastError();
      }
    }
    return first == braidSuccess ? first : braid::failVerbatim(first, firstMessage);
  });
}

braidResult_t braidGroupSimulateEnd(double* estimatedUs) {
  return braid::guardApi("braidGroupSimulateEnd", [&]() -> braidResult_t {
    if (t_groupDepth == 0)
      return fail(braidInvalidUsage, "braidGroupSimulateEnd without a matching braidGroupStart");
    if (!estimatedUs)
      return fail(braidInvalidArgument,
                  "braidGroupSimulateEnd: estimatedUs is NULL; the group is still open");
    if (--t_groupDepth > 0) return braidSuccess;
    std::vector<Pending> pending;
    pending.swap(t_pending);
    if (t_groupError != braidSuccess) return refuseGroup("braidGroupSimulateEnd", pending);
    // Each communicator's items in posting order (as braidGroupEnd groups them); they would run
    // side by side.
    std::vector<braidComm*> comms;
    for (const Pending& p : pending)
      if (std::find(comms.begin(), comms.end(), p.comm) == comms.end()) comms.push_back(p.comm);
    double longest = 0;
    for (braidComm* comm : comms) {
      std::vector<Pending> items;
      for (const Pending& p : pending)
        if (p.comm == comm) items.push_back(p);
      double us = 0;
      if (const braidResult_t res = predictGroupItems(comm, items, &us); res != braidSuccess)
        return record(comm, res);
      longest = std::max(longest, us);
    }
    *estimatedUs = longest;
    return braidSuccess;
  });
}

}  // extern "C"

bool braid::insideGroup() { return t_groupDepth > 0; }
