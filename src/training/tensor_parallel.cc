#include "training/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace braid::training {

namespace {

void check(braidResult_t r, braidComm_t comm, const std::string& what) {
  if (r != braidSuccess) {
    throw std::runtime_error(what + " failed: " + braidGetErrorString(r) + ": " +
                             braidGetLastError(comm));
  }
}

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
  check(braidAllReduce(buf, buf, n, braidFloat32, braidSum, comm, nullptr), comm,
        layer + ": braidAllReduce");
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(size_t in, size_t out, braidComm_t tp_comm, int tp_rank,
                                           int tp, std::string name,
                                           TensorParallelCounters* counters)
    : in_(in),
      out_(out),
      shard_(shardOf(name, "output", out, tp)),
      comm_(tp_comm),
      tp_rank_(tp_rank),
      name_(std::move(name)),
      counters_(counters) {
  weight_ = Parameter{name_ + ".weight", {shard_, in}, shard_ * in};
  bias_ = Parameter{name_ + ".bias", {shard_}, shard_};
}

void ColumnParallelLinear::loadShard(Linear& full) {
  if (full.in() != in_ || full.out() != out_) {
    throw std::invalid_argument(name_ + ": loadShard from a Linear of another shape");
  }
  const std::vector<Parameter*> p = full.parameters();
  const size_t r0 = static_cast<size_t>(tp_rank_) * shard_;
  std::memcpy(weight_.value, p[0]->value + r0 * in_, shard_ * in_ * sizeof(float));
  std::memcpy(bias_.value, p[1]->value + r0, shard_ * sizeof(float));
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
    : in_(in),
      out_(out),
      shard_(shardOf(name, "input", in, tp)),
      comm_(tp_comm),
      tp_rank_(tp_rank),
      name_(std::move(name)),
      counters_(counters) {
  weight_ = Parameter{name_ + ".weight", {out, shard_}, out * shard_};
  bias_ = Parameter{name_ + ".bias", {out}, out};
}

void RowParallelLinear::loadShard(Linear& full) {
  if (full.in() != in_ || full.out() != out_) {
    throw std::invalid_argument(name_ + ": loadShard from a Linear of another shape");
  }
  const std::vector<Parameter*> p = full.parameters();
  const size_t c0 = static_cast<size_t>(tp_rank_) * shard_;
  for (size_t o = 0; o < out_; ++o) {
    std::memcpy(weight_.value + o * shard_, p[0]->value + o * in_ + c0, shard_ * sizeof(float));
  }
  std::memcpy(bias_.value, p[1]->value, out_ * sizeof(float));
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
  int tp = 1, tp_rank = 0;
  if (tp_comm != nullptr) {
    check(braidCommCount(tp_comm, &tp), tp_comm, "braidCommCount");
    check(braidCommUserRank(tp_comm, &tp_rank), tp_comm, "braidCommUserRank");
  }
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
  for (size_t i = 0; i < m->numLayers(); ++i) {
    Layer& layer = m->layer(i);
    if (layer.parameters().empty()) continue;
    auto& whole = dynamic_cast<Linear&>(full->layer(i));
    if (auto* c = dynamic_cast<ColumnParallelLinear*>(&layer)) {
      c->loadShard(whole);
    } else if (auto* r = dynamic_cast<RowParallelLinear*>(&layer)) {
      r->loadShard(whole);
    } else {
      const std::vector<Parameter*> dst = layer.parameters(), src = whole.parameters();
      for (size_t j = 0; j < dst.size(); ++j) {
        std::memcpy(dst[j]->value, src[j]->value, src[j]->numel * sizeof(float));
      }
    }
  }
  return m;
}

std::vector<float> gatherTensorParallelMlp(Sequential& model, braidComm_t tp_comm) {
  int tp = 1;
  if (tp_comm != nullptr) check(braidCommCount(tp_comm, &tp), tp_comm, "braidCommCount");
  const size_t n = static_cast<size_t>(tp);
  std::vector<float> out;
  auto gather = [&](const Parameter& p) {
    std::vector<float> all(p.numel * n);
    if (tp_comm == nullptr) {
      std::copy(p.value, p.value + p.numel, all.begin());
    } else {
      check(braidAllGather(p.value, all.data(), p.numel, braidFloat32, tp_comm, nullptr), tp_comm,
            "braidAllGather (" + p.name + ")");
    }
    return all;
  };
  for (size_t i = 0; i < model.numLayers(); ++i) {
    Layer& layer = model.layer(i);
    const std::vector<Parameter*> ps = layer.parameters();
    if (ps.empty() || ps[0]->value == nullptr) continue;  // none, or another stage's
    if (dynamic_cast<ColumnParallelLinear*>(&layer) != nullptr) {
      // Row blocks of W and slices of b, in rank order: concatenation is the whole.
      for (Parameter* p : ps) {
        const std::vector<float> all = gather(*p);
        out.insert(out.end(), all.begin(), all.end());
      }
    } else if (dynamic_cast<RowParallelLinear*>(&layer) != nullptr) {
      // Column blocks of W [out, in / tp]: rank r's row o goes to columns [r in/tp, ...).
      const std::vector<float> all = gather(*ps[0]);
      const size_t rows = ps[0]->shape[0], shard = ps[0]->shape[1];
      for (size_t o = 0; o < rows; ++o) {
        for (size_t r = 0; r < n; ++r) {
          const float* src = all.data() + r * rows * shard + o * shard;
          out.insert(out.end(), src, src + shard);
        }
      }
      out.insert(out.end(), ps[1]->value, ps[1]->value + ps[1]->numel);
    } else {
      for (Parameter* p : ps) out.insert(out.end(), p->value, p->value + p->numel);
    }
  }
  return out;
}

}  // namespace braid::training
