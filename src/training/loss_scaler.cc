#include "training/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "training/checked_ranges.h"

namespace braid::training {

LossScaler::LossScaler(LossScalerOptions options)
    : options_(options), scale_(options.initial_scale) {
  if (!(options_.initial_scale > 0.0f) || !std::isfinite(options_.initial_scale)) {
    throw std::invalid_argument("LossScaler: initial scale " +
                                std::to_string(options_.initial_scale) + " is not positive");
  }
  if (!(options_.growth_factor > 1.0f)) {
    throw std::invalid_argument("LossScaler: growth factor must exceed 1");
  }
  if (!(options_.backoff_factor > 0.0f && options_.backoff_factor < 1.0f)) {
    throw std::invalid_argument("LossScaler: backoff factor must lie in (0, 1)");
  }
  if (options_.growth_interval < 1) {
    throw std::invalid_argument("LossScaler: growth interval must be at least 1 step");
  }
}

bool LossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= options_.growth_interval) {
    const float grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
    good_ = 0;
  }
  return true;
}

BRAID_RANGE_CHECKED bool allFinite(const float* x, size_t n) {
  readRange(x, n);
  // x - x is 0 for finite x and NaN for inf or NaN; one flag for the whole range vectorises.
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc += x[i] - x[i];
  return acc == 0.0f;
}

}  // namespace braid::training
