#include "training/layers.h"

#include <cmath>
#include <stdexcept>

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
}  // namespace

Linear::Linear(size_t in, size_t out, std::string name)
    : in_(in), out_(out), name_(std::move(name)) {
  weight_ = Parameter{name_ + ".weight", {out, in}, out * in};
  bias_ = Parameter{name_ + ".bias", {out}, out};
}

void Linear::initialize(std::mt19937_64& rng) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(in_));
  uniformFill(rng, -bound, bound, weight_.value, weight_.numel);
  uniformFill(rng, -bound, bound, bias_.value, bias_.numel);
}

void Linear::forward(const Tensor& x, Tensor& y) {
  checkCols(name_, x, in_);
  x_ = x;
  const size_t batch = x.rows();
  y.resize(withCols(x, out_));
  for (size_t r = 0; r < batch; ++r) {
    for (size_t j = 0; j < out_; ++j) y[r * out_ + j] = bias_.value[j];
  }
  gemm(false, true, batch, out_, in_, 1.0f, x.data(), weight_.value, 1.0f, y.data());
}

void Linear::backward(const Tensor& dy, Tensor& dx) {
  checkCols(name_, dy, out_);
  const size_t batch = dy.rows();
  // dW [out, in] += dy^T [out, batch] x [batch, in]; db += column sums of dy.
  gemm(true, false, out_, in_, batch, 1.0f, dy.data(), x_.data(), 1.0f, weight_.grad);
  for (size_t r = 0; r < batch; ++r) {
    for (size_t j = 0; j < out_; ++j) bias_.grad[j] += dy[r * out_ + j];
  }
  if (!needs_input_grad) return;
  dx.resize(withCols(dy, in_));
  gemm(false, false, batch, in_, out_, 1.0f, dy.data(), weight_.value, 0.0f, dx.data());
}

void ReLU::forward(const Tensor& x, Tensor& y) {
  x_ = x;
  y.resize(x.shape());
  for (size_t i = 0; i < x.numel(); ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ReLU::backward(const Tensor& dy, Tensor& dx) {
  dx.resize(dy.shape());
  for (size_t i = 0; i < dy.numel(); ++i) dx[i] = x_[i] > 0.0f ? dy[i] : 0.0f;
}

void GELU::forward(const Tensor& x, Tensor& y) {
  x_ = x;
  y.resize(x.shape());
  for (size_t i = 0; i < x.numel(); ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * M_SQRT1_2)));
  }
}

void GELU::backward(const Tensor& dy, Tensor& dx) {
  dx.resize(dy.shape());
  const double inv_sqrt_2pi = 0.5 * M_2_SQRTPI * M_SQRT1_2;
  for (size_t i = 0; i < dy.numel(); ++i) {
    const double v = x_[i];
    const double cdf = 0.5 * (1.0 + std::erf(v * M_SQRT1_2));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * v * v);
    dx[i] = static_cast<float>(dy[i] * (cdf + v * pdf));
  }
}

LayerNorm::LayerNorm(size_t features, float eps, std::string name)
    : features_(features), eps_(eps), name_(std::move(name)) {
  gamma_ = Parameter{name_ + ".weight", {features}, features};
  beta_ = Parameter{name_ + ".bias", {features}, features};
}

void LayerNorm::initialize(std::mt19937_64& rng) {
  (void)rng;
  for (size_t i = 0; i < features_; ++i) {
    gamma_.value[i] = 1.0f;
    beta_.value[i] = 0.0f;
  }
}

void LayerNorm::forward(const Tensor& x, Tensor& y) {
  checkCols(name_, x, features_);
  const size_t rows = x.rows(), n = features_;
  xhat_.resize(x.shape());
  y.resize(x.shape());
  rstd_.assign(rows, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * n;
    double mean = 0.0, var = 0.0;
    for (size_t i = 0; i < n; ++i) mean += xr[i];
    mean /= static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(n);
    const float rstd = static_cast<float>(1.0 / std::sqrt(var + eps_));
    rstd_[r] = rstd;
    for (size_t i = 0; i < n; ++i) {
      const float h = static_cast<float>(xr[i] - mean) * rstd;
      xhat_[r * n + i] = h;
      y[r * n + i] = h * gamma_.value[i] + beta_.value[i];
    }
  }
}

void LayerNorm::backward(const Tensor& dy, Tensor& dx) {
  checkCols(name_, dy, features_);
  const size_t rows = dy.rows(), n = features_;
  dx.resize(dy.shape());
  for (size_t r = 0; r < rows; ++r) {
    const float* g = dy.data() + r * n;
    const float* h = xhat_.data() + r * n;
    // dx = rstd * (dh - mean(dh) - h * mean(dh * h)), dh = dy * gamma.
    double sum_dh = 0.0, sum_dh_h = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double dh = static_cast<double>(g[i]) * gamma_.value[i];
      sum_dh += dh;
      sum_dh_h += dh * h[i];
      gamma_.grad[i] += g[i] * h[i];
      beta_.grad[i] += g[i];
    }
    const double mean_dh = sum_dh / static_cast<double>(n);
    const double mean_dh_h = sum_dh_h / static_cast<double>(n);
    for (size_t i = 0; i < n; ++i) {
      const double dh = static_cast<double>(g[i]) * gamma_.value[i];
      dx[r * n + i] = static_cast<float>(rstd_[r] * (dh - mean_dh - h[i] * mean_dh_h));
    }
  }
}

float SoftmaxCrossEntropy::forward(const Tensor& logits, const std::vector<int32_t>& labels) {
  const size_t batch = logits.rows(), classes = logits.cols();
  if (labels.size() != batch) {
    throw std::invalid_argument("SoftmaxCrossEntropy: " + std::to_string(labels.size()) +
                                " labels for logits of shape " + logits.shapeString());
  }
  probs_.resize(logits.shape());
  labels_ = labels;
  correct_ = 0;
  double loss = 0.0;
  for (size_t r = 0; r < batch; ++r) {
    const int32_t label = labels[r];
    if (label < 0 || static_cast<size_t>(label) >= classes) {
      throw std::invalid_argument("SoftmaxCrossEntropy: label " + std::to_string(label) +
                                  " of row " + std::to_string(r) + " is not in [0, " +
                                  std::to_string(classes) + ")");
    }
    const float* z = logits.data() + r * classes;
    size_t argmax = 0;
    for (size_t c = 1; c < classes; ++c) {
      if (z[c] > z[argmax]) argmax = c;
    }
    if (argmax == static_cast<size_t>(label)) ++correct_;
    double sum = 0.0;
    for (size_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - z[argmax]));
    for (size_t c = 0; c < classes; ++c) {
      probs_[r * classes + c] =
          static_cast<float>(std::exp(static_cast<double>(z[c] - z[argmax])) / sum);
    }
    loss += std::log(sum) - static_cast<double>(z[label] - z[argmax]);
  }
  return batch ? static_cast<float>(loss / static_cast<double>(batch)) : 0.0f;
}

void SoftmaxCrossEntropy::backward(Tensor& dlogits) const {
  const size_t batch = probs_.rows(), classes = probs_.cols();
  dlogits.resize(probs_.shape());
  const float scale = batch ? 1.0f / static_cast<float>(batch) : 0.0f;
  for (size_t r = 0; r < batch; ++r) {
    for (size_t c = 0; c < classes; ++c) {
      const float onehot = static_cast<size_t>(labels_[r]) == c ? 1.0f : 0.0f;
      dlogits[r * classes + c] = (probs_[r * classes + c] - onehot) * scale;
    }
  }
}

}  // namespace braid::training
