// A parameter server (Li et al., "Scaling Distributed Machine Learning with the Parameter
// Server", OSDI 2014) on Braid's send/recv: ranks [0, servers) hold contiguous shards of the
// flat parameter vector and its optimizer state; the other ranks are workers that compute
// gradients on their own batches, push them to every server and pull the parameters back.
//
//   BSP (staleness 0): at every clock each server waits for all workers' gradients, steps its
//     shard with their mean, and every worker pulls the new values: synchronous SGD, the same
//     result as one rank on the workers' batches together (and as DDP).
//   SSP (staleness s, Ho et al., NIPS 2013): a worker pulls only every s + 1 clocks and in
//     between goes on with its copy, at most s clocks stale; servers still apply every clock's
//     mean gradient once all workers have pushed it. Pulls, and the waits for them, drop by
//     s + 1.
// Pushes and pulls are braidSend/braidRecv groups, so their order never deadlocks; every rank of
// the communicator takes part (servers call serve() once per worker step()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid/braid.h"
#include "training/layers.h"
#include "training/model.h"
#include "training/optimizer.h"

namespace braid::training {

struct ParameterServerOptions {
  int servers = 1;    ///< ranks [0, servers) serve; at least 1 worker must remain
  int staleness = 0;  ///< s: 0 is BSP; a worker pulls every s + 1 clocks
};

class ParameterServer {
 public:
  /// `model` initialised the same on every rank (same seed), its parameters in one flat
  /// buffer (Sequential::initialize). A server keeps its shard of the values and an optimizer
  /// state for it. @throws std::invalid_argument for servers < 1, no worker left, staleness < 0.
  ParameterServer(Sequential& model, Optimizer& optimizer, braidComm_t comm,
                  ParameterServerOptions options);
  bool isServer() const { return rank_ < options_.servers; }
  int workers() const { return nranks_ - options_.servers; }
  /// Worker: forward, loss and backward on x; pushes the gradient; pulls when due. Returns the
  /// batch's mean loss.
  float step(const Tensor& x, const std::vector<int32_t>& labels, SoftmaxCrossEntropy& loss);
  /// Server: one clock: every worker's gradient, the optimizer on the mean, values to the
  /// workers that pull at this clock.
  void serve();
  /// Every rank: servers send their current shards, workers receive them (their copy is then
  /// the servers' latest: evaluate after it).
  void synchronize();
  /// Bytes this rank sent (pushes or pulls served) since construction.
  size_t bytesSent() const { return bytes_sent_; }
  size_t pulls() const { return pulls_; }

 private:
  bool pullsAt(uint64_t clock) const {
    return (clock + 1) % static_cast<uint64_t>(options_.staleness + 1) == 0;
  }
  void check(braidResult_t r, const char* what) const;
  // Sends (server) or receives (worker) every shard of the values.
  void exchangeValues();

  Sequential& model_;
  Optimizer& optimizer_;
  braidComm_t comm_;
  ParameterServerOptions options_;
  int rank_ = 0, nranks_ = 1;
  size_t psi_ = 0;
  std::vector<size_t> shard_offset_, shard_size_;  // by server
  float* values_ = nullptr;                        // the model's flat values
  float* grads_ = nullptr;                         // and gradients
  std::vector<float> shard_;                       // server: its values
  std::vector<std::vector<float>> pushed_;         // server: one gradient per worker
  uint64_t clock_ = 0;
  size_t bytes_sent_ = 0, pulls_ = 0;
};

}  // namespace braid::training
