// The network proxy: one thread per communicator that carries its network connections.
//
// For every peer reached over the network the rank gets a FifoConnection over two FIFOs in
// this process's memory; the proxy is their far end. It turns each piece the rank publishes
// into a backend isend (the whole cell: header and payload) and posts backend irecvs into
// free receive cells, publishing them in piece order as they complete. It rings the rank's
// doorbell when it publishes a piece or frees a slot, and sleeps in epoll on the backend's
// fd and its own eventfd (rung by the rank) when nothing moves, so a rank waiting on
// shared-memory and network peers at once sleeps on one futex, and no thread spins.
// This is NCCL's proxy-thread arrangement.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "transport/fifo.h"
#include "transport/net.h"

namespace braid {

// Steps of at least this many bytes go to the network in place: no copy into the
// connection, at the price of waiting for the proxy to retire them.
constexpr size_t kNetInPlaceBytes = 32 << 10;

class NetProxy {
 public:
  // rankBell: the doorbell the rank sleeps on. Each FIFO has `slots` cells of slotBytes.
  NetProxy(std::unique_ptr<NetBackend> backend, int rank, Doorbell* rankBell, int slots,
           size_t slotBytes);
  ~NetProxy();  // stops the thread, then closes the backend
  NetProxy(const NetProxy&) = delete;
  NetProxy& operator=(const NetProxy&) = delete;

  NetBackend* backend() const { return backend_.get(); }
  // The rank's connection to `peer` (call for every network peer before start()).
  std::unique_ptr<Connection> addPeer(int peer);
  braidResult_t start();
  // The communicator failed: its destruction need not wait for the network to take
  // what the rank published.
  void abandon() { abandoned_ = true; }

 private:
  struct Peer;
  class Conn;
  void loop();
  bool pass();
  void failAll(const std::string& why);

  std::unique_ptr<NetBackend> backend_;
  int rank_;
  Doorbell* rankBell_;
  int slots_;
  size_t slotBytes_;
  Doorbell bell_;  // the proxy's own: rung by the rank, eventfd based
  int epollFd_ = -1;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool abandoned_ = false;
};

}  // namespace braid
