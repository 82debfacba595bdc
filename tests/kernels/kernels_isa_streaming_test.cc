// Every instruction-set build of the host kernels (AVX2, AVX-512, where built and supported)
// against the generic build bit for bit, and the streaming variants (reduceStreaming,
// copyStreaming) against the plain ones at every alignment and length.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/reduce.h"

namespace braid::kernels {
namespace {

// Whether element i of x and y (dtype) are both NaN: IEEE 754 leaves open which payload an
// operation on two NaNs keeps, and compilers may swap the operands of + and *.
bool bothNaN(braidDataType_t dtype, const std::vector<uint8_t>& x, const std::vector<uint8_t>& y,
             size_t i) {
  auto isNaN = [dtype](const uint8_t* p) {
    uint16_t h;
    float f;
    double d;
    switch (dtype) {
      case braidFloat32:
        std::memcpy(&f, p, 4);
        return std::isnan(f);
      case braidFloat64:
        std::memcpy(&d, p, 8);
        return std::isnan(d);
      case braidFloat16:
        std::memcpy(&h, p, 2);
        return std::isnan(halfToFloat(h));
      case braidBfloat16:
        std::memcpy(&h, p, 2);
        return std::isnan(bf16ToFloat(h));
      case braidFloat8e4m3:
        return std::isnan(fp8e4m3ToFloat(*p));
      case braidFloat8e5m2:
        return std::isnan(fp8e5m2ToFloat(*p));
      default:
        return false;
    }
  };
  const size_t es = braidTypeSize(dtype);
  return isNaN(&x[i * es]) && isNaN(&y[i * es]);
}

// The elements where x and y differ other than by a NaN's payload.
size_t differences(braidDataType_t dtype, const std::vector<uint8_t>& x,
                   const std::vector<uint8_t>& y) {
  const size_t es = braidTypeSize(dtype);
  size_t n = 0;
  for (size_t i = 0; i < x.size() / es; ++i)
    n += std::memcmp(&x[i * es], &y[i * es], es) != 0 && !bothNaN(dtype, x, y, i);
  return n;
}

// Every instruction-set build of the kernels gives the generic build's bits, for every dtype,
// op and divisor, on random bit patterns (NaNs, infinities and subnormals among them), at
// counts that end inside and on vector widths, in place and out of place; a NaN may carry
// either operand's payload.
TEST(Isa, EveryBuildMatchesGenericBitForBit) {
  std::printf("kernels run on %s\n", isaName(activeIsa()));
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!isaSupported(isa)) {
      std::printf("%s: not built or not supported by this CPU, not compared\n", isaName(isa));
      continue;
    }
    for (int t = 0; t < braidNumTypes; ++t) {
      const auto dtype = static_cast<braidDataType_t>(t);
      const size_t es = braidTypeSize(dtype);
      for (size_t count : {size_t{1}, size_t{31}, size_t{64}, size_t{1000}, size_t{4099}}) {
        std::vector<uint8_t> a(count * es), b(count * es);
        for (auto& x : a) x = static_cast<uint8_t>(next());
        for (auto& x : b) x = static_cast<uint8_t>(next());
        for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin, braidAvg})
          for (int divisor : {1, 3}) {
            std::vector<uint8_t> want(count * es), got(count * es);
            ASSERT_TRUE(reduceWith(Isa::kGeneric, dtype, op, want.data(), a.data(), b.data(), count,
                                   divisor));
            ASSERT_TRUE(reduceWith(isa, dtype, op, got.data(), a.data(), b.data(), count, divisor));
            EXPECT_EQ(differences(dtype, want, got), 0u)
                << isaName(isa) << " " << braidTypeName(dtype) << " " << braidOpName(op)
                << " count " << count << " / " << divisor;
            std::vector<uint8_t> inPlace = a;
            ASSERT_TRUE(reduceWith(isa, dtype, op, inPlace.data(), inPlace.data(), b.data(), count,
                                   divisor));
            EXPECT_EQ(differences(dtype, want, inPlace), 0u)
                << isaName(isa) << " in place " << braidTypeName(dtype);
          }
        std::vector<uint8_t> want(count * es), got(count * es);
        ASSERT_TRUE(divideWith(Isa::kGeneric, dtype, want.data(), a.data(), count, 7));
        ASSERT_TRUE(divideWith(isa, dtype, got.data(), a.data(), count, 7));
        EXPECT_EQ(differences(dtype, want, got), 0u)
            << isaName(isa) << " divide " << braidTypeName(dtype);
      }
    }
    // fp16 and bf16: every code against codes spread over the whole range.
    for (braidDataType_t dtype : {braidFloat16, braidBfloat16}) {
      std::vector<uint8_t> a(65536 * 2), b(65536 * 2), want(65536 * 2), got(65536 * 2);
      for (uint32_t i = 0; i < 65536; ++i) {
        const uint16_t x = static_cast<uint16_t>(i), y = static_cast<uint16_t>(i * 40503u + 1);
        std::memcpy(&a[2 * i], &x, 2);
        std::memcpy(&b[2 * i], &y, 2);
      }
      for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin})
        for (int divisor : {1, 3}) {
          ASSERT_TRUE(reduceWith(Isa::kGeneric, dtype, op, want.data(), a.data(), b.data(), 65536,
                                 divisor));
          ASSERT_TRUE(reduceWith(isa, dtype, op, got.data(), a.data(), b.data(), 65536, divisor));
          EXPECT_EQ(differences(dtype, want, got), 0u)
              << isaName(isa) << " every " << braidTypeName(dtype) << " code, " << braidOpName(op)
              << " / " << divisor;
        }
    }
  }
}

// reduceStreaming gives reduce()'s bits (a NaN may carry either operand's payload, as between
// builds) on every instruction-set build, dtype, op and divisor,
// wherever dst sits against a 64-byte line (elements 0..3 past a boundary, so heads of whole,
// partial and no lines) and whatever the count (inside a line, whole lines, a tail); it writes
// nothing outside dst, and in place (dst == a, dst == b) it is reduce().
TEST(ReduceStreaming, MatchesReduceOnEveryBuildTypeOpAndAlignment) {
  uint64_t state = 0x243f6a8885a308d3ull;
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  constexpr uint8_t kSentinel = 0xa5;
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (!isaSupported(isa)) continue;
    for (int t = 0; t < braidNumTypes; ++t) {
      const auto dtype = static_cast<braidDataType_t>(t);
      const size_t es = braidTypeSize(dtype);
      for (size_t count : {size_t{1}, size_t{7}, size_t{64}, size_t{300}, size_t{4099}}) {
        std::vector<uint8_t> a(count * es), b(count * es);
        for (auto& x : a) x = static_cast<uint8_t>(next());
        for (auto& x : b) x = static_cast<uint8_t>(next());
        for (size_t shift = 0; shift < 4; ++shift) {
          // dst at `shift` elements past a 64-byte boundary, with 64 sentinel bytes each side.
          std::vector<uint8_t> block(count * es + 64 * 3);
          const size_t base = (64 - reinterpret_cast<uintptr_t>(block.data()) % 64) % 64 + 64;
          uint8_t* dst = block.data() + base + shift * es;
          for (braidRedOp_t op : {braidSum, braidProd, braidMax, braidMin, braidAvg})
            for (int divisor : {1, 3}) {
              std::vector<uint8_t> want(count * es);
              ASSERT_TRUE(
                  reduceWith(isa, dtype, op, want.data(), a.data(), b.data(), count, divisor));
              std::fill(block.begin(), block.end(), kSentinel);
              ASSERT_TRUE(
                  reduceStreamingWith(isa, dtype, op, dst, a.data(), b.data(), count, divisor));
              ASSERT_EQ(differences(dtype, want, std::vector<uint8_t>(dst, dst + want.size())), 0u)
                  << isaName(isa) << " " << braidTypeName(dtype) << " " << braidOpName(op)
                  << " count " << count << " / " << divisor << ", dst " << shift
                  << " elements past a line";
              for (size_t i = 0; i < block.size(); ++i)
                if (block.data() + i < dst || block.data() + i >= dst + want.size())
                  ASSERT_EQ(block[i], kSentinel) << "byte " << i << " outside dst was written";
            }
        }
        for (int inputIsDst = 0; inputIsDst < 2; ++inputIsDst) {
          std::vector<uint8_t> want(count * es);
          ASSERT_TRUE(reduceWith(isa, dtype, braidSum, want.data(), a.data(), b.data(), count));
          std::vector<uint8_t> x = inputIsDst ? b : a;
          const uint8_t* other = inputIsDst ? a.data() : b.data();
          ASSERT_TRUE(
              inputIsDst
                  ? reduceStreamingWith(isa, dtype, braidSum, x.data(), other, x.data(), count)
                  : reduceStreamingWith(isa, dtype, braidSum, x.data(), x.data(), other, count));
          EXPECT_EQ(differences(dtype, want, x), 0u)
              << isaName(isa) << " " << braidTypeName(dtype) << " in place";
        }
      }
    }
    EXPECT_FALSE(reduceStreamingWith(isa, static_cast<braidDataType_t>(braidNumTypes), braidSum,
                                     nullptr, nullptr, nullptr, 1));
  }
}

// Streaming copies: every head alignment (0..16 bytes to the next 16-byte boundary), tails
// of 0..63 bytes and lengths across whole 64-byte lines; bytes beyond the range stay as
// they were.
TEST(CopyStreaming, CopiesEveryAlignmentAndLengthExactly) {
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 96);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t dstOff = 0; dstOff < 17; ++dstOff) {
    for (size_t srcOff : {size_t{0}, size_t{1}, size_t{8}, size_t{33}}) {
      for (size_t bytes :
           {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{63}, size_t{64},
            size_t{65}, size_t{127}, size_t{128}, size_t{200}, size_t{4000}, size_t{4096}}) {
        std::fill(dst.begin(), dst.end(), 0xa5);
        copyStreaming(dst.data() + dstOff, src.data() + srcOff, bytes);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= dstOff && i < dstOff + bytes;
          const unsigned char want = inside ? src[srcOff + i - dstOff] : 0xa5;
          ASSERT_EQ(dst[i], want) << "dst offset " << dstOff << ", src offset " << srcOff << ", "
                                  << bytes << " bytes: byte " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace braid::kernels
