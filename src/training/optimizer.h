// Optimizers over flat fp32 ranges: the data-parallel engine hands each one the elements this
// rank updates (all of them, or its ZeRO shard), with an offset into the optimizer's state.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace braid::training {

/// Where a parameter lies in the optimizer's state space (`offset`, elements) and its matrix
/// shape: rows x cols (a vector is 1 x numel). Only optimizers that treat a matrix as such
/// (AdaFactor's factored second moment) use it.
struct ParameterSlot {
  size_t offset = 0, rows = 1, cols = 0;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Allocates zeroed state for `n` elements (the full model, or this rank's shard).
  virtual void resize(size_t n) = 0;
  /// Starts an optimizer step (counts steps for bias correction).
  virtual void beginStep() {}
  /// Updates param[0, n) from grad[0, n); state elements [state_offset, state_offset + n).
  virtual void update(float* param, const float* grad, size_t n, size_t state_offset) = 0;
  /// Bytes of optimizer state held (momentum 4 per element; Adam 8 per element).
  virtual size_t stateBytes() const = 0;
  virtual std::string name() const = 0;
  /// True if the optimizer needs each parameter whole (setSlots), so that it cannot step a
  /// ZeRO shard, which cuts across matrices.
  virtual bool needsWholeParameters() const { return false; }
  /// The parameters' places and shapes in the range that update() will be given.
  virtual void setSlots(const std::vector<ParameterSlot>& slots) { (void)slots; }
  /// The learning rate of the following steps (a schedule sets it before each step).
  /// The state as values and a step count (every buffer in order), for a rank that must take
  /// over another's (an elastic job's survivors resynchronise after a shrink), and back:
  /// loadState takes what saveState gave on an optimizer of the same kind and size, and
  /// returns false, changing nothing, if the length differs.
  struct State {
    std::vector<float> values;
    long step = 0;
  };
  virtual State saveState() const { return {}; }
  virtual bool loadState(const State& s) { return s.values.empty(); }
  void setLearningRate(float lr) { lr_ = lr; }
  float learningRate() const { return lr_; }

 protected:
  explicit Optimizer(float lr) : lr_(lr) {}
  float lr_;
};

/// SGD with momentum and weight decay, torch.optim.SGD's update:
/// g += wd * p; buf = momentum * buf + g; p -= lr * buf (buf starts at 0, so its first value
/// is g, as in PyTorch). momentum == 0 keeps no state.
class Sgd : public Optimizer {
 public:
  Sgd(float lr, float momentum = 0.9f, float weight_decay = 0.0f)
      : Optimizer(lr), momentum_(momentum), weight_decay_(weight_decay) {}
  void resize(size_t n) override;
  void update(float* param, const float* grad, size_t n, size_t state_offset) override;
  size_t stateBytes() const override { return momentum_buf_.size() * sizeof(float); }
  std::string name() const override { return "sgd"; }
  State saveState() const override { return {momentum_buf_, 0}; }
  bool loadState(const State& s) override {
    if (s.values.size() != momentum_buf_.size()) return false;
    momentum_buf_ = s.values;
    return true;
  }

 private:
  float momentum_, weight_decay_;
  std::vector<float> momentum_buf_;
};

/// AdamW (Loshchilov & Hutter 2019), torch.optim.AdamW's update at step t:
/// p -= lr * wd * p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
/// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
class AdamW : public Optimizer {
 public:
  AdamW(float lr, float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f,
        float weight_decay = 0.01f)
      : Optimizer(lr), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {}
  void resize(size_t n) override;
  void beginStep() override { ++step_; }
  void update(float* param, const float* grad, size_t n, size_t state_offset) override;
  size_t stateBytes() const override { return (m_.size() + v_.size()) * sizeof(float); }
  std::string name() const override { return "adamw"; }
  State saveState() const override;
  bool loadState(const State& s) override;

 private:
  float beta1_, beta2_, eps_, weight_decay_;
  long step_ = 0;
  std::vector<float> m_, v_;
};

/// AdaFactor without momentum (Shazeer & Stern, "Adafactor: Adaptive Learning Rates with
/// Sublinear Memory Cost", ICML 2018, Algorithm 4; the choices of torch.optim.Adafactor): at
/// step t, beta2_t = 1 - t^-0.8; for a matrix G [rows, cols] the second moment is kept as row
/// sums R and column sums C of G^2 + eps1 (decayed by beta2_t), V = R C^T / sum(R); a vector
/// keeps V itself. The update U = G / sqrt(V) is clipped to RMS(U) <= 1 and scaled by the
/// relative step min(lr, 1 / sqrt(t)) * max(eps2, RMS(param)) (after p *= 1 - lr *
/// weight_decay). State: rows + cols floats per matrix instead of Adam's 2 * rows * cols.
/// update() must be given whole parameters (ZeRO stage 0), after setSlots.
class Adafactor : public Optimizer {
 public:
  explicit Adafactor(float lr = 1e-2f, float eps1 = 1e-30f, float eps2 = 1e-3f,
                     float weight_decay = 0.0f)
      : Optimizer(lr), eps1_(eps1), eps2_(eps2), weight_decay_(weight_decay) {}
  void resize(size_t n) override { n_ = n; }
  bool needsWholeParameters() const override { return true; }
  void setSlots(const std::vector<ParameterSlot>& slots) override;
  void beginStep() override { ++step_; }
  /// param and grad hold elements [state_offset, state_offset + n) of the slots' space; every
  /// slot inside that range is stepped. Throws std::logic_error without setSlots.
  void update(float* param, const float* grad, size_t n, size_t state_offset) override;
  size_t stateBytes() const override { return state_.size() * sizeof(float); }
  std::string name() const override { return "adafactor"; }
  State saveState() const override { return {state_, step_}; }
  bool loadState(const State& s) override {
    if (s.values.size() != state_.size()) return false;
    state_ = s.values;
    step_ = s.step;
    return true;
  }

 private:
  float eps1_, eps2_, weight_decay_;
  long step_ = 0;
  size_t n_ = 0;
  std::vector<ParameterSlot> slots_;
  std::vector<size_t> state_offset_;  // per slot: its R (rows) then C (cols), or V (numel)
  std::vector<float> state_;
};

/// Cosine decay (Loshchilov & Hutter's SGDR without restarts): base_lr * (1 + cos(pi * step /
/// total_steps)) / 2 for step in [0, total_steps).
float cosineLearningRate(float base_lr, size_t step, size_t total_steps);

/// "sgd" (momentum 0.9), "adamw" (weight decay 0.01) or "adafactor" at learning rate lr;
/// nullptr for another name.
std::unique_ptr<Optimizer> makeOptimizer(const std::string& name, float lr);

}  // namespace braid::training
