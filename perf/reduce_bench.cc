// reduce_bench: the host reduction kernel's speed on each instruction set it was built for,
// beside memcpy, in one run: dst = a + b over SIZE bytes of each dtype, repeated, in GB/s of
// output bytes (1e9 B/s). Sizes that fit a core's cache show the kernel's own speed; large
// ones show the memory system's (a reduction reads two bytes and writes one per output byte,
// memcpy one and one).
//
// Usage: reduce_bench [SIZE ...]   (bytes, K/M/G suffixes; default 64K 64M)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.h"
#include "kernels/reduce.h"

namespace {

using braid::kernels::Isa;

// Seconds per call of fn, over enough calls to take about 0.2 s.
template <typename Fn>
double timePerCall(Fn fn) {
  fn();  // first touch
  size_t calls = 1;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < calls; ++i) fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.2) return s / static_cast<double>(calls);
    calls *= 2;
  }
}

bool parseSize(const char* text, size_t* out) {
  return braid::parseByteSize(text, out) && *out > 0 && *out <= (size_t{1} << 34);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("usage: reduce_bench [SIZE ...]  (bytes, K/M/G suffixes; default 64K 64M)\n");
      return 0;
    }
    size_t s = 0;
    if (!parseSize(argv[i], &s)) {
      std::fprintf(stderr, "reduce_bench: SIZE %s: give bytes (K/M/G suffixes), 1 .. 16G\n",
                   argv[i]);
      return 2;
    }
    sizes.push_back(s);
  }
  if (sizes.empty()) sizes = {64u << 10, 64u << 20};
  std::printf("# reduce_bench: dst = a + b, GB/s of output bytes; kernels pick %s\n",
              braid::kernels::isaName(braid::kernels::activeIsa()));
  std::printf("# %12s %8s %10s %10s %10s %10s\n", "bytes", "dtype", "memcpy", "generic", "avx2",
              "avx512");
  for (size_t bytes : sizes) {
    std::vector<char> a(bytes, 1), b(bytes, 2), dst(bytes, 0);
    const double cp = timePerCall([&] { std::memcpy(dst.data(), a.data(), bytes); });
    for (braidDataType_t dtype : {braidFloat32, braidBfloat16, braidFloat16}) {
      const size_t count = bytes / braidTypeSize(dtype);
      std::printf("  %12zu %8s %10.2f", bytes, braidTypeName(dtype), bytes / cp / 1e9);
      for (Isa isa : {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512}) {
        if (!braid::kernels::isaSupported(isa)) {
          std::printf(" %10s", "-");
          continue;
        }
        const double s = timePerCall([&] {
          braid::kernels::reduceWith(isa, dtype, braidSum, dst.data(), a.data(), b.data(), count);
        });
        std::printf(" %10.2f", bytes / s / 1e9);
      }
      std::printf("\n");
    }
  }
  return 0;
}
