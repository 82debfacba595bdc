// Device buffers through host memory (device_staging.cc), for the entry points that run calls
// (collectives.cc, groups.cc): a collective's send and receive ranges (Staged, stageIn, stageOut),
// and sends and receives (runP2PStaged); deviceDirect tells a call that goes device to device
// instead.
#pragma once

#include <cstddef>
#include <vector>

#include "braid/braid.h"
#include "core/comm.h"
#include "device/device.h"

namespace braid {

// Device buffers reach the algorithms as host copies (DESIGN.md, Buffers): the send range is
// copied to host memory once the device has finished its queued work, the collective runs on
// host memory, and the receive range is copied back. Send and receive ranges that overlap
// (in place) share one copy, so the algorithms see the same pointer relations. Host buffers
// pass through untouched, and in a process without a device the check costs one load.
struct Staged {
  const void* send;
  void* recv;
  std::vector<char> host;
  void* deviceRecv = nullptr;  // where the result goes back, or NULL
  size_t recvBytes = 0;
  size_t recvOffset = 0;  // of the receive range in host
};

// Whether a call goes device to device (the CUDA IPC transport): comm is deviceDirect and
// both buffers (those the call uses) are device memory. Else it is staged.
inline bool deviceDirect(const braidComm* comm, const void* sendbuff, size_t sendBytes,
                         void* recvbuff, size_t recvBytes) {
  if (!comm->deviceDirect) return false;
  const braid::device::Runtime& rt = braid::device::runtime();
  return (sendBytes == 0 || rt.isDevice(sendbuff)) && (recvBytes == 0 || rt.isDevice(recvbuff)) &&
         sendBytes + recvBytes > 0;
}

// wholeRecv: the collective may leave parts of the receive range unwritten (all-to-all-v's
// gaps), so the range is copied in too and those parts go back unchanged.
braidResult_t stageIn(const void* sendbuff, size_t sendBytes, void* recvbuff, size_t recvBytes,
                      bool wholeRecv, Staged* st);

inline braidResult_t stageOut(const Staged& st) {
  if (!st.deviceRecv) return braidSuccess;
  return braid::device::stageToDevice(st.deviceRecv, st.host.data() + st.recvOffset, st.recvBytes);
}

// runP2P with device buffers staged: sends copied to host first, receives copied back after.
// On a deviceDirect communicator a group whose buffers are all device memory goes device to
// device instead.
braidResult_t runP2PStaged(braidComm* comm, const std::vector<braid::P2POp>& ops);

}  // namespace braid
