// Dynamic loss scaling for fp16 training (Micikevicius et al., "Mixed Precision Training",
// ICLR 2018; the policy of PyTorch's torch.amp.GradScaler and Megatron-LM's
// DynamicGradScaler). fp16 gradients underflow below 2^-24, so the loss (and with it every
// gradient) is multiplied by a scale S before backward and the gradients divided by S before
// the optimizer step. A step whose gradients hold an inf or NaN is skipped and S halved; after
// `growth_interval` consecutive good steps S doubles.
#pragma once

#include <cstddef>

namespace braid::training {

struct LossScalerOptions {
  float initial_scale = 65536.0f;  ///< 2^16, GradScaler's default
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  long growth_interval = 2000;  ///< good steps in a row before S grows
  float min_scale = 1.0f;       ///< S never drops below (Megatron's min_loss_scale)
};

/// The scale and its update rule. Every rank must feed update() the same verdict (the data-
/// parallel engine all-reduces the overflow flag with braidMax first), so that all ranks keep
/// the same S and skip the same steps.
class LossScaler {
 public:
  /// @throws std::invalid_argument for a non-positive scale, a growth factor <= 1, a backoff
  ///         factor outside (0, 1) or a growth interval < 1.
  explicit LossScaler(LossScalerOptions options = {});
  float scale() const { return scale_; }
  /// Records one step's verdict and returns whether the optimizer may step: found_inf skips the
  /// step, multiplies S by backoff_factor (not below min_scale) and restarts the count of good
  /// steps; otherwise the count grows, and reaching growth_interval multiplies S by
  /// growth_factor and restarts it.
  bool update(bool found_inf);
  long skippedSteps() const { return skipped_; }
  long goodStepsInARow() const { return good_; }

 private:
  LossScalerOptions options_;
  float scale_;
  long good_ = 0, skipped_ = 0;
};

/// True when every x[0, n) is finite (no inf, no NaN).
bool allFinite(const float* x, size_t n);

}  // namespace braid::training
