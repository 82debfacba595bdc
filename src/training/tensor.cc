#include "training/tensor.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "training/checked_ranges.h"

namespace braid::training {

namespace {
size_t product(const std::vector<size_t>& shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}
}  // namespace

Tensor::Tensor(std::vector<size_t> shape) : shape_(std::move(shape)), data_(product(shape_)) {}

Tensor::Tensor(std::vector<size_t> shape, std::vector<float> values)
    : shape_(std::move(shape)), data_(std::move(values)) {
  if (data_.size() != product(shape_)) {
    throw std::invalid_argument("Tensor: " + std::to_string(data_.size()) +
                                " values do not fill shape " + shapeString());
  }
}

void Tensor::resize(std::vector<size_t> shape) {
  const size_t n = product(shape);
  shape_ = std::move(shape);
  if (n != data_.size()) data_.assign(n, 0.0f);
}

void Tensor::fill(float v) {
  for (float& x : data_) x = v;
}

std::string Tensor::shapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? ", " : "") + std::to_string(shape_[i]);
  return s + "]";
}

Bf16 toBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return Bf16{static_cast<uint16_t>((u >> 16) | 0x0040u)};
  }
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return Bf16{static_cast<uint16_t>((u + rounding) >> 16)};
}

float fromBf16(Bf16 x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

BRAID_RANGE_CHECKED void toBf16(const float* in, Bf16* out, size_t n) {
  readRange(in, n), writeRange(out, n);
  for (size_t i = 0; i < n; ++i) out[i] = toBf16(in[i]);
}

BRAID_RANGE_CHECKED void fromBf16(const Bf16* in, float* out, size_t n) {
  readRange(in, n), writeRange(out, n);
  for (size_t i = 0; i < n; ++i) out[i] = fromBf16(in[i]);
}

Fp16 toFp16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf or NaN
    return Fp16{static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x0200u : 0u))};
  }
  if (a >= 0x477ff000u) return Fp16{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds past 65504
  const int exp = static_cast<int>(a >> 23) - 127;
  if (exp >= -14) {
    // Normal: keep 10 of the 23 mantissa bits, rounding the other 13 to nearest even. A carry
    // out of the mantissa correctly bumps the exponent.
    const uint32_t h = ((static_cast<uint32_t>(exp + 15) << 10) | ((a >> 13) & 0x3ffu));
    const uint32_t rest = a & 0x1fffu;
    const uint32_t up = rest > 0x1000u || (rest == 0x1000u && (h & 1u)) ? 1u : 0u;
    return Fp16{static_cast<uint16_t>(sign | (h + up))};
  }
  if (exp < -25) return Fp16{sign};  // below half the smallest subnormal 2^-24
  // Subnormal: value = m * 2^-24 with m = the full significand shifted right.
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int shift = -exp - 1;  // 14..24: bits of mant dropped to reach units of 2^-24
  const uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  const uint32_t up = rest > half || (rest == half && (h & 1u)) ? 1u : 0u;
  return Fp16{static_cast<uint16_t>(sign | (h + up))};
}

float fromFp16(Fp16 x) {
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x8000u) << 16;
  const uint32_t exp = (x.bits >> 10) & 0x1fu, mant = x.bits & 0x3ffu;
  uint32_t u;
  if (exp == 0x1fu) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  } else {
    // Subnormal (or zero): mant * 2^-24, exact in fp32.
    const float f = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

BRAID_RANGE_CHECKED void toFp16(const float* in, Fp16* out, size_t n) {
  readRange(in, n), writeRange(out, n);
  for (size_t i = 0; i < n; ++i) out[i] = toFp16(in[i]);
}

BRAID_RANGE_CHECKED void fromFp16(const Fp16* in, float* out, size_t n) {
  readRange(in, n), writeRange(out, n);
  for (size_t i = 0; i < n; ++i) out[i] = fromFp16(in[i]);
}

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    default:
      return "fp32";
  }
}

BRAID_RANGE_CHECKED void uniformFill(std::mt19937_64& rng, float lo, float hi, float* x, size_t n) {
  writeRange(x, n), writeRange(&rng, 1);  // the engine's state too
  const float width = hi - lo;
  const float below_one = std::nextafter(1.0f, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    const float u = std::min(static_cast<float>(rng()) * 0x1p-64f, below_one);
    x[i] = u * width + lo;
  }
}

size_t bytesPerElement(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

BRAID_RANGE_CHECKED void roundTo(Precision p, float* x, size_t n) {
  if (p != Precision::kFp32) writeRange(x, n);  // fp32: x is not touched
  if (p == Precision::kBf16) {
    for (size_t i = 0; i < n; ++i) x[i] = fromBf16(toBf16(x[i]));
  } else if (p == Precision::kFp16) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, &x[i], 4);
      const uint32_t a = u & 0x7fffffffu;
      if (a >= 0x38800000u && a < 0x477ff000u) {
        // fp16's normal range [2^-14, 65520): keep 10 mantissa bits, nearest even, in place.
        u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
        std::memcpy(&x[i], &u, 4);
      } else {
        x[i] = fromFp16(toFp16(x[i]));
      }
    }
  }
}

void gemm(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int lda = static_cast<int>(transA ? m : k);
  const int ldb = static_cast<int>(transB ? k : n);
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, lda, b, ldb,
              beta, c, static_cast<int>(n));
}

void setBlasThreads(int threads) { openblas_set_num_threads(threads); }

}  // namespace braid::training
