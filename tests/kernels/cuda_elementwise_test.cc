// The CUDA kernels' element-wise arithmetic (kernels/cuda_elementwise.h) compiled for the CPU,
// where its add/mul/div return the GPU's canonical NaN, against the host kernels bit for bit:
// every dtype and op, AVG's divisor, division and PreMulSum's scaling. It runs on every machine,
// so the conversions and the NaN fix-ups the device relies on are checked without a GPU
// (tests/kernels/cuda_kernels_test.cc runs the kernels themselves where there is one).
//
// Inputs are random bits (every fp8 pair exhaustively) with infinities, zeros, NaN payloads and
// subnormals mixed in. Where a sum or product would get two NaNs, which one it returns is open
// (reduce.h), so one of them is replaced.
#include "kernels/cuda_elementwise.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce.h"

namespace {

namespace ew = braid::cuda::elementwise;
namespace bk = braid::kernels;

const braidDataType_t kTypes[] = {braidInt8,    braidUint8,    braidInt32,      braidUint32,
                                  braidInt64,   braidUint64,   braidFloat16,    braidFloat32,
                                  braidFloat64, braidBfloat16, braidFloat8e4m3, braidFloat8e5m2};

// Calls fn with the Codec of dtype.
template <typename Fn>
void byType(braidDataType_t dtype, Fn fn) {
  switch (dtype) {
    case braidInt8:
      return fn(ew::NativeCodec<int8_t>{});
    case braidUint8:
      return fn(ew::NativeCodec<uint8_t>{});
    case braidInt32:
      return fn(ew::NativeCodec<int32_t>{});
    case braidUint32:
      return fn(ew::NativeCodec<uint32_t>{});
    case braidInt64:
      return fn(ew::NativeCodec<int64_t>{});
    case braidUint64:
      return fn(ew::NativeCodec<uint64_t>{});
    case braidFloat16:
      return fn(ew::HalfCodec{});
    case braidFloat32:
      return fn(ew::NativeCodec<float>{});
    case braidFloat64:
      return fn(ew::NativeCodec<double>{});
    case braidBfloat16:
      return fn(ew::Bf16Codec{});
    case braidFloat8e4m3:
      return fn(ew::E4m3Codec{});
    case braidFloat8e5m2:
      return fn(ew::E5m2Codec{});
    default:
      FAIL() << "unknown dtype " << dtype;
  }
}

// What the kernel computes per element: encode(post(op(decode(a), decode(b)))).
template <typename Codec, typename Op>
void apply(const std::vector<uint8_t>& av, const std::vector<uint8_t>& bv,
           std::vector<uint8_t>* outv, Op op, int divisor) {
  using Bits = typename Codec::Bits;
  const size_t n = av.size() / sizeof(Bits);
  outv->resize(av.size());
  const ew::MaybeDivide post{divisor};
  for (size_t i = 0; i < n; ++i) {
    Bits a, b;
    std::memcpy(&a, &av[i * sizeof(Bits)], sizeof(Bits));
    std::memcpy(&b, &bv[i * sizeof(Bits)], sizeof(Bits));
    const Bits r = Codec::encode(post(op(Codec::decode(a), Codec::decode(b))));
    std::memcpy(&(*outv)[i * sizeof(Bits)], &r, sizeof(Bits));
  }
}

bool isNaN(braidDataType_t dtype, const std::vector<uint8_t>& buf, size_t i) {
  bool nan = false;
  byType(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    typename Codec::Bits v;
    std::memcpy(&v, &buf[i * sizeof v], sizeof v);
    if constexpr (!std::is_integral_v<typename Codec::Compute>) nan = std::isnan(Codec::decode(v));
  });
  return nan;
}

// Random bits; fp8 every (a, b) pair; fp32 and fp64 with specials at every 5th (a) and 7th (b)
// element. noTwoNaNs replaces b where both are NaN.
void fill(braidDataType_t dtype, bool noTwoNaNs, std::vector<uint8_t>* a, std::vector<uint8_t>* b) {
  const size_t size = braidTypeSize(dtype);
  const size_t n = size == 1 ? 65536 : 200003;
  a->resize(n * size);
  b->resize(n * size);
  std::mt19937_64 rng(dtype);
  for (auto& v : *a) v = static_cast<uint8_t>(rng());
  for (auto& v : *b) v = static_cast<uint8_t>(rng());
  if (dtype == braidFloat8e4m3 || dtype == braidFloat8e5m2) {
    for (size_t i = 0; i < n; ++i) {
      (*a)[i] = static_cast<uint8_t>(i & 0xff);
      (*b)[i] = static_cast<uint8_t>(i >> 8);
    }
  }
  const uint64_t specials32[] = {0x7f800000, 0xff800000, 0,          0x80000000,
                                 0x7f800001, 0xffc01234, 0x00000001, 0x7f7fffff};
  const uint64_t specials64[] = {0x7ff0000000000000, 0xfff0000000000000, 0, 0x8000000000000000,
                                 0x7ff0000000000001, 0xfff8000000001234, 1, 0x7fefffffffffffff};
  if (dtype == braidFloat32 || dtype == braidFloat64) {
    const uint64_t* sp = dtype == braidFloat32 ? specials32 : specials64;
    for (size_t i = 0; i < n; i += 5) std::memcpy(&(*a)[i * size], &sp[rng() % 8], size);
    for (size_t i = 0; i < n; i += 7) std::memcpy(&(*b)[i * size], &sp[rng() % 8], size);
  }
  if (!noTwoNaNs) return;
  for (size_t i = 0; i < n; ++i) {
    if (isNaN(dtype, *a, i) && isNaN(dtype, *b, i)) std::memset(&(*b)[i * size], 0x11, size);
  }
}

std::string firstDifference(braidDataType_t dtype, const std::vector<uint8_t>& want,
                            const std::vector<uint8_t>& got, const std::vector<uint8_t>& a,
                            const std::vector<uint8_t>& b) {
  const size_t size = braidTypeSize(dtype);
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i * size < want.size(); ++i) {
    if (std::memcmp(&want[i * size], &got[i * size], size) != 0 && wrong++ == 0) first = i;
  }
  if (wrong == 0) return "";
  auto hex = [&](const std::vector<uint8_t>& v) {
    uint64_t x = 0;
    std::memcpy(&x, &v[first * size], size);
    char s[32];
    std::snprintf(s, sizeof s, "0x%" PRIx64, x);
    return std::string(s);
  };
  return std::to_string(wrong) + " wrong, first element " + std::to_string(first) + ": a " +
         hex(a) + ", b " + hex(b) + ", host " + hex(want) + ", device code " + hex(got);
}

TEST(CudaElementwise, ReduceEveryTypeAndOpMatchesHost) {
  for (braidDataType_t dtype : kTypes) {
    for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin, braidAvg}) {
      std::vector<uint8_t> a, b, want, got;
      fill(dtype, op != braidMax && op != braidMin, &a, &b);
      for (int divisor : {1, 3}) {
        want.resize(a.size());
        ASSERT_TRUE(bk::reduce(dtype, op, want.data(), a.data(), b.data(),
                               a.size() / braidTypeSize(dtype), divisor));
        byType(dtype, [&](auto codec) {
          using Codec = decltype(codec);
          switch (op) {
            case braidProd:
              return apply<Codec>(a, b, &got, ew::Prod{}, divisor);
            case braidMax:
              return apply<Codec>(a, b, &got, ew::Max{}, divisor);
            case braidMin:
              return apply<Codec>(a, b, &got, ew::Min{}, divisor);
            default:
              return apply<Codec>(a, b, &got, ew::Sum{}, divisor);
          }
        });
        EXPECT_EQ(firstDifference(dtype, want, got, a, b), "")
            << braidTypeName(dtype) << " " << braidOpName(op) << " divisor " << divisor;
      }
    }
  }
}

TEST(CudaElementwise, DivideMatchesHost) {
  for (braidDataType_t dtype : kTypes) {
    std::vector<uint8_t> a, b, want, got;
    fill(dtype, false, &a, &b);
    for (int divisor : {2, 7}) {
      want.resize(a.size());
      ASSERT_TRUE(
          bk::divide(dtype, want.data(), a.data(), a.size() / braidTypeSize(dtype), divisor));
      byType(dtype, [&](auto codec) { apply<decltype(codec)>(a, a, &got, ew::Keep{}, divisor); });
      EXPECT_EQ(firstDifference(dtype, want, got, a, a), "")
          << braidTypeName(dtype) << " divisor " << divisor;
    }
  }
}

// PreMulSum: the host multiplies by an array of the scalar in the element type.
TEST(CudaElementwise, ScaleMatchesHostPreMulSum) {
  for (braidDataType_t dtype : kTypes) {
    std::vector<uint8_t> a, b, want, got;
    fill(dtype, false, &a, &b);
    const size_t size = braidTypeSize(dtype);
    for (double factor : {3.0, -1.5, 0.25}) {
      std::vector<uint8_t> scalars(a.size());
      byType(dtype, [&](auto codec) {
        using Codec = decltype(codec);
        using Compute = typename Codec::Compute;
        Compute s;
        if constexpr (std::is_integral_v<Compute>) {
          s = static_cast<Compute>(static_cast<int64_t>(factor));
        } else {
          s = Codec::decode(Codec::encode(static_cast<Compute>(factor)));
        }
        const typename Codec::Bits bits = Codec::encode(s);
        for (size_t i = 0; i < a.size(); i += size) std::memcpy(&scalars[i], &bits, size);
        apply<Codec>(a, a, &got, ew::MulBy<Compute>{s}, 1);
      });
      want.resize(a.size());
      ASSERT_TRUE(
          bk::reduce(dtype, braidProd, want.data(), a.data(), scalars.data(), a.size() / size));
      EXPECT_EQ(firstDifference(dtype, want, got, a, scalars), "")
          << braidTypeName(dtype) << " factor " << factor;
    }
  }
}

// The conversions alone, every fp16, bf16 and fp8 code and a sweep of fp32 values.
TEST(CudaElementwise, ConversionsMatchHost) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto v = static_cast<uint16_t>(h);
    const float f = bk::halfToFloat(v);
    ASSERT_EQ(ew::floatBits(ew::decodeHalf(v)), ew::floatBits(f)) << std::hex << h;
    ASSERT_EQ(ew::floatBits(ew::decodeBf16(v)), ew::floatBits(bk::bf16ToFloat(v))) << std::hex << h;
  }
  for (uint32_t c = 0; c < 256; ++c) {
    const auto v = static_cast<uint8_t>(c);
    ASSERT_EQ(ew::floatBits(ew::decodeE4m3(v)), ew::floatBits(bk::fp8e4m3ToFloat(v))) << c;
    ASSERT_EQ(ew::floatBits(ew::decodeE5m2(v)), ew::floatBits(bk::fp8e5m2ToFloat(v))) << c;
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = i < 65536 ? static_cast<uint32_t>(i) << 16 : rng();
    const float f = ew::bitsFloat(u);
    ASSERT_EQ(ew::encodeHalf(f), bk::floatToHalf(f)) << std::hex << u;
    ASSERT_EQ(ew::encodeBf16(f), bk::floatToBf16(f)) << std::hex << u;
    ASSERT_EQ((ew::encodeFp8<3, 7, 0x7e>(f)), bk::floatToFp8e4m3(f)) << std::hex << u;
    ASSERT_EQ((ew::encodeFp8<2, 15, 0x7b>(f)), bk::floatToFp8e5m2(f)) << std::hex << u;
  }
}

}  // namespace
