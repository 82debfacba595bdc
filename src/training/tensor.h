// Host tensors for the training layer: a row-major fp32 array with a shape, bf16 storage
// conversions, and the matrix product through BLAS (cblas_sgemm).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace braid::training {

/// Fills x[0, n) with values uniform in [lo, hi] (hi itself only where the fp32 arithmetic
/// rounds up to it, as libstdc++'s can): each is u * (hi - lo) + lo in fp32, with u
/// one rng() draw converted to float (round to nearest) times 2^-64, or the float just below 1
/// where that rounds up to 1. These are the values of libstdc++'s
/// std::uniform_real_distribution<float> over std::mt19937_64 (its generate_canonical takes
/// one draw for 24 bits), which layers drew their initial weights with (PyTorch's nn.Linear
/// default: uniform in +-1/sqrt(fan_in)), defined here: another standard library's gives other
/// weights for the same seed, and libstdc++'s takes a long-double logarithm per draw, most of
/// a small model's set-up time.
void uniformFill(std::mt19937_64& rng, float lo, float hi, float* x, size_t n);

/// A dense row-major fp32 tensor on the host. Shape [d0, d1, ...]; numel() elements.
/// A 2-D tensor [rows, cols] is the usual activation layout [batch, features].
class Tensor {
 public:
  Tensor() = default;
  /// Zero-filled tensor of the given shape.
  explicit Tensor(std::vector<size_t> shape);
  Tensor(std::vector<size_t> shape, std::vector<float> values);

  const std::vector<size_t>& shape() const { return shape_; }
  size_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }
  size_t numel() const { return data_.size(); }
  /// Rows and columns of a 2-D view: the last dimension is the columns, the others rows.
  size_t rows() const { return shape_.empty() ? 0 : numel() / shape_.back(); }
  size_t cols() const { return shape_.empty() ? 0 : shape_.back(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  float& operator[](size_t i) { return data_[i]; }
  float operator[](size_t i) const { return data_[i]; }
  /// Reshapes to `shape` (same numel) or, when numel differs, reallocates zero-filled.
  void resize(std::vector<size_t> shape);
  void fill(float v);
  std::string shapeString() const;

 private:
  std::vector<size_t> shape_;
  std::vector<float> data_;
};

/// bfloat16 storage: the upper 16 bits of an fp32 (8-bit exponent, 7-bit mantissa).
struct Bf16 {
  uint16_t bits = 0;
};
/// fp32 -> bf16, rounding to nearest even; NaN stays NaN (quiet).
Bf16 toBf16(float x);
float fromBf16(Bf16 x);
void toBf16(const float* in, Bf16* out, size_t n);
void fromBf16(const Bf16* in, float* out, size_t n);

/// IEEE 754 binary16 storage (5-bit exponent, 10-bit mantissa, largest finite 65504).
struct Fp16 {
  uint16_t bits = 0;
};
/// fp32 -> fp16, rounding to nearest even: values beyond 65504 (after rounding) become inf,
/// small ones subnormal or zero; NaN stays NaN (quiet).
Fp16 toFp16(float x);
float fromFp16(Fp16 x);
void toFp16(const float* in, Fp16* out, size_t n);
void fromFp16(const Fp16* in, float* out, size_t n);

/// The precision of compute (parameters and activations as forward and backward see them).
/// Host tensors stay fp32 arrays: a 16-bit precision is emulated by rounding the values to
/// those of the 16-bit format (round to nearest even), so products run through sgemm on
/// operands that a bf16/fp16 unit would see, accumulating in fp32 as tensor cores do.
enum class Precision { kFp32, kBf16, kFp16 };
/// "fp32", "bf16" or "fp16".
const char* precisionName(Precision p);
/// Bytes one element occupies in precision p (4 or 2).
size_t bytesPerElement(Precision p);
/// Rounds x[0, n) in place to values of precision p (no-op for fp32).
void roundTo(Precision p, float* x, size_t n);

/// C[m, n] = alpha * op(A) op(B) + beta * C, row-major, op = transpose when transA/transB.
/// A is [m, k] ([k, m] when transA), B is [k, n] ([n, k] when transB). Uses cblas_sgemm.
void gemm(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
          const float* b, float beta, float* c);

/// Sets BLAS to `threads` threads (OpenBLAS's own pool). Ranks sharing a host's cores call it
/// with 1 so that they do not oversubscribe them.
void setBlasThreads(int threads);

}  // namespace braid::training
