#include "training/tensor.h"

#include <cblas.h>

#include <cstring>
#include <stdexcept>

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

void toBf16(const float* in, Bf16* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = toBf16(in[i]);
}

void fromBf16(const Bf16* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = fromBf16(in[i]);
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
