// Tensor parallelism (Shoeybi et al., "Megatron-LM: Training Multi-Billion Parameter Language
// Models Using Model Parallelism", 2019): a Linear's weight split over the tp ranks of a
// communicator. An MLP block is a column-parallel Linear (weight split on output features; its
// output stays split), the activation applied to each shard, then a row-parallel Linear (split
// on input features; the partial products are all-reduced): one all-reduce in forward (the
// paper's g) and one in backward (the input gradient of the column-parallel Linear, the
// paper's f). Self-attention is split by heads (the paper's fig. 3b): each rank computes the
// queries, keys and values of its heads (a column-parallel projection), their attention, and
// its part of the output projection (row-parallel), again one all-reduce each way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "training/attention.h"
#include "training/layers.h"
#include "training/model.h"

namespace braid::training {

/// Bytes all-reduced by tensor-parallel layers (payload: count x 4 B; a ring moves
/// 2 (tp - 1) / tp of it per rank each way).
struct TensorParallelCounters {
  uint64_t forward_bytes = 0, backward_bytes = 0;
  size_t forward_allreduces = 0, backward_allreduces = 0;
};

/// A layer whose parameters are this tp rank's shards of an unsplit layer's, in the same
/// parameters() order. shardBlocks()[i] = k: the unsplit parameter i, viewed as [k, tp, n],
/// has rank r's shard [k, n] at block r; 0: parameter i is whole on every rank.
/// makeTensorParallelMlp / makeTensorParallelVit cut shards and gatherTensorParallelMlp /
/// gatherTensorParallelVit reassemble the whole by it.
class TensorParallelLayer {
 public:
  virtual ~TensorParallelLayer() = default;
  virtual std::vector<size_t> shardBlocks() const = 0;
};

/// y_r = x W_r^T + b_r: rank r holds rows [r out/tp, (r + 1) out/tp) of W [out, in] and of b,
/// and produces those output features. x is whole (identical on every rank). Backward:
/// dx = sum over ranks of dy_r W_r, all-reduced over the communicator (skipped when the layer
/// is the model's first, whose input needs no gradient).
class ColumnParallelLinear : public InputCachingLayer, public TensorParallelLayer {
 public:
  /// Throws std::invalid_argument if tp does not divide out.
  ColumnParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank, int tp,
                       std::string name, TensorParallelCounters* counters);
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  /// Rows of W and of b: one block each.
  std::vector<size_t> shardBlocks() const override { return {1, 1}; }
  int tpRank() const { return tp_rank_; }

 private:
  size_t in_, shard_;
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
class RowParallelLinear : public InputCachingLayer, public TensorParallelLayer {
 public:
  /// Throws std::invalid_argument if tp does not divide in.
  RowParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank, int tp,
                    std::string name, TensorParallelCounters* counters);
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override { return {&weight_, &bias_}; }
  /// Columns of W (a block in each of its out rows); b whole.
  std::vector<size_t> shardBlocks() const override { return {out_, 0}; }
  int tpRank() const { return tp_rank_; }

 private:
  size_t out_, shard_;
  braidComm_t comm_;
  int tp_rank_;
  std::string name_;
  TensorParallelCounters* counters_;
  Parameter weight_, bias_;
};

/// MultiHeadSelfAttention(dim, heads, tokens) with its heads split over the tp ranks
/// (Shoeybi et al. 2019, sec. 3, fig. 3b): rank r runs heads [r heads/tp, (r + 1) heads/tp),
/// w = dim / tp features. x [batch * tokens, dim] is whole on every rank. The qkv projection
/// is column-parallel: of Wqkv [3 dim, dim] (query rows, then key rows, then value rows) and
/// bqkv [3 dim], rank r holds rows [r w, (r + 1) w) of each third (a shard [3 w, dim]), so it
/// computes its heads' Q, K, V and their attention without communication. The output
/// projection is row-parallel: columns [r w, (r + 1) w) of Wo [dim, dim] give partial products
/// that are all-reduced in forward (g, rows * dim floats); bo is whole and added once, after
/// the sum. Backward all-reduces the input gradient once (f, rows * dim floats; skipped when
/// needs_input_grad is false). y [batch * tokens, dim] is whole on every rank. Parameters as
/// MultiHeadSelfAttention's ("<name>.qkv.weight", ...), each rank holding its shards.
class TensorParallelSelfAttention : public Layer, public TensorParallelLayer {
 public:
  /// Throws std::invalid_argument if tp does not divide heads, heads does not divide dim, or
  /// tokens is 0.
  TensorParallelSelfAttention(size_t dim, size_t heads, size_t tokens, braidComm_t tp_comm,
                              int tp_rank, int tp, std::string name,
                              TensorParallelCounters* counters);
  std::string name() const override { return name_; }
  void forward(const Tensor& x, Tensor& y) override;
  void backward(const Tensor& dy, Tensor& dx) override;
  std::vector<Parameter*> parameters() override;
  /// Wqkv [3, tp, w dim] and bqkv [3, tp, w]: a block in each third; Wo: a block in each of
  /// its dim rows; bo whole.
  std::vector<size_t> shardBlocks() const override { return {3, 3, dim_, 0}; }
  size_t cacheElements() const override;
  void releaseCache() override;

 private:
  size_t dim_, tokens_, local_heads_;
  std::string name_;
  ColumnParallelLinear qkv_;
  RowParallelLinear proj_;
  Tensor qkv_out_, o_;        // o_ is scratch: proj_ keeps its input
  std::vector<float> probs_;  // [batch, heads / tp, T, T]
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

/// makeVit(height, width, patch, dim, heads, depth, classes) with each block's attention a
/// TensorParallelSelfAttention and its FFN ColumnParallelLinear(dim, 2 dim) GELU
/// RowParallelLinear(2 dim, dim) (Shoeybi et al. 2019, sec. 3): two all-reduces of
/// batch * tokens * dim floats in forward and two in backward per block. The patch embedding,
/// the LayerNorms and the head are replicated; their inputs and gradients are whole on every
/// rank, so their gradients agree without communication. Initialised with the values
/// makeVit(...)->initialize(seed) draws, each rank holding its shards of them. tp_comm may be
/// nullptr (tp 1). `counters` (may be nullptr) receives the layers' all-reduce volume. Throws
/// std::invalid_argument if tp does not divide heads.
std::unique_ptr<Sequential> makeTensorParallelVit(size_t height, size_t width, size_t patch,
                                                  size_t dim, size_t heads, size_t depth,
                                                  size_t classes, uint64_t seed,
                                                  braidComm_t tp_comm,
                                                  TensorParallelCounters* counters);

/// The whole parameters of a model from makeTensorParallelVit, in makeVit's parameters()
/// order, all-gathered over tp_comm. Layers without values (another pipeline stage's) are
/// left out. Collective.
std::vector<float> gatherTensorParallelVit(Sequential& model, braidComm_t tp_comm);

}  // namespace braid::training
