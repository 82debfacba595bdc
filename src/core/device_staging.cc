// Device buffers through host memory (DESIGN.md, Buffers; device_staging.h): a collective's
// ranges copied in before it runs and its receive range copied back after (stageIn; stageOut is
// inline), and the sends and receives of one batch staged one by one (runP2PStaged).
#include "core/device_staging.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "braid/braid.h"
#include "core/comm.h"
#include "device/device.h"

namespace braid {

braidResult_t stageIn(const void* sendbuff, size_t sendBytes, void* recvbuff, size_t recvBytes,
                      bool wholeRecv, Staged* st) {
  const braid::device::Runtime& rt = braid::device::runtime();
  st->send = sendbuff;
  st->recv = recvbuff;
  if (rt.deviceless && rt.deviceless()) return braidSuccess;
  const bool devSend = sendBytes > 0 && rt.isDevice(sendbuff);
  const bool devRecv = recvBytes > 0 && rt.isDevice(recvbuff);
  if (!devSend && !devRecv) return braidSuccess;
  const char* s = static_cast<const char*>(sendbuff);
  char* r = static_cast<char*>(recvbuff);
  if (devSend && devRecv && s < r + recvBytes && r < s + sendBytes) {  // overlapping: one copy
    const char* lo = std::min<const char*>(s, r);
    const char* hi = std::max<const char*>(s + sendBytes, r + recvBytes);
    st->host.resize(static_cast<size_t>(hi - lo));
    BRAID_TRY(braid::device::stageToHost(st->host.data(), lo, st->host.size()));
    st->send = st->host.data() + (s - lo);
    st->recvOffset = static_cast<size_t>(r - lo);
  } else {
    const size_t sendPart = devSend ? sendBytes : 0;
    st->host.resize(sendPart + (devRecv ? recvBytes : 0));
    if (devSend) BRAID_TRY(braid::device::stageToHost(st->host.data(), s, sendBytes));
    if (devSend) st->send = st->host.data();
    st->recvOffset = sendPart;
    if (devRecv && wholeRecv)
      BRAID_TRY(braid::device::stageToHost(st->host.data() + sendPart, r, recvBytes));
  }
  if (devRecv) {
    st->recv = st->host.data() + st->recvOffset;
    st->deviceRecv = recvbuff;
    st->recvBytes = recvBytes;
  }
  return braidSuccess;
}

braidResult_t runP2PStaged(braidComm* comm, const std::vector<braid::P2POp>& hostOps) {
  const braid::device::Runtime& rt = braid::device::runtime();
  auto onDevice = [&](const braid::P2POp& op) { return op.bytes > 0 && rt.isDevice(op.buff); };
  if (std::none_of(hostOps.begin(), hostOps.end(), onDevice)) return braid::runP2P(comm, hostOps);
  if (comm->deviceDirect && std::all_of(hostOps.begin(), hostOps.end(), [&](const auto& op) {
        return op.bytes == 0 || onDevice(op);
      }))
    return braid::runP2P(comm, hostOps, /*device=*/true);
  std::vector<braid::P2POp> ops = hostOps;
  std::vector<std::vector<char>> host(ops.size());
  std::vector<void*> device(ops.size(), nullptr);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].bytes == 0 || !rt.isDevice(ops[i].buff)) continue;
    host[i].resize(ops[i].bytes);
    if (ops[i].isSend)
      BRAID_TRY(braid::device::stageToHost(host[i].data(), ops[i].buff, ops[i].bytes));
    device[i] = ops[i].buff;
    ops[i].buff = host[i].data();
  }
  BRAID_TRY(braid::runP2P(comm, ops));
  for (size_t i = 0; i < ops.size(); ++i)
    if (device[i] && !ops[i].isSend)
      BRAID_TRY(braid::device::stageToDevice(device[i], host[i].data(), ops[i].bytes));
  return braidSuccess;
}

}  // namespace braid
