#include "training/attention.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid::training {

namespace {

void uniformInit(Parameter& p, float bound, std::mt19937_64& rng) {
  uniformFill(rng, -bound, bound, p.value, p.numel);
}

// Column sums of m [rows, cols] added into out [cols].
void addColumnSums(const float* m, size_t rows, size_t cols, float* out) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) out[c] += m[r * cols + c];
  }
}

// Rows [first, first + rows) and columns [col, col + n) of m (row stride ld) into out [rows, n].
void copyBlock(const float* m, size_t ld, size_t first, size_t rows, size_t col, size_t n,
               float* out) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < n; ++c) out[r * n + c] = m[(first + r) * ld + col + c];
  }
}

void storeBlock(const float* in, size_t ld, size_t first, size_t rows, size_t col, size_t n,
                float* m) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < n; ++c) m[(first + r) * ld + col + c] = in[r * n + c];
  }
}

// One head's Q, K, V [rows, dh] (rows [first, first + rows), columns col of each third of
// qkv).
void copyHead(const Tensor& qkv, size_t first, size_t rows, size_t col, size_t dh,
              std::vector<float>& q, std::vector<float>& k, std::vector<float>& v) {
  const size_t d3 = qkv.cols(), width = d3 / 3;
  copyBlock(qkv.data(), d3, first, rows, col, dh, q.data());
  copyBlock(qkv.data(), d3, first, rows, width + col, dh, k.data());
  copyBlock(qkv.data(), d3, first, rows, 2 * width + col, dh, v.data());
}

}  // namespace

PatchEmbedding::PatchEmbedding(size_t height, size_t width, size_t patch, size_t dim,
                               std::string name)
    : height_(height), width_(width), patch_(patch), dim_(dim), name_(std::move(name)) {
  if (patch == 0 || height % patch != 0 || width % patch != 0) {
    throw std::invalid_argument(name_ + ": patch " + std::to_string(patch) + " does not divide " +
                                std::to_string(height) + "x" + std::to_string(width) + " images");
  }
  tokens_ = (height / patch) * (width / patch);
  weight_ = Parameter{name_ + ".weight", {dim, patch * patch}, dim * patch * patch};
  bias_ = Parameter{name_ + ".bias", {dim}, dim};
  position_ = Parameter{name_ + ".position", {tokens_, dim}, tokens_ * dim};
}

void PatchEmbedding::initialize(std::mt19937_64& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(patch_ * patch_));
  uniformInit(weight_, bound, rng);
  uniformInit(bias_, bound, rng);
  std::normal_distribution<float> n(0.0f, 0.02f);
  for (size_t i = 0; i < position_.numel; ++i) position_.value[i] = n(rng);
}

size_t PatchEmbedding::pixel(size_t t, size_t k) const {
  const size_t per_row = width_ / patch_;
  const size_t row = (t / per_row) * patch_ + k / patch_;
  const size_t col = (t % per_row) * patch_ + k % patch_;
  return row * width_ + col;
}

void PatchEmbedding::forward(const Tensor& x, Tensor& y) {
  const size_t pixels = height_ * width_, pp = patch_ * patch_;
  if (x.rank() != 2 || x.cols() != pixels) {
    throw std::invalid_argument(name_ + ": input of shape " + x.shapeString() + ", expected [*, " +
                                std::to_string(pixels) + "]");
  }
  const size_t batch = x.rows();
  patches_.resize({batch * tokens_, pp});
  for (size_t b = 0; b < batch; ++b) {
    for (size_t t = 0; t < tokens_; ++t) {
      for (size_t k = 0; k < pp; ++k) {
        patches_[(b * tokens_ + t) * pp + k] = x[b * pixels + pixel(t, k)];
      }
    }
  }
  y.resize({batch * tokens_, dim_});
  for (size_t b = 0; b < batch; ++b) {
    for (size_t t = 0; t < tokens_; ++t) {
      for (size_t j = 0; j < dim_; ++j) {
        y[(b * tokens_ + t) * dim_ + j] = bias_.value[j] + position_.value[t * dim_ + j];
      }
    }
  }
  gemm(false, true, batch * tokens_, dim_, pp, 1.0f, patches_.data(), weight_.value, 1.0f,
       y.data());
}

void PatchEmbedding::backward(const Tensor& dy, Tensor& dx) {
  const size_t rows = dy.rows(), pp = patch_ * patch_, batch = rows / tokens_;
  gemm(true, false, dim_, pp, rows, 1.0f, dy.data(), patches_.data(), 1.0f, weight_.grad);
  addColumnSums(dy.data(), rows, dim_, bias_.grad);
  for (size_t b = 0; b < batch; ++b) {
    addColumnSums(dy.data() + b * tokens_ * dim_, 1, tokens_ * dim_, position_.grad);
  }
  if (!needs_input_grad) return;
  Tensor dpatches({rows, pp});
  gemm(false, false, rows, pp, dim_, 1.0f, dy.data(), weight_.value, 0.0f, dpatches.data());
  const size_t pixels = height_ * width_;
  dx.resize({batch, pixels});
  for (size_t b = 0; b < batch; ++b) {
    for (size_t t = 0; t < tokens_; ++t) {
      for (size_t k = 0; k < pp; ++k) {
        dx[b * pixels + pixel(t, k)] = dpatches[(b * tokens_ + t) * pp + k];
      }
    }
  }
}

MultiHeadSelfAttention::MultiHeadSelfAttention(size_t dim, size_t heads, size_t tokens,
                                               std::string name)
    : dim_(dim), heads_(heads), tokens_(tokens), name_(std::move(name)) {
  if (heads == 0 || dim % heads != 0 || tokens == 0) {
    throw std::invalid_argument(name_ + ": " + std::to_string(heads) + " heads do not divide dim " +
                                std::to_string(dim) + " (or no tokens)");
  }
  head_dim_ = dim / heads;
  wqkv_ = Parameter{name_ + ".qkv.weight", {3 * dim, dim}, 3 * dim * dim};
  bqkv_ = Parameter{name_ + ".qkv.bias", {3 * dim}, 3 * dim};
  wo_ = Parameter{name_ + ".proj.weight", {dim, dim}, dim * dim};
  bo_ = Parameter{name_ + ".proj.bias", {dim}, dim};
}

void MultiHeadSelfAttention::releaseCache() {
  x_ = Tensor();
  qkv_ = Tensor();
  o_ = Tensor();
  std::vector<float>().swap(probs_);
}

void MultiHeadSelfAttention::initialize(std::mt19937_64& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(dim_));
  uniformInit(wqkv_, bound, rng);
  uniformInit(bqkv_, bound, rng);
  uniformInit(wo_, bound, rng);
  uniformInit(bo_, bound, rng);
}

void attentionCoreForward(const Tensor& qkv, size_t tokens, size_t heads, Tensor& o,
                          std::vector<float>& probs) {
  const size_t rows = qkv.rows(), batch = rows / tokens, T = tokens, d3 = qkv.cols();
  const size_t width = d3 / 3, dh = width / heads;
  o.resize({rows, width});
  probs.assign(batch * heads * T * T, 0.0f);
  std::vector<float> q(T * dh), k(T * dh), v(T * dh), oh(T * dh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (size_t b = 0; b < batch; ++b) {
    for (size_t h = 0; h < heads; ++h) {
      copyHead(qkv, b * T, T, h * dh, dh, q, k, v);
      float* a = probs.data() + (b * heads + h) * T * T;
      gemm(false, true, T, T, dh, scale, q.data(), k.data(), 0.0f, a);
      for (size_t i = 0; i < T; ++i) {
        float* row = a + i * T;
        float mx = row[0];
        for (size_t j = 1; j < T; ++j) mx = std::max(mx, row[j]);
        double sum = 0.0;
        for (size_t j = 0; j < T; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        for (size_t j = 0; j < T; ++j) row[j] = static_cast<float>(row[j] / sum);
      }
      gemm(false, false, T, dh, T, 1.0f, a, v.data(), 0.0f, oh.data());
      storeBlock(oh.data(), width, b * T, T, h * dh, dh, o.data());
    }
  }
}

void attentionCoreBackward(const Tensor& qkv, const std::vector<float>& probs, const Tensor& dout,
                           size_t tokens, size_t heads, Tensor& dqkv) {
  const size_t rows = qkv.rows(), batch = rows / tokens, T = tokens, d3 = qkv.cols();
  const size_t width = d3 / 3, dh = width / heads;
  // Per sequence and head: dA = dO V^T, dV = A^T dO, dS = A * (dA - rowsum(dA * A)) / sqrt(dh),
  // dQ = dS K, dK = dS^T Q.
  dqkv.resize({rows, d3});
  std::vector<float> q(T * dh), k(T * dh), v(T * dh), dO(T * dh), da(T * T), dq(T * dh), dk(T * dh),
      dv(T * dh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  for (size_t b = 0; b < batch; ++b) {
    for (size_t h = 0; h < heads; ++h) {
      copyHead(qkv, b * T, T, h * dh, dh, q, k, v);
      copyBlock(dout.data(), width, b * T, T, h * dh, dh, dO.data());
      const float* a = probs.data() + (b * heads + h) * T * T;
      gemm(false, true, T, T, dh, 1.0f, dO.data(), v.data(), 0.0f, da.data());
      gemm(true, false, T, dh, T, 1.0f, a, dO.data(), 0.0f, dv.data());
      for (size_t i = 0; i < T; ++i) {
        double dot = 0.0;
        for (size_t j = 0; j < T; ++j) dot += double{da[i * T + j]} * a[i * T + j];
        for (size_t j = 0; j < T; ++j) {
          da[i * T + j] = a[i * T + j] * static_cast<float>(da[i * T + j] - dot) * scale;
        }
      }
      gemm(false, false, T, dh, T, 1.0f, da.data(), k.data(), 0.0f, dq.data());
      gemm(true, false, T, dh, T, 1.0f, da.data(), q.data(), 0.0f, dk.data());
      storeBlock(dq.data(), d3, b * T, T, h * dh, dh, dqkv.data());
      storeBlock(dk.data(), d3, b * T, T, width + h * dh, dh, dqkv.data());
      storeBlock(dv.data(), d3, b * T, T, 2 * width + h * dh, dh, dqkv.data());
    }
  }
}

void MultiHeadSelfAttention::forward(const Tensor& x, Tensor& y) {
  if (x.rank() != 2 || x.cols() != dim_ || x.rows() % tokens_ != 0) {
    throw std::invalid_argument(name_ + ": input of shape " + x.shapeString() + ", expected [k * " +
                                std::to_string(tokens_) + ", " + std::to_string(dim_) + "]");
  }
  x_ = x;
  const size_t rows = x.rows(), d3 = 3 * dim_;
  qkv_.resize({rows, d3});
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < d3; ++j) qkv_[r * d3 + j] = bqkv_.value[j];
  }
  gemm(false, true, rows, d3, dim_, 1.0f, x.data(), wqkv_.value, 1.0f, qkv_.data());
  attentionCoreForward(qkv_, tokens_, heads_, o_, probs_);
  y.resize({rows, dim_});
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < dim_; ++j) y[r * dim_ + j] = bo_.value[j];
  }
  gemm(false, true, rows, dim_, dim_, 1.0f, o_.data(), wo_.value, 1.0f, y.data());
}

void MultiHeadSelfAttention::backward(const Tensor& dy, Tensor& dx) {
  const size_t rows = dy.rows(), d3 = 3 * dim_;
  // Output projection.
  gemm(true, false, dim_, dim_, rows, 1.0f, dy.data(), o_.data(), 1.0f, wo_.grad);
  addColumnSums(dy.data(), rows, dim_, bo_.grad);
  Tensor dout({rows, dim_}), dqkv;
  gemm(false, false, rows, dim_, dim_, 1.0f, dy.data(), wo_.value, 0.0f, dout.data());
  attentionCoreBackward(qkv_, probs_, dout, tokens_, heads_, dqkv);
  gemm(true, false, d3, dim_, rows, 1.0f, dqkv.data(), x_.data(), 1.0f, wqkv_.grad);
  addColumnSums(dqkv.data(), rows, d3, bqkv_.grad);
  if (!needs_input_grad) return;
  dx.resize({rows, dim_});
  gemm(false, false, rows, dim_, d3, 1.0f, dqkv.data(), wqkv_.value, 0.0f, dx.data());
}

Residual::Residual(std::vector<std::unique_ptr<Layer>> layers, std::string name)
    : layers_(std::move(layers)), name_(std::move(name)) {
  if (layers_.empty()) throw std::invalid_argument(name_ + ": a residual needs at least 1 layer");
}

std::vector<Parameter*> Residual::parameters() {
  std::vector<Parameter*> out;
  for (auto& l : layers_) {
    for (Parameter* p : l->parameters()) out.push_back(p);
  }
  return out;
}

void Residual::initialize(std::mt19937_64& rng) {
  for (auto& l : layers_) l->initialize(rng);
}

// The outputs_ are scratch (each inner layer keeps its own input), so they are not counted.
size_t Residual::cacheElements() const {
  size_t n = 0;
  for (const auto& l : layers_) n += l->cacheElements();
  return n;
}

void Residual::releaseCache() {
  for (auto& l : layers_) l->releaseCache();
  std::vector<Tensor>().swap(outputs_);
}

void Residual::forward(const Tensor& x, Tensor& y) {
  outputs_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(i == 0 ? x : outputs_[i - 1], outputs_[i]);
  }
  const Tensor& f = outputs_.back();
  if (f.shape() != x.shape()) {
    throw std::invalid_argument(name_ + ": its layers map " + x.shapeString() + " to " +
                                f.shapeString() + "; a residual needs the same shape");
  }
  y.resize(x.shape());
  for (size_t i = 0; i < x.numel(); ++i) y[i] = x[i] + f[i];
}

void Residual::backward(const Tensor& dy, Tensor& dx) {
  Tensor a = dy, b;
  for (size_t i = layers_.size(); i-- > 0;) {
    layers_[i]->backward(a, b);
    std::swap(a, b);
  }
  dx.resize(dy.shape());
  for (size_t i = 0; i < dy.numel(); ++i) dx[i] = dy[i] + a[i];
}

void TokenMeanPool::forward(const Tensor& x, Tensor& y) {
  if (x.rank() != 2 || x.rows() % tokens_ != 0) {
    throw std::invalid_argument("token_mean_pool: input of shape " + x.shapeString() +
                                " is not [k * " + std::to_string(tokens_) + ", dim]");
  }
  const size_t batch = x.rows() / tokens_, dim = x.cols();
  y.resize({batch, dim});
  y.fill(0.0f);
  const float inv = 1.0f / static_cast<float>(tokens_);
  for (size_t r = 0; r < x.rows(); ++r) {
    for (size_t j = 0; j < dim; ++j) y[(r / tokens_) * dim + j] += x[r * dim + j] * inv;
  }
}

void TokenMeanPool::backward(const Tensor& dy, Tensor& dx) {
  const size_t batch = dy.rows(), dim = dy.cols();
  dx.resize({batch * tokens_, dim});
  const float inv = 1.0f / static_cast<float>(tokens_);
  for (size_t r = 0; r < batch * tokens_; ++r) {
    for (size_t j = 0; j < dim; ++j) dx[r * dim + j] = dy[(r / tokens_) * dim + j] * inv;
  }
}

std::unique_ptr<Sequential> makeVit(size_t height, size_t width, size_t patch, size_t dim,
                                    size_t heads, size_t depth, size_t classes,
                                    const VitFeedForward& ffn, const VitAttention& attention) {
  auto m = std::make_unique<Sequential>();
  auto embed = std::make_unique<PatchEmbedding>(height, width, patch, dim);
  const size_t tokens = embed->tokens();
  m->add(std::move(embed));
  for (size_t d = 0; d < depth; ++d) {
    const std::string block = "block" + std::to_string(d);
    std::vector<std::unique_ptr<Layer>> attn;
    attn.push_back(std::make_unique<LayerNorm>(dim, 1e-5f, block + ".ln1"));
    if (attention) {
      attn.push_back(attention(block + ".attn", tokens));
    } else {
      attn.push_back(std::make_unique<MultiHeadSelfAttention>(dim, heads, tokens, block + ".attn"));
    }
    m->add(std::make_unique<Residual>(std::move(attn), block + ".attn_residual"));
    std::vector<std::unique_ptr<Layer>> mlp;
    mlp.push_back(std::make_unique<LayerNorm>(dim, 1e-5f, block + ".ln2"));
    if (ffn) {
      for (auto& layer : ffn(block)) mlp.push_back(std::move(layer));
    } else {
      mlp.push_back(std::make_unique<Linear>(dim, 2 * dim, block + ".fc1"));
      mlp.push_back(std::make_unique<GELU>());
      mlp.push_back(std::make_unique<Linear>(2 * dim, dim, block + ".fc2"));
    }
    m->add(std::make_unique<Residual>(std::move(mlp), block + ".mlp_residual"));
  }
  m->add(std::make_unique<LayerNorm>(dim, 1e-5f, "ln"));
  m->add(std::make_unique<TokenMeanPool>(tokens));
  m->add(std::make_unique<Linear>(dim, classes, "head"));
  return m;
}

}  // namespace braid::training
