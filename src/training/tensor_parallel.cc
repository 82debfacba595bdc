#include "training/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "training/check_call.h"

namespace braid::training {

namespace {

void checkCols(const std::string& layer, const Tensor& x, size_t want) {
  if (x.rank() < 1 || x.cols() != want) {
    throw std::invalid_argument(layer + ": input of shape " + x.shapeString() + ", expected [*, " +
                                std::to_string(want) + "]");
  }
}

std::vector<size_t> withCols(const Tensor& x, size_t cols) {
  std::vector<size_t> s = x.shape();
  s.back() = cols;
  return s;
}

size_t shardOf(const std::string& name, const char* what, size_t features, int tp) {
  if (tp < 1 || features % static_cast<size_t>(tp) != 0) {
    throw std::invalid_argument(name + ": --tp " + std::to_string(tp) + " does not divide its " +
                                std::to_string(features) + " " + what + " features");
  }
  return features / static_cast<size_t>(tp);
}

// Sums buf over the tensor-parallel ranks, in place.
void allReduceSum(float* buf, size_t n, braidComm_t comm, const std::string& layer) {
  if (comm == nullptr || n == 0) return;
  checkCall(braidAllReduce(buf, buf, n, braidFloat32, braidSum, comm, nullptr), comm,
            layer + ": braidAllReduce");
}

// This communicator's size and rank (1 and 0 for nullptr).
std::pair<int, int> tpSizeAndRank(braidComm_t tp_comm) {
  int tp = 1, tp_rank = 0;
  if (tp_comm != nullptr) {
    checkCall(braidCommCount(tp_comm, &tp), tp_comm, "braidCommCount");
    checkCall(braidCommUserRank(tp_comm, &tp_rank), tp_comm, "braidCommUserRank");
  }
  return {tp, tp_rank};
}

size_t localHeads(const std::string& name, size_t dim, size_t heads, size_t tokens, int tp) {
  if (heads == 0 || dim % heads != 0 || tokens == 0) {
    throw std::invalid_argument(name + ": " + std::to_string(heads) + " heads do not divide dim " +
                                std::to_string(dim) + " (or no tokens)");
  }
  if (tp < 1 || heads % static_cast<size_t>(tp) != 0) {
    throw std::invalid_argument(name + ": --tp " + std::to_string(tp) + " does not divide its " +
                                std::to_string(heads) + " attention heads");
  }
  return heads / static_cast<size_t>(tp);
}

// The layers with parameters, in parameters() order: residual blocks are opened, other layers
// (tensor-parallel ones included) taken whole.
void collectLeaves(Layer& layer, std::vector<Layer*>& out) {
  if (auto* res = dynamic_cast<Residual*>(&layer)) {
    for (size_t i = 0; i < res->numLayers(); ++i) collectLeaves(res->layer(i), out);
  } else if (!layer.parameters().empty()) {
    out.push_back(&layer);
  }
}

std::vector<Layer*> leaves(Sequential& model) {
  std::vector<Layer*> out;
  for (size_t i = 0; i < model.numLayers(); ++i) collectLeaves(model.layer(i), out);
  return out;
}

// How each of the layer's parameters is split (TensorParallelLayer::shardBlocks; all 0 for a
// replicated layer).
std::vector<size_t> blocksOf(Layer& layer) {
  if (auto* t = dynamic_cast<TensorParallelLayer*>(&layer)) return t->shardBlocks();
  return std::vector<size_t>(layer.parameters().size(), 0);
}

// Copies into `model` (this rank's shards) the values of `whole`, the unsplit model with the
// same layers in the same order.
void loadShards(Sequential& model, Sequential& whole, int tp, int tp_rank) {
  const std::vector<Layer*> mine = leaves(model), full = leaves(whole);
  if (mine.size() != full.size()) throw std::logic_error("loadShards: models of other layers");
  for (size_t i = 0; i < mine.size(); ++i) {
    const std::vector<Parameter*> dst = mine[i]->parameters(), src = full[i]->parameters();
    const std::vector<size_t> blocks = blocksOf(*mine[i]);
    for (size_t j = 0; j < dst.size(); ++j) {
      if (blocks[j] == 0) {
        std::memcpy(dst[j]->value, src[j]->value, src[j]->numel * sizeof(float));
        continue;
      }
      // The whole is [blocks, tp, n]; the shard is [blocks, n], block tp_rank of each.
      const size_t n = dst[j]->numel / blocks[j];
      for (size_t b = 0; b < blocks[j]; ++b) {
        const size_t at = (b * static_cast<size_t>(tp) + static_cast<size_t>(tp_rank)) * n;
        std::memcpy(dst[j]->value + b * n, src[j]->value + at, n * sizeof(float));
      }
    }
  }
}

// The whole parameters of `model`, in the unsplit model's parameters() order. Collective.
std::vector<float> gatherWhole(Sequential& model, braidComm_t tp_comm) {
  const size_t tp = static_cast<size_t>(tpSizeAndRank(tp_comm).first);
  std::vector<float> out, all;
  for (Layer* layer : leaves(model)) {
    const std::vector<Parameter*> ps = layer->parameters();
    if (ps[0]->value == nullptr) continue;  // another pipeline stage's
    const std::vector<size_t> blocks = blocksOf(*layer);
    for (size_t j = 0; j < ps.size(); ++j) {
      const Parameter& p = *ps[j];
      if (blocks[j] == 0 || tp_comm == nullptr) {
        out.insert(out.end(), p.value, p.value + p.numel);
        continue;
      }
      // Rank r's shard [blocks, n] is at r in the gather; the whole is [blocks, tp, n].
      all.resize(p.numel * tp);
      checkCall(braidAllGather(p.value, all.data(), p.numel, braidFloat32, tp_comm, nullptr),
                tp_comm, "braidAllGather (" + p.name + ")");
      const size_t n = p.numel / blocks[j];
      for (size_t b = 0; b < blocks[j]; ++b) {
        for (size_t r = 0; r < tp; ++r) {
          const float* src = all.data() + r * p.numel + b * n;
          out.insert(out.end(), src, src + n);
        }
      }
    }
  }
  return out;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank,
                                           int tp, std::string name,
                                           TensorParallelCounters* counters)
    : in_(in),
      shard_(shardOf(name, "output", out, tp)),
      comm_(tp_comm),
      tp_rank_(tp_rank),
      name_(std::move(name)),
      counters_(counters) {
  weight_ = Parameter{name_ + ".weight", {shard_, in}, shard_ * in};
  bias_ = Parameter{name_ + ".bias", {shard_}, shard_};
}

void ColumnParallelLinear::forward(const Tensor& x, Tensor& y) {
  checkCols(name_, x, in_);
  x_ = x;
  const size_t batch = x.rows();
  y.resize(withCols(x, shard_));
  for (size_t r = 0; r < batch; ++r) {
    std::memcpy(y.data() + r * shard_, bias_.value, shard_ * sizeof(float));
  }
  gemm(false, true, batch, shard_, in_, 1.0f, x.data(), weight_.value, 1.0f, y.data());
}

void ColumnParallelLinear::backward(const Tensor& dy, Tensor& dx) {
  checkCols(name_, dy, shard_);
  const size_t batch = dy.rows();
  gemm(true, false, shard_, in_, batch, 1.0f, dy.data(), x_.data(), 1.0f, weight_.grad);
  for (size_t r = 0; r < batch; ++r) {
    for (size_t j = 0; j < shard_; ++j) bias_.grad[j] += dy[r * shard_ + j];
  }
  if (!needs_input_grad) return;
  dx.resize(withCols(dy, in_));
  gemm(false, false, batch, in_, shard_, 1.0f, dy.data(), weight_.value, 0.0f, dx.data());
  // The input fed every rank's shard: its gradient is the sum of the shards' (Megatron's f).
  allReduceSum(dx.data(), dx.numel(), comm_, name_);
  if (counters_ != nullptr && comm_ != nullptr) {
    counters_->backward_bytes += dx.numel() * sizeof(float);
    ++counters_->backward_allreduces;
  }
}

RowParallelLinear::RowParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank,
                                     int tp, std::string name, TensorParallelCounters* counters)
    : out_(out),
      shard_(shardOf(name, "input", in, tp)),
      comm_(tp_comm),
      tp_rank_(tp_rank),
      name_(std::move(name)),
      counters_(counters) {
  weight_ = Parameter{name_ + ".weight", {out, shard_}, out * shard_};
  bias_ = Parameter{name_ + ".bias", {out}, out};
}

void RowParallelLinear::forward(const Tensor& x, Tensor& y) {
  checkCols(name_, x, shard_);
  x_ = x;
  const size_t batch = x.rows();
  y.resize(withCols(x, out_));
  gemm(false, true, batch, out_, shard_, 1.0f, x.data(), weight_.value, 0.0f, y.data());
  // Partial sums over this rank's input features; their sum is x W^T (Megatron's g).
  allReduceSum(y.data(), y.numel(), comm_, name_);
  if (counters_ != nullptr && comm_ != nullptr) {
    counters_->forward_bytes += y.numel() * sizeof(float);
    ++counters_->forward_allreduces;
  }
  for (size_t r = 0; r < batch; ++r) {
    for (size_t j = 0; j < out_; ++j) y[r * out_ + j] += bias_.value[j];
  }
}

void RowParallelLinear::backward(const Tensor& dy, Tensor& dx) {
  checkCols(name_, dy, out_);
  const size_t batch = dy.rows();
  gemm(true, false, out_, shard_, batch, 1.0f, dy.data(), x_.data(), 1.0f, weight_.grad);
  // dy is the same on every rank, so the whole bias gets the same gradient everywhere.
  for (size_t r = 0; r < batch; ++r) {
    for (size_t j = 0; j < out_; ++j) bias_.grad[j] += dy[r * out_ + j];
  }
  if (!needs_input_grad) return;
  dx.resize(withCols(dy, shard_));
  gemm(false, false, batch, shard_, out_, 1.0f, dy.data(), weight_.value, 0.0f, dx.data());
}

std::unique_ptr<Sequential> makeTensorParallelMlp(const std::vector<size_t>& widths, uint64_t seed,
                                                  braidComm_t tp_comm,
                                                  TensorParallelCounters* counters) {
  if (widths.size() < 2) throw std::invalid_argument("makeTensorParallelMlp: needs 2 widths");
  const auto [tp, tp_rank] = tpSizeAndRank(tp_comm);
  const size_t linears = widths.size() - 1;
  auto m = std::make_unique<Sequential>();
  for (size_t i = 0; i < linears; ++i) {
    const std::string name = "fc" + std::to_string(i + 1);
    const size_t in = widths[i], out = widths[i + 1];
    if (i % 2 == 0 && i + 1 < linears) {
      m->add(std::make_unique<ColumnParallelLinear>(in, out, tp_comm, tp_rank, tp, name, counters));
    } else if (i % 2 == 1) {
      m->add(std::make_unique<RowParallelLinear>(in, out, tp_comm, tp_rank, tp, name, counters));
    } else {
      m->add(std::make_unique<Linear>(in, out, name));
    }
    if (i + 1 < linears) m->add(std::make_unique<ReLU>());
  }
  // Draw the whole model's values as makeMlp does, then keep this rank's shards of them.
  m->initialize(seed);
  auto full = makeMlp(widths);
  full->initialize(seed);
  loadShards(*m, *full, tp, tp_rank);
  return m;
}

std::vector<float> gatherTensorParallelMlp(Sequential& model, braidComm_t tp_comm) {
  return gatherWhole(model, tp_comm);
}

TensorParallelSelfAttention::TensorParallelSelfAttention(size_t dim, size_t heads, size_t tokens,
                                                         braidComm_t tp_comm, int tp_rank, int tp,
                                                         std::string name,
                                                         TensorParallelCounters* counters)
    : dim_(dim),
      tokens_(tokens),
      local_heads_(localHeads(name, dim, heads, tokens, tp)),
      name_(std::move(name)),
      qkv_(dim, 3 * dim, tp_comm, tp_rank, tp, name_ + ".qkv", counters),
      proj_(dim, dim, tp_comm, tp_rank, tp, name_ + ".proj", counters) {}

std::vector<Parameter*> TensorParallelSelfAttention::parameters() {
  std::vector<Parameter*> ps = qkv_.parameters();
  for (Parameter* p : proj_.parameters()) ps.push_back(p);
  return ps;
}

size_t TensorParallelSelfAttention::cacheElements() const {
  return qkv_.cacheElements() + qkv_out_.numel() + proj_.cacheElements() + probs_.size();
}

void TensorParallelSelfAttention::releaseCache() {
  qkv_.releaseCache();
  proj_.releaseCache();
  qkv_out_ = Tensor();
  o_ = Tensor();
  std::vector<float>().swap(probs_);
}

void TensorParallelSelfAttention::forward(const Tensor& x, Tensor& y) {
  if (x.rank() != 2 || x.cols() != dim_ || x.rows() % tokens_ != 0) {
    throw std::invalid_argument(name_ + ": input of shape " + x.shapeString() + ", expected [k * " +
                                std::to_string(tokens_) + ", " + std::to_string(dim_) + "]");
  }
  // This rank's rows of each third of Wqkv give [Q K V] of its heads, in the layout the core
  // reads for local_heads_ heads.
  qkv_.forward(x, qkv_out_);
  attentionCoreForward(qkv_out_, tokens_, local_heads_, o_, probs_);
  proj_.forward(o_, y);
}

void TensorParallelSelfAttention::backward(const Tensor& dy, Tensor& dx) {
  Tensor dout, dqkv;
  proj_.backward(dy, dout);
  attentionCoreBackward(qkv_out_, probs_, dout, tokens_, local_heads_, dqkv);
  qkv_.needs_input_grad = needs_input_grad;
  qkv_.backward(dqkv, dx);
}

std::unique_ptr<Sequential> makeTensorParallelVit(size_t height, size_t width, size_t patch,
                                                  size_t dim, size_t heads, size_t depth,
                                                  size_t classes, uint64_t seed,
                                                  braidComm_t tp_comm,
                                                  TensorParallelCounters* counters) {
  const std::pair<int, int> size_rank = tpSizeAndRank(tp_comm);
  // Plain ints: clang 14 cannot capture structured bindings in the lambdas below.
  const int tp = size_rank.first, tp_rank = size_rank.second;
  auto ffn = [&](const std::string& block) {
    std::vector<std::unique_ptr<Layer>> layers;
    layers.push_back(std::make_unique<ColumnParallelLinear>(dim, 2 * dim, tp_comm, tp_rank, tp,
                                                            block + ".fc1", counters));
    layers.push_back(std::make_unique<GELU>());
    layers.push_back(std::make_unique<RowParallelLinear>(2 * dim, dim, tp_comm, tp_rank, tp,
                                                         block + ".fc2", counters));
    return layers;
  };
  auto attention = [&](const std::string& name, size_t tokens) -> std::unique_ptr<Layer> {
    return std::make_unique<TensorParallelSelfAttention>(dim, heads, tokens, tp_comm, tp_rank, tp,
                                                         name, counters);
  };
  auto m = makeVit(height, width, patch, dim, heads, depth, classes, ffn, attention);
  // Draw the whole model's values as makeVit does, then keep this rank's shards of them.
  m->initialize(seed);
  auto full = makeVit(height, width, patch, dim, heads, depth, classes);
  full->initialize(seed);
  loadShards(*m, *full, tp, tp_rank);
  return m;
}

std::vector<float> gatherTensorParallelVit(Sequential& model, braidComm_t tp_comm) {
  return gatherWhole(model, tp_comm);
}

}  // namespace braid::training
