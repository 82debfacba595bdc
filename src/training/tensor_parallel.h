// Tensor parallelism (Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language
// Models Using Model Parallelism", 2019): a Linear's weight split over the tp ranks of a
// communicator. An MLP block is a column-parallel Linear (weight split on output features; its
// output stays split), the activation applied to each shard, then a row-parallel Linear (split
// on input features; the partial products are all-reduced): one all-reduce in forward (the
// paper's g) and one in backward (the input gradient of the column-parallel Linear, the
// paper's f).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "training/layers.h"
#include "training/model.h"

namespace braid::training {

/// Bytes all-reduced by tensor-parallel layers (payload: count x 4 B; a ring moves
/// 2 (tp - 1) / tp of it per rank each way).
struct TensorParallelCounters {
  uint64_t forward_bytes = 0, backward_bytes = 0;
  size_t forward_allreduces = 0, backward_allreduces = 0;
};

/// y_r = x W_r^T + b_r: rank r holds rows [r out/tp, (r + 1) out/tp) of W [out, in] and of b,
/// and produces those output features. x is whole (identical on every rank). Backward:
/// dx = sum over ranks of dy_r W_r, all-reduced over the communicator (skipped when the layer
/// is the model's first, whose input needs no gradient).
class ColumnParallelLinear : public InputCachingLayer {
 public:
  /// Throws std::invalid_argument if tp does not divide out.
  ColumnParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank, int tp,
                       std::string name, TensorParallelCounters* counters);
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  /// Copies this rank's rows of a whole Linear's weight and bias.
  void loadShard(Linear& full);

 private:
  size_t in_, out_, shard_;
  braidComm_t comm_;
  int tp_rank_;
  std::string name_;
  TensorParallelCounters* counters_;
  Parameter weight_, bias_;
};

/// y = sum over ranks of x_r W_r^T, then + b: rank r holds columns [r in/tp, (r + 1) in/tp) of
/// W [out, in] and gets x_r, the matching features of the input (a column-parallel layer's
/// output). The partial sums are all-reduced in forward; the bias is whole on every rank and
/// added once, after the sum. Backward needs no communication: dx_r = dy W_r.
class RowParallelLinear : public InputCachingLayer {
 public:
  /// Throws std::invalid_argument if tp does not divide in.
  RowParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank, int tp,
                    std::string name, TensorParallelCounters* counters);
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  /// Copies this rank's columns of a whole Linear's weight, and the whole bias.
  void loadShard(Linear& full);

 private:
  size_t in_, out_, shard_;
  braidComm_t comm_;
  int tp_rank_;
  std::string name_;
  TensorParallelCounters* counters_;
  Parameter weight_, bias_;
};

/// The MLP of makeMlp(widths) with its Linears paired into Megatron blocks: Linear 2j is
/// column-parallel, Linear 2j + 1 row-parallel, a last unpaired Linear (the 10-class head of
/// 784-256-128-10) replicated on every rank. Initialised with the values makeMlp(widths)
/// draws from `seed`, each rank holding its shards of them. tp_comm may be nullptr (tp 1).
/// `counters` (may be nullptr) receives the layers' all-reduce volume.
std::unique_ptr<Sequential> makeTensorParallelMlp(const std::vector<size_t>& widths, uint64_t seed,
                                                  braidComm_t tp_comm,
                                                  TensorParallelCounters* counters);

/// The whole parameters of a model from makeTensorParallelMlp, in makeMlp's parameters()
/// order, all-gathered over tp_comm. Layers without values (another pipeline stage's) are
/// left out. Collective.
std::vector<float> gatherTensorParallelMlp(Sequential& model, braidComm_t tp_comm);

}  // namespace braid::training
