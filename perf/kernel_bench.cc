// kernel_bench: the CUDA reduction kernel beside cudaMemcpy device-to-device, in one run.
//
// out = a + b over SIZE bytes per buffer (two inputs, one output) for each dtype; the kernel's
// bandwidth counts the bytes it moves, 3 x SIZE per call, and memcpy's 2 x SIZE (read and
// write), both in GB/s (1e9 B/s) from CUDA events over the timed calls; the ratio is
// kernel / memcpy. One result per dtype is first compared bit for bit with the host kernel
// (kernels/reduce.h): any difference makes the exit status 1.
//
// Usage: kernel_bench [--bytes SIZE] [--iters N] [--dtype fp32,bf16,...]
//   SIZE in bytes with K/M/G suffixes (powers of 1024), default 1G; N timed calls, default 20;
//   dtypes from: int8 uint8 int32 uint32 int64 uint64 fp16 fp32 fp64 bf16 fp8e4m3 fp8e5m2.
// Exit status: 0, 1 for a wrong value or a CUDA error, 2 for bad flags, 77 without a device.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/config.h"
#include "kernels/cuda_kernels.h"
#include "kernels/reduce.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

struct Flags {
  size_t bytes = size_t{1} << 30;
  int iters = 20;
  std::vector<braidDataType_t> dtypes = {braidFloat32, braidBfloat16};
};

const struct {
  const char* name;
  braidDataType_t dtype;
} kNames[] = {{"int8", braidInt8},     {"uint8", braidUint8},        {"int32", braidInt32},
              {"uint32", braidUint32}, {"int64", braidInt64},        {"uint64", braidUint64},
              {"fp16", braidFloat16},  {"fp32", braidFloat32},       {"fp64", braidFloat64},
              {"bf16", braidBfloat16}, {"fp8e4m3", braidFloat8e4m3}, {"fp8e5m2", braidFloat8e5m2}};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "kernel_bench: %s\nusage: kernel_bench [--bytes SIZE] [--iters N] "
               "[--dtype fp32,bf16,...]\n",
               why.c_str());
  std::exit(2);
}

size_t parseSize(const char* s) {
  size_t bytes = 0;
  if (!braid::parseByteSize(s, &bytes) || bytes == 0) usage(std::string("bad size '") + s + "'");
  return bytes;
}

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage("'" + arg + "' needs a value (or is unknown)");
    const char* value = argv[++i];
    if (arg == "--bytes") {
      f.bytes = parseSize(value);
    } else if (arg == "--iters") {
      f.iters = std::atoi(value);
      if (f.iters < 1) usage("--iters must be >= 1");
    } else if (arg == "--dtype") {
      f.dtypes.clear();
      std::string list = value;
      for (size_t pos = 0; pos <= list.size();) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string name = list.substr(pos, comma - pos);
        bool known = false;
        for (const auto& n : kNames) {
          if (name == n.name) {
            f.dtypes.push_back(n.dtype);
            known = true;
          }
        }
        if (!known) usage("unknown dtype '" + name + "'");
        pos = comma + 1;
      }
    } else {
      usage("unknown flag '" + arg + "'");
    }
  }
  return f;
}

#if BRAID_HAVE_CUDA

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "kernel_bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Exact inputs: small integers as the element type, so every dtype's sum is meaningful, with
// a period that is not a power of two so neighbouring vectors differ.
void fillHost(braidDataType_t dtype, size_t count, std::vector<uint8_t>* buf, int salt) {
  const size_t size = braidTypeSize(dtype);
  buf->resize(count * size);
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((i * 7 + static_cast<size_t>(salt)) % 13) - 6;
    uint8_t* p = buf->data() + i * size;
    const float f = static_cast<float>(v);
    const double d = v;
    const int64_t n = v;
    uint16_t h;
    switch (dtype) {
      case braidFloat16:
        h = braid::kernels::floatToHalf(f);
        std::memcpy(p, &h, 2);
        break;
      case braidBfloat16:
        h = braid::kernels::floatToBf16(f);
        std::memcpy(p, &h, 2);
        break;
      case braidFloat8e4m3:
        *p = braid::kernels::floatToFp8e4m3(f);
        break;
      case braidFloat8e5m2:
        *p = braid::kernels::floatToFp8e5m2(f);
        break;
      case braidFloat32:
        std::memcpy(p, &f, 4);
        break;
      case braidFloat64:
        std::memcpy(p, &d, 8);
        break;
      default:
        std::memcpy(p, &n, size);
    }
  }
}

// Benchmarks one dtype; false on a wrong value or a CUDA error.
bool benchOne(const Flags& f, braidDataType_t dtype, void* a, void* b, void* out,
              cudaStream_t stream) {
  const size_t size = braidTypeSize(dtype);
  const size_t count = f.bytes / size;
  const size_t bytes = count * size;
  std::vector<uint8_t> ha, hb;
  fillHost(dtype, count, &ha, 0);
  fillHost(dtype, count, &hb, 5);
  if (!ok(cudaMemcpy(a, ha.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy a") ||
      !ok(cudaMemcpy(b, hb.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy b")) {
    return false;
  }
  // Correctness first: one call against the host kernel, bit for bit.
  int err = braid::cuda::reduce(out, a, b, count, dtype, braidSum, stream);
  if (err != 0) {
    std::fprintf(stderr, "kernel_bench: reduce: %s\n", braid::cuda::errorString(err));
    return false;
  }
  std::vector<uint8_t> got(bytes), want(bytes);
  if (!ok(cudaStreamSynchronize(stream), "reduce") ||
      !ok(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy out")) {
    return false;
  }
  braid::kernels::reduce(dtype, braidSum, want.data(), ha.data(), hb.data(), count);
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(&got[i * size], &want[i * size], size) != 0 && wrong++ == 0) first = i;
  }
  if (wrong != 0) {
    std::printf("%-8s %zu of %zu elements wrong (first at %zu)\n", braidTypeName(dtype), wrong,
                count, first);
    return false;
  }

  cudaEvent_t start, stop;
  if (!ok(cudaEventCreate(&start), "cudaEventCreate") ||
      !ok(cudaEventCreate(&stop), "cudaEventCreate")) {
    return false;
  }
  auto timeIt = [&](auto call) -> double {  // seconds per call; < 0 on error
    for (int i = 0; i < 2; ++i) call();     // warm up
    cudaEventRecord(start, stream);
    for (int i = 0; i < f.iters; ++i) call();
    cudaEventRecord(stop, stream);
    if (!ok(cudaEventSynchronize(stop), "timed calls")) return -1;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    return ms / 1e3 / f.iters;
  };
  const double kernelS =
      timeIt([&] { err |= braid::cuda::reduce(out, a, b, count, dtype, braidSum, stream); });
  const double copyS =
      timeIt([&] { err |= cudaMemcpyAsync(out, a, bytes, cudaMemcpyDeviceToDevice, stream); });
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (kernelS < 0 || copyS < 0 || err != 0) return false;
  const double kernelGbs = 3.0 * static_cast<double>(bytes) / kernelS / 1e9;
  const double copyGbs = 2.0 * static_cast<double>(bytes) / copyS / 1e9;
  std::printf("%-8s %12zu %10.1f %10.1f %10.1f %7.3f  ok\n", braidTypeName(dtype), bytes,
              kernelS * 1e6, kernelGbs, copyGbs, kernelGbs / copyGbs);
  return true;
}

int run(const Flags& f) {
  std::string why;
  if (braid::cuda::deviceCount(&why) == 0) {
    std::fprintf(stderr, "kernel_bench: %s\n", why.c_str());
    return 77;
  }
  int dev = 0;
  cudaDeviceProp prop{};
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  std::printf("# kernel_bench: device %d %s, %zu bytes per buffer, %d timed calls\n", dev,
              prop.name, f.bytes, f.iters);
  std::printf("# out = a + b; kernel GB/s = 3 x bytes / time, memcpy GB/s = 2 x bytes / time\n");
  std::printf("%-8s %12s %10s %10s %10s %7s  %s\n", "# dtype", "bytes", "kernel_us", "kernel_GBs",
              "memcpy_GBs", "ratio", "check");
  void *a = nullptr, *b = nullptr, *out = nullptr;
  cudaStream_t stream = nullptr;
  bool good = ok(cudaMalloc(&a, f.bytes), "cudaMalloc") &&
              ok(cudaMalloc(&b, f.bytes), "cudaMalloc") &&
              ok(cudaMalloc(&out, f.bytes), "cudaMalloc") &&
              ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  for (braidDataType_t dtype : f.dtypes) {
    if (good) good = benchOne(f, dtype, a, b, out, stream);
  }
  if (stream) cudaStreamDestroy(stream);
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
  return good ? 0 : 1;
}

#else

int run(const Flags&) {
  std::fprintf(stderr, "kernel_bench: Braid built without CUDA\n");
  return 77;
}

#endif  // BRAID_HAVE_CUDA

}  // namespace

int main(int argc, char** argv) { return run(parse(argc, argv)); }
