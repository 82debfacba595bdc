// Shared by the training tests: a fixed synthetic data set of kSteps global batches (inputs
// in [0, 1), labels in [0, kClasses)) and the relative L2 difference of two parameter vectors.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "training/tensor.h"

namespace braid::training::fixtures {

constexpr size_t kFeatures = 784, kClasses = 10, kGlobalBatch = 32, kSteps = 20;
constexpr uint64_t kSeed = 2024;

struct Synthetic {
  std::vector<float> x;
  std::vector<int32_t> y;
  Synthetic() {
    std::mt19937_64 rng(99);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    x.resize(kSteps * kGlobalBatch * kFeatures);
    y.resize(kSteps * kGlobalBatch);
    for (float& v : x) v = u(rng);
    for (int32_t& l : y) l = static_cast<int32_t>(rng() % kClasses);
  }
  // Rows [first, first + rows) of the whole set.
  void batch(size_t first, size_t rows, Tensor& xt, std::vector<int32_t>& yt) const {
    xt = Tensor({rows, kFeatures}, std::vector<float>(x.begin() + first * kFeatures,
                                                      x.begin() + (first + rows) * kFeatures));
    yt.assign(y.begin() + first, y.begin() + first + rows);
  }
};

inline const Synthetic& data() {
  static const Synthetic s;
  return s;
}

// ||a - b|| / ||b||, in double.
inline double relativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    norm += double{b[i]} * b[i];
  }
  return std::sqrt(diff / norm);
}

// The parity bound of relativeDifference after a few steps: 1e-6 in fp32 (only the order of
// floating-point sums differs), but 1e-5 with Adam(W). A few weights get a first-step
// gradient of a few 1e-9 (a cancellation, ~1e-6 of their row's largest), below Adam's eps of
// 1e-8, where lr g / (sqrt(v) + eps) follows g's rounding almost proportionally, so splitting
// a product's sum over ranks moves such a weight by up to ~1e-5, the whole vector by 1e-7 to
// 3e-6 depending on BLAS's kernel (DDP on 4 ranks: 5e-7 with OpenBLAS's Cooperlake kernels,
// 2.8e-6 with the Haswell ones it picks on an AMD EPYC). SGD keeps those updates as small as the
// gradient.
inline double parityBound(const std::string& optimizer) {
  return optimizer == "adamw" ? 1e-5 : 1e-6;
}

}  // namespace braid::training::fixtures
