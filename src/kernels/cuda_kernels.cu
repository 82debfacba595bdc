// CUDA reduction, division, scaling and copy kernels (kernels/cuda_kernels.h).
//
// One kernel template serves them all: out[i] = encode(post(op(decode(a[i]), decode(b[i])))),
// where a Codec stores and converts an element (the narrow formats compute in fp32), op combines
// two values (or one: division, scaling and copy read a only) and post divides for AVG. Each
// thread moves 16 bytes per input per step (one uint4) over the aligned bulk; the unaligned head
// and the tail are done element by element by the same launch. Grids are capped and stride, so
// one launch covers any count.
//
// The element-wise arithmetic (codecs, operators, NaN rules) is kernels/cuda_elementwise.h,
// which the CPU tests compile too. It uses the explicitly rounded intrinsics (__fadd_rn, ...),
// which nvcc never contracts into FMAs or flushes to zero, so each result rounds exactly as the
// host's does; src/meson.build also compiles with --fmad=false -ftz=false.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda_elementwise.h"
#include "kernels/cuda_kernels.h"

namespace braid::cuda {
namespace {

using namespace elementwise;  // NOLINT(google-build-using-namespace): the kernels' vocabulary

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 32768;

// ---- The kernel -----------------------------------------------------------------------

template <typename Bits>
constexpr int kLanesOf = int(16 / sizeof(Bits));

template <typename Bits>
union Vec {
  uint4 raw;
  Bits lane[kLanesOf<Bits>];
};

// Elements [0, head) and [head + nvec * lanes, count) one at a time; [head, head + nvec *
// lanes) as nvec 16-byte vectors. kUnary: b is not read (op gets a's element twice).
template <typename Codec, bool kUnary, typename Op>
__global__ void __launch_bounds__(kThreads)
    combineKernel(typename Codec::Bits* out, const typename Codec::Bits* a,
                  const typename Codec::Bits* b, size_t head, size_t nvec, size_t count, Op op,
                  MaybeDivide post) {
  using Bits = typename Codec::Bits;
  constexpr int kLanes = kLanesOf<Bits>;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  auto one = [&](Bits x, Bits y) {
    return Codec::encode(post(op(Codec::decode(x), Codec::decode(kUnary ? x : y))));
  };
  for (size_t v = tid; v < nvec; v += stride) {
    const size_t i = head + v * kLanes;
    Vec<Bits> x, y, r;
    x.raw = *reinterpret_cast<const uint4*>(a + i);
    if constexpr (!kUnary) y.raw = *reinterpret_cast<const uint4*>(b + i);
#pragma unroll
    for (int k = 0; k < kLanes; ++k) r.lane[k] = one(x.lane[k], kUnary ? x.lane[k] : y.lane[k]);
    *reinterpret_cast<uint4*>(out + i) = r.raw;
  }
  const size_t tail = head + nvec * kLanes;
  const size_t scalars = head + (count - tail);
  for (size_t s = tid; s < scalars; s += stride) {
    const size_t i = s < head ? s : tail + (s - head);
    out[i] = one(a[i], kUnary ? a[i] : b[i]);
  }
}

template <typename Codec, bool kUnary, typename Op>
int launch(void* outv, const void* av, const void* bv, size_t count, Op op, int divisor,
           void* stream) {
  using Bits = typename Codec::Bits;
  constexpr size_t kLanes = kLanesOf<Bits>;
  if (count == 0) return kSuccess;
  auto* out = static_cast<Bits*>(outv);
  const auto* a = static_cast<const Bits*>(av);
  const auto* b = static_cast<const Bits*>(bv);
  // The vectors start where out reaches 16-byte alignment, if the inputs get there too.
  const uintptr_t mis = reinterpret_cast<uintptr_t>(out) & 15;
  const bool shared = (reinterpret_cast<uintptr_t>(a) & 15) == mis &&
                      (kUnary || (reinterpret_cast<uintptr_t>(b) & 15) == mis) &&
                      mis % sizeof(Bits) == 0;
  size_t head = count, nvec = 0;
  if (shared) {
    head = ((16 - mis) & 15) / sizeof(Bits);
    if (head > count) head = count;
    nvec = (count - head) / kLanes;
  }
  const size_t scalars = count - nvec * kLanes;
  const size_t items = nvec > scalars ? nvec : scalars;
  size_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  combineKernel<Codec, kUnary>
      <<<unsigned(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          out, a, b, head, nvec, count, op, MaybeDivide{divisor});
  return cudaGetLastError();
}

template <typename Codec>
int reduceAs(void* out, const void* a, const void* b, size_t count, braidRedOp_t op, void* stream,
             int divisor) {
  switch (op) {
    case braidSum:
    case braidAvg:
      return launch<Codec, false>(out, a, b, count, Sum{}, divisor, stream);
    case braidProd:
      return launch<Codec, false>(out, a, b, count, Prod{}, divisor, stream);
    case braidMax:
      return launch<Codec, false>(out, a, b, count, Max{}, divisor, stream);
    case braidMin:
      return launch<Codec, false>(out, a, b, count, Min{}, divisor, stream);
    default:
      return kInvalidValue;
  }
}

// factor in dtype's compute type, rounded through dtype's storage (see scale() in the header).
template <typename Codec>
typename Codec::Compute scalarOf(double factor) {
  using Compute = typename Codec::Compute;
  if constexpr (std::is_integral_v<Compute> && std::is_signed_v<Compute>) {
    return Compute(int64_t(factor));
  } else if constexpr (std::is_integral_v<Compute>) {
    return factor < 0 ? Compute(int64_t(factor)) : Compute(uint64_t(factor));
  } else if constexpr (std::is_same_v<typename Codec::Bits, Compute>) {
    return Compute(factor);
  } else {
    return Codec::decode(Codec::encode(float(factor)));
  }
}

// Calls fn with the Codec of dtype; kInvalidValue for an unknown one.
template <typename Fn>
int byType(braidDataType_t dtype, Fn fn) {
  switch (dtype) {
    case braidInt8:
      return fn(NativeCodec<int8_t>{});
    case braidUint8:
      return fn(NativeCodec<uint8_t>{});
    case braidInt32:
      return fn(NativeCodec<int32_t>{});
    case braidUint32:
      return fn(NativeCodec<uint32_t>{});
    case braidInt64:
      return fn(NativeCodec<int64_t>{});
    case braidUint64:
      return fn(NativeCodec<uint64_t>{});
    case braidFloat16:
      return fn(HalfCodec{});
    case braidFloat32:
      return fn(NativeCodec<float>{});
    case braidFloat64:
      return fn(NativeCodec<double>{});
    case braidBfloat16:
      return fn(Bf16Codec{});
    case braidFloat8e4m3:
      return fn(E4m3Codec{});
    case braidFloat8e5m2:
      return fn(E5m2Codec{});
    default:
      return kInvalidValue;
  }
}

}  // namespace

bool built() { return true; }

int deviceCount(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky, but clear it for the caller's next check
    if (why)
      *why = std::string("no CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device (cudaGetDeviceCount found 0)";
  return count;
}

int reduce(void* out, const void* a, const void* b, size_t count, braidDataType_t dtype,
           braidRedOp_t op, void* stream, int divisor) {
  return byType(dtype, [&](auto codec) {
    return reduceAs<decltype(codec)>(out, a, b, count, op, stream, divisor);
  });
}

int divide(void* dst, const void* src, size_t count, braidDataType_t dtype, int divisor,
           void* stream) {
  if (divisor < 1) return kInvalidValue;
  if (divisor == 1)
    return dst == src ? kSuccess : copy(dst, src, count * braidTypeSize(dtype), stream);
  return byType(dtype, [&](auto codec) {
    return launch<decltype(codec), true>(dst, src, src, count, Keep{}, divisor, stream);
  });
}

int scale(void* buf, size_t count, braidDataType_t dtype, double factor, void* stream) {
  return byType(dtype, [&](auto codec) {
    using Codec = decltype(codec);
    const MulBy<typename Codec::Compute> op{scalarOf<Codec>(factor)};
    return launch<Codec, true>(buf, buf, buf, count, op, 1, stream);
  });
}

int copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return kSuccess;
  if (((reinterpret_cast<uintptr_t>(dst) ^ reinterpret_cast<uintptr_t>(src)) & 15) != 0) {
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                           static_cast<cudaStream_t>(stream));
  }
  return launch<NativeCodec<uint8_t>, true>(dst, src, src, bytes, Keep{}, 1, stream);
}

const char* errorString(int err) {
  if (err == kNotBuilt) return "Braid built without CUDA";
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

}  // namespace braid::cuda
