// One-sided calls (braid_rma.h): windows, puts with signals over the control plane, waits.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "core/comm.h"
#include "core/control.h"
#include "device/device.h"

// A window as its rank registered it; `id` names the same window on every rank.
struct braidWindow {
  braidComm* comm;
  uint32_t id;
  void* buff;
  size_t size;
  bool device;
  std::vector<uint64_t> peerSizes;  // every rank's size of this window
};

namespace braid {
namespace {

// A put's description on the wire (ControlPlane's int32 ranks): window, signal, offset and
// bytes, each 64-bit value in two halves.
enum PutMeta { kWindow, kSignal, kOffsetLo, kOffsetHi, kBytesLo, kBytesHi, kMetaSize };

uint64_t joinHalves(int32_t lo, int32_t hi) {
  return static_cast<uint64_t>(static_cast<uint32_t>(hi)) << 32 | static_cast<uint32_t>(lo);
}

double timeoutOf(const braidComm* comm) {
  return comm->timeoutSec > 0 ? comm->timeoutSec : config().timeoutSec;
}

// The window `win` of comm (checked against comm's own, so a stale or foreign handle is an
// error, not a crash); null with the message set otherwise.
braidWindow* findWindow(braidComm* comm, braidWindow_t win, const char* fn) {
  std::lock_guard<std::mutex> lock(comm->rma.mu);
  for (const auto& [id, w] : comm->rma.windows)
    if (w == win) return w;
  fail(braidInvalidArgument, "%s: window %p is not a window of this communicator (deregistered?)",
       fn, static_cast<void*>(win));
  return nullptr;
}

braidResult_t checkSignal(const braidComm* comm, int peer, int sigIdx, int ctx, unsigned flags,
                          const char* fn) {
  if (peer < 0 || peer >= comm->nranks)
    return fail(braidInvalidArgument, "%s: peer is %d; ranks of comm are 0..%d", fn, peer,
                comm->nranks - 1);
  if (sigIdx < 0 || sigIdx >= BRAID_MAX_SIGNALS)
    return fail(braidInvalidArgument, "%s: sigIdx is %d; it must be in [0, %d)", fn, sigIdx,
                BRAID_MAX_SIGNALS);
  if (ctx != 0)
    return fail(braidInvalidArgument, "%s: ctx is %d; Braid has one context, 0", fn, ctx);
  if (flags != 0) return fail(braidInvalidArgument, "%s: flags is %u; give 0", fn, flags);
  return braidSuccess;
}

// Lands a put of this rank to itself, or the control thread's: bytes from src (host memory)
// into the window at offset, then the signal from `from`. False if the window is gone or the
// range lies beyond it.
bool land(braidComm* comm, int from, uint32_t id, uint64_t offset, const void* src, size_t bytes,
          int sigIdx, bool srcDevice) {
  braidWindow* w = nullptr;
  {
    std::lock_guard<std::mutex> lock(comm->rma.mu);
    auto it = comm->rma.windows.find(id);
    if (bytes > 0) {
      if (it == comm->rma.windows.end() || offset > it->second->size ||
          bytes > it->second->size - offset)
        return false;
      w = it->second;
    }
  }
  if (w) {
    char* dst = static_cast<char*>(w->buff) + offset;
    if (w->device || srcDevice) {
      const device::Runtime& rt = device::runtime();
      if (comm->cudaDevice >= 0 && rt.setDevice(comm->cudaDevice) != braidSuccess) return false;
      if (rt.copyOnOwnStream(dst, src, bytes) != braidSuccess) return false;
    } else {
      std::memcpy(dst, src, bytes);
    }
  }
  {
    std::lock_guard<std::mutex> lock(comm->rma.mu);
    ++comm->rma.arrived[{from, sigIdx}];
  }
  comm->rma.cv.notify_all();
  return true;
}

braidResult_t put(braidComm* comm, const void* localbuff, size_t bytes, int peer, uint32_t id,
                  uint64_t offset, int sigIdx) {
  if (peer == comm->rank) {
    const bool dev = bytes > 0 && device::runtime().isDevice(localbuff);
    if (!land(comm, comm->rank, id, offset, localbuff, bytes, sigIdx, dev))
      return fail(braidInvalidArgument, "braidPutSignal: this rank's window %u cannot take it", id);
    return braidSuccess;
  }
  // Device memory goes through host memory (the control plane is a socket).
  std::vector<char> staged;
  const void* data = localbuff;
  if (bytes > 0 && device::runtime().isDevice(localbuff)) {
    staged.resize(bytes);
    BRAID_TRY(device::runtime().copyOnOwnStream(staged.data(), localbuff, bytes));
    data = staged.data();
  }
  const std::vector<int> meta = {static_cast<int>(id),
                                 sigIdx,
                                 static_cast<int>(offset & 0xffffffffu),
                                 static_cast<int>(offset >> 32),
                                 static_cast<int>(bytes & 0xffffffffu),
                                 static_cast<int>(static_cast<uint64_t>(bytes) >> 32)};
  return comm->control->sendPut(peer, meta, data, bytes, deadlineAfter(timeoutOf(comm)));
}

// Runs work now (stream NULL) or queued on stream.
braidResult_t onStream(braidComm* comm, braidStream_t stream, std::function<braidResult_t()> work) {
  if (!stream) return work();
  return enqueueOnStream(comm, stream, std::move(work));
}

}  // namespace

void applyPut(braidComm* comm, int fd, int from, const std::vector<int32_t>& meta) {
  uint8_t answer = 0;
  const std::string saved = lastError();
  if (meta.size() == kMetaSize && meta[kSignal] >= 0 && meta[kSignal] < BRAID_MAX_SIGNALS) {
    const uint64_t offset = joinHalves(meta[kOffsetLo], meta[kOffsetHi]);
    const uint64_t bytes = joinHalves(meta[kBytesLo], meta[kBytesHi]);
    std::vector<char> data;
    bool read = bytes == 0;
    if (bytes > 0 && bytes <= (uint64_t{1} << 40)) {
      data.resize(bytes);
      read = recvAll(fd, data.data(), bytes, deadlineAfter(timeoutOf(comm))) == braidSuccess;
    }
    if (read && land(comm, from, static_cast<uint32_t>(meta[kWindow]), offset, data.data(), bytes,
                     meta[kSignal], false))
      answer = 1;
  }
  if (!answer) BRAID_WARN("RMA", "rank %d: refused a put from rank %d", comm->rank, from);
  sendAll(fd, &answer, 1, deadlineAfter(1.0));
  failVerbatim(braidSuccess, saved);
}

void freeWindows(braidComm* comm) {
  std::lock_guard<std::mutex> lock(comm->rma.mu);
  for (auto& [id, w] : comm->rma.windows) delete w;
  comm->rma.windows.clear();
}

}  // namespace braid

using braid::fail;

extern "C" {

braidResult_t braidCommWindowRegister(braidComm_t comm, void* buff, size_t size, braidWindow_t* win,
                                      int winFlags) {
  return braid::guardApi("braidCommWindowRegister", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommWindowRegister"));
    BRAID_TRY(braid::checkNotRevoked(comm, "braidCommWindowRegister"));
    if (!win) return fail(braidInvalidArgument, "braidCommWindowRegister: win is NULL");
    *win = nullptr;
    if (!buff && size > 0)
      return fail(braidInvalidArgument, "braidCommWindowRegister: buff is NULL, size %zu", size);
    if (winFlags & ~(BRAID_WIN_COLL_SYMMETRIC | BRAID_WIN_STRICT_ORDERING))
      return fail(braidInvalidArgument,
                  "braidCommWindowRegister: winFlags 0x%x has bits beyond BRAID_WIN_COLL_SYMMETRIC "
                  "and BRAID_WIN_STRICT_ORDERING",
                  static_cast<unsigned>(winFlags));
    if (braid::insideGroup())
      return fail(braidInvalidUsage,
                  "braidCommWindowRegister: called inside braidGroupStart/End; register outside "
                  "a group (it is collective)");
    auto w = std::make_unique<braidWindow>();
    w->comm = comm;
    w->buff = buff;
    w->size = size;
    w->device = size > 0 && braid::device::runtime().isDevice(buff);
    w->peerSizes.resize(static_cast<size_t>(comm->nranks));
    // Known to the control thread before the exchange: a peer that finishes it first may put
    // into this window at once.
    {
      std::lock_guard<std::mutex> lock(comm->rma.mu);
      w->id = comm->rma.nextId++;
      comm->rma.windows[w->id] = w.get();
    }
    const uint64_t mine = size;
    std::vector<uint64_t> sizes(static_cast<size_t>(comm->nranks));
    const braidResult_t r = braidAllGather(&mine, sizes.data(), 1, braidUint64, comm, nullptr);
    std::lock_guard<std::mutex> lock(comm->rma.mu);
    if (r != braidSuccess) {
      comm->rma.windows.erase(w->id);
      return r;
    }
    w->peerSizes = sizes;
    *win = w.release();
    return braidSuccess;
  });
}

braidResult_t braidCommWindowDeregister(braidComm_t comm, braidWindow_t win) {
  return braid::guardApi("braidCommWindowDeregister", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidCommWindowDeregister"));
    braidWindow* w = braid::findWindow(comm, win, "braidCommWindowDeregister");
    if (!w) return braidInvalidArgument;
    // Collective: every rank is past its puts to this window before any frees it.
    int32_t token = 0, all = 0;
    BRAID_TRY(braidAllReduce(&token, &all, 1, braidInt32, braidSum, comm, nullptr));
    std::lock_guard<std::mutex> lock(comm->rma.mu);
    comm->rma.windows.erase(w->id);
    delete w;
    return braidSuccess;
  });
}

braidResult_t braidWinGetUserPtr(braidComm_t comm, braidWindow_t win, void** userPtr) {
  return braid::guardApi("braidWinGetUserPtr", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidWinGetUserPtr"));
    if (!userPtr) return fail(braidInvalidArgument, "braidWinGetUserPtr: userPtr is NULL");
    braidWindow* w = braid::findWindow(comm, win, "braidWinGetUserPtr");
    if (!w) return braidInvalidArgument;
    *userPtr = w->buff;
    return braidSuccess;
  });
}

braidResult_t braidPutSignal(const void* localbuff, size_t count, braidDataType_t datatype,
                             int peer, braidWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                             int ctx, unsigned int flags, braidComm_t comm, braidStream_t stream) {
  return braid::guardApi("braidPutSignal", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidPutSignal"));
    BRAID_TRY(braid::checkNotRevoked(comm, "braidPutSignal"));
    BRAID_TRY(braid::checkSignal(comm, peer, sigIdx, ctx, flags, "braidPutSignal"));
    if (const int raw = braid::rawValue(datatype); raw < 0 || raw >= braidNumTypes)
      return fail(braidInvalidArgument, "braidPutSignal: datatype %d is not a braidDataType_t",
                  raw);
    if (!localbuff && count > 0)
      return fail(braidInvalidArgument, "braidPutSignal: localbuff is NULL, count %zu", count);
    braidWindow* w = braid::findWindow(comm, peerWin, "braidPutSignal");
    if (!w) return braidInvalidArgument;
    const size_t bytes = count * braidTypeSize(datatype);
    const uint64_t room = w->peerSizes[static_cast<size_t>(peer)];
    if (peerWinOffset > room || bytes > room - peerWinOffset)
      return fail(braidInvalidArgument,
                  "braidPutSignal: %zu bytes at offset %zu are beyond rank %d's window of %llu "
                  "bytes",
                  bytes, peerWinOffset, peer, static_cast<unsigned long long>(room));
    const uint32_t id = w->id;
    return braid::onStream(comm, stream, [=] {
      return braid::put(comm, localbuff, bytes, peer, id, peerWinOffset, sigIdx);
    });
  });
}

braidResult_t braidSignal(int peer, int sigIdx, int ctx, unsigned int flags, braidComm_t comm,
                          braidStream_t stream) {
  return braid::guardApi("braidSignal", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidSignal"));
    BRAID_TRY(braid::checkNotRevoked(comm, "braidSignal"));
    BRAID_TRY(braid::checkSignal(comm, peer, sigIdx, ctx, flags, "braidSignal"));
    return braid::onStream(comm, stream,
                           [=] { return braid::put(comm, nullptr, 0, peer, 0, 0, sigIdx); });
  });
}

braidResult_t braidWaitSignal(int nDesc, const braidWaitSignalDesc_t* signalDescs, braidComm_t comm,
                              braidStream_t stream) {
  return braid::guardApi("braidWaitSignal", [&]() -> braidResult_t {
    BRAID_TRY(braid::checkComm(comm, "braidWaitSignal"));
    if (nDesc < 0 || (nDesc > 0 && !signalDescs))
      return fail(braidInvalidArgument, "braidWaitSignal: %d descs at %p", nDesc,
                  static_cast<const void*>(signalDescs));
    std::vector<braidWaitSignalDesc_t> descs(signalDescs, signalDescs + nDesc);
    for (int i = 0; i < nDesc; ++i) {
      const braidWaitSignalDesc_t& d = descs[static_cast<size_t>(i)];
      BRAID_TRY(braid::checkSignal(comm, d.peer, d.sigIdx, d.ctx, 0, "braidWaitSignal"));
      if (d.opCnt < 0)
        return fail(braidInvalidArgument, "braidWaitSignal: signalDescs[%d].opCnt is %d", i,
                    d.opCnt);
    }
    return braid::onStream(comm, stream, [comm, descs]() -> braidResult_t {
      auto& rma = comm->rma;
      const double limit = braid::timeoutOf(comm);
      const auto until = braid::Clock::now() + std::chrono::duration<double>(limit);
      std::unique_lock<std::mutex> lock(rma.mu);
      // Descs naming the same signal add up.
      std::map<std::pair<int, int>, uint64_t> want;
      for (const braidWaitSignalDesc_t& d : descs)
        want[{d.peer, d.sigIdx}] += static_cast<uint64_t>(d.opCnt);
      auto shortOf = [&]() -> const std::pair<const std::pair<int, int>, uint64_t>* {
        for (const auto& e : want)
          if (rma.arrived[e.first] - rma.consumed[e.first] < e.second) return &e;
        return nullptr;
      };
      while (const auto* s = shortOf()) {
        if (const int by = comm->revokedBy.load(); by >= 0)
          return fail(braidInvalidUsage,
                      "braidWaitSignal: the communicator was revoked (braidCommRevoke on rank %d)",
                      by);
        if (braid::Clock::now() >= until)
          return fail(
              braidTimeout,
              "braidWaitSignal: %llu of %llu signals from rank %d at sigIdx %d arrived "
              "within %s",
              static_cast<unsigned long long>(rma.arrived[s->first] - rma.consumed[s->first]),
              static_cast<unsigned long long>(s->second), s->first.first, s->first.second,
              braid::secondsText(limit).c_str());
        rma.cv.wait_for(lock, std::chrono::milliseconds(10));
      }
      for (const auto& e : want) rma.consumed[e.first] += e.second;
      return braidSuccess;
    });
  });
}

}  // extern "C"
