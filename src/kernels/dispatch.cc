// Run-time choice among the builds of reduce.cc (one per instruction set,
// src/kernels/meson.build).
#include <strings.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#endif

#include "base/config.h"
#include "base/error.h"
#include "kernels/reduce.h"

namespace braid::kernels {

// The builds of reduce.cc, each in its own namespace.
#define BRAID_DECLARE_ISA(ns)                                                                  \
  namespace ns {                                                                               \
  bool reduce(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a, const void* b, \
              size_t count, int divisor);                                                      \
  bool divide(braidDataType_t dtype, void* dst, const void* src, size_t count, int divisor);   \
  bool reduceStreaming(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,       \
                       const void* b, size_t count, int divisor);                              \
  }
BRAID_DECLARE_ISA(generic)
#if defined(__x86_64__) && defined(BRAID_HAVE_KERNEL_ISAS)
BRAID_DECLARE_ISA(avx2)
BRAID_DECLARE_ISA(avx512)
#endif
#undef BRAID_DECLARE_ISA

namespace {

using ReduceFn = bool (*)(braidDataType_t, braidRedOp_t, void*, const void*, const void*, size_t,
                          int);
using DivideFn = bool (*)(braidDataType_t, void*, const void*, size_t, int);

struct Impl {
  ReduceFn reduce;
  DivideFn divide;
  ReduceFn reduceStreaming;
};

Impl implOf(Isa isa) {
  switch (isa) {
#if defined(__x86_64__) && defined(BRAID_HAVE_KERNEL_ISAS)
    case Isa::kAvx2:
      return {avx2::reduce, avx2::divide, avx2::reduceStreaming};
    case Isa::kAvx512:
      return {avx512::reduce, avx512::divide, avx512::reduceStreaming};
#endif
    default:
      return {generic::reduce, generic::divide, generic::reduceStreaming};
  }
}

Isa widest() {
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2})
    if (isaSupported(isa)) return isa;
  return Isa::kGeneric;
}

Isa pick() {
  const char* want = getEnv("KERNEL_ISA");
  if (!want || !*want) return widest();
  for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
    if (strcasecmp(want, isaName(isa)) != 0) continue;
    if (isaSupported(isa)) return isa;
    BRAID_WARN("INIT", "BRAID_KERNEL_ISA=%s: this build or CPU lacks it (using %s)", want,
               isaName(widest()));
    return widest();
  }
  BRAID_WARN("INIT", "BRAID_KERNEL_ISA=%s is not generic, avx2 or avx512 (using %s)", want,
             isaName(widest()));
  return widest();
}

struct Active {
  Isa isa;
  Impl impl;
};
const Active& active() {
  static const Active a = [] {
    const Isa isa = pick();
    return Active{isa, implOf(isa)};
  }();
  return a;
}

}  // namespace

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    default:
      return "generic";
  }
}

namespace {
// Asks the CPU (__get_cpuid: under a hypervisor each one traps to it, microseconds apiece,
// so isaSupported keeps the answers).
bool probeIsa(Isa isa) {
  switch (isa) {
    case Isa::kGeneric:
      return true;
#if defined(__x86_64__) && defined(BRAID_HAVE_KERNEL_ISAS)
    case Isa::kAvx2: {
      // F16C through cpuid: clang's __builtin_cpu_supports does not know it.
      unsigned a = 0, b = 0, c = 0, d = 0;
      const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
      return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
    case Isa::kAvx512:
      return probeIsa(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
    default:
      return false;
  }
}

}  // namespace

bool isaSupported(Isa isa) {
  static const bool supported[] = {probeIsa(Isa::kGeneric), probeIsa(Isa::kAvx2),
                                   probeIsa(Isa::kAvx512)};
  static_assert(std::size(supported) == static_cast<size_t>(Isa::kAvx512) + 1,
                "one answer per Isa");
  const auto i = static_cast<size_t>(isa);
  return i < std::size(supported) && supported[i];
}

Isa activeIsa() { return active().isa; }

bool reduce(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a, const void* b,
            size_t count, int divisor) {
  return active().impl.reduce(dtype, op, dst, a, b, count, divisor);
}

bool divide(braidDataType_t dtype, void* dst, const void* src, size_t count, int divisor) {
  return active().impl.divide(dtype, dst, src, count, divisor);
}

bool reduceStreaming(braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                     const void* b, size_t count, int divisor) {
  return active().impl.reduceStreaming(dtype, op, dst, a, b, count, divisor);
}

bool reduceWith(Isa isa, braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                const void* b, size_t count, int divisor) {
  return isaSupported(isa) && implOf(isa).reduce(dtype, op, dst, a, b, count, divisor);
}

bool reduceStreamingWith(Isa isa, braidDataType_t dtype, braidRedOp_t op, void* dst, const void* a,
                         const void* b, size_t count, int divisor) {
  return isaSupported(isa) && implOf(isa).reduceStreaming(dtype, op, dst, a, b, count, divisor);
}

bool divideWith(Isa isa, braidDataType_t dtype, void* dst, const void* src, size_t count,
                int divisor) {
  return isaSupported(isa) && implOf(isa).divide(dtype, dst, src, count, divisor);
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  char* out = static_cast<char*>(dst);
  const char* in = static_cast<const char*>(src);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(out) % 16) % 16);
  if (head) std::memcpy(out, in, head);
  out += head;
  in += head;
  bytes -= head;
  // Four 16-byte stores per 64-byte line, so the write-combining buffer fills whole lines.
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 48), d);
  }
  if (i < bytes) std::memcpy(out + i, in + i, bytes - i);
  _mm_sfence();
#else
  if (bytes) std::memcpy(dst, src, bytes);
#endif
}

}  // namespace braid::kernels
