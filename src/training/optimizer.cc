#include "training/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/checked_ranges.h"

namespace braid::training {

void Sgd::resize(size_t n) { momentum_buf_.assign(momentum_ != 0.0f ? n : 0, 0.0f); }

BRAID_RANGE_CHECKED void Sgd::update(float* param, const float* grad, size_t n,
                                     size_t state_offset) {
  float* buf = momentum_buf_.empty() ? nullptr : momentum_buf_.data() + state_offset;
  readRange(grad, n), writeRange(param, n);
  if (buf) writeRange(buf, n);
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i] + weight_decay_ * param[i];
    if (buf) {
      buf[i] = momentum_ * buf[i] + g;
      g = buf[i];
    }
    param[i] -= lr_ * g;
  }
}

void AdamW::resize(size_t n) {
  m_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
}

Optimizer::State AdamW::saveState() const {
  State s{m_, step_};
  s.values.insert(s.values.end(), v_.begin(), v_.end());
  return s;
}

bool AdamW::loadState(const State& s) {
  if (s.values.size() != m_.size() + v_.size()) return false;
  const auto half = s.values.begin() + static_cast<std::ptrdiff_t>(m_.size());
  m_.assign(s.values.begin(), half);
  v_.assign(half, s.values.end());
  step_ = s.step;
  return true;
}

BRAID_RANGE_CHECKED void AdamW::update(float* param, const float* grad, size_t n,
                                       size_t state_offset) {
  const float bc1 = 1.0f - std::pow(beta1_, static_cast<float>(step_));
  const float bc2 = 1.0f - std::pow(beta2_, static_cast<float>(step_));
  const float step_size = lr_ / bc1;
  const float bc2_sqrt = std::sqrt(bc2);
  float* m = m_.data() + state_offset;
  float* v = v_.data() + state_offset;
  readRange(grad, n), writeRange(param, n), writeRange(m, n), writeRange(v, n);
  for (size_t i = 0; i < n; ++i) {
    param[i] *= 1.0f - lr_ * weight_decay_;
    m[i] = beta1_ * m[i] + (1.0f - beta1_) * grad[i];
    v[i] = beta2_ * v[i] + (1.0f - beta2_) * grad[i] * grad[i];
    param[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps_);
  }
}

void Adafactor::setSlots(const std::vector<ParameterSlot>& slots) {
  slots_ = slots;
  state_offset_.clear();
  size_t total = 0;
  for (const ParameterSlot& slot : slots_) {
    state_offset_.push_back(total);
    total += slot.rows > 1 ? slot.rows + slot.cols : slot.cols;
  }
  state_.assign(total, 0.0f);
}

void Adafactor::update(float* param, const float* grad, size_t n, size_t state_offset) {
  if (slots_.empty() && n > 0) {
    throw std::logic_error("Adafactor::update: no parameter slots (call setSlots first)");
  }
  const double beta2 = 1.0 - std::pow(static_cast<double>(step_), -0.8);
  std::vector<double> u;
  for (size_t s = 0; s < slots_.size(); ++s) {
    const ParameterSlot& slot = slots_[s];
    if (slot.offset < state_offset || slot.offset + slot.rows * slot.cols > state_offset + n) {
      continue;
    }
    float* p = param + (slot.offset - state_offset);
    const float* g = grad + (slot.offset - state_offset);
    const size_t rows = slot.rows, cols = slot.cols, numel = rows * cols;
    float* st = state_.data() + state_offset_[s];
    u.assign(numel, 0.0);
    if (rows > 1) {
      float* r = st;
      float* c = st + rows;
      std::vector<double> row_sum(rows, 0.0), col_sum(cols, 0.0);
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < cols; ++j) {
          const double sq = double{g[i * cols + j]} * g[i * cols + j] + eps1_;
          row_sum[i] += sq;
          col_sum[j] += sq;
        }
      }
      double r_total = 0.0;
      for (size_t i = 0; i < rows; ++i) {
        r[i] = static_cast<float>(beta2 * r[i] + (1.0 - beta2) * row_sum[i]);
        r_total += r[i];
      }
      for (size_t j = 0; j < cols; ++j) {
        c[j] = static_cast<float>(beta2 * c[j] + (1.0 - beta2) * col_sum[j]);
      }
      for (size_t i = 0; i < rows; ++i) {
        for (size_t j = 0; j < cols; ++j) {
          const double v = double{r[i]} * c[j] / r_total;
          u[i * cols + j] = g[i * cols + j] / std::sqrt(v);
        }
      }
    } else {
      for (size_t j = 0; j < numel; ++j) {
        st[j] = static_cast<float>(beta2 * st[j] + (1.0 - beta2) * (double{g[j]} * g[j] + eps1_));
        u[j] = g[j] / std::sqrt(double{st[j]});
      }
    }
    double u_sq = 0.0, p_sq = 0.0;
    for (size_t j = 0; j < numel; ++j) {
      u_sq += u[j] * u[j];
      p_sq += double{p[j]} * p[j];
    }
    const double rms_u = std::sqrt(u_sq / static_cast<double>(numel));
    const double rms_p = std::sqrt(p_sq / static_cast<double>(numel));
    const double rho = std::min(static_cast<double>(lr_), 1.0 / std::sqrt(double(step_)));
    const double alpha = rho * std::max(static_cast<double>(eps2_), rms_p);
    const double scale = alpha / std::max(1.0, rms_u);
    for (size_t j = 0; j < numel; ++j) {
      p[j] = static_cast<float>(p[j] * (1.0 - double{lr_} * weight_decay_) - scale * u[j]);
    }
  }
}

float cosineLearningRate(float base_lr, size_t step, size_t total_steps) {
  if (total_steps == 0) return base_lr;
  const double t = static_cast<double>(step) / static_cast<double>(total_steps);
  return static_cast<float>(base_lr * 0.5 * (1.0 + std::cos(M_PI * t)));
}

std::unique_ptr<Optimizer> makeOptimizer(const std::string& name, float lr) {
  if (name == "sgd") return std::make_unique<Sgd>(lr, 0.9f, 0.0f);
  if (name == "adamw") return std::make_unique<AdamW>(lr);
  if (name == "adafactor") return std::make_unique<Adafactor>(lr);
  return nullptr;
}

}  // namespace braid::training
