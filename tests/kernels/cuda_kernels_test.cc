// The CUDA kernels (kernels/cuda_kernels.h) against the host kernels (kernels/reduce.h), bit for
// bit: every dtype and op, AVG's divisor, PreMulSum's scale, the copy, in place and at offsets
// that leave the inputs unaligned. Inputs are random bit patterns (every fp8 pair exhaustively),
// so NaNs, infinities, subnormals, overflow and fp8 saturation all occur; where a sum or product
// would get two NaNs, which one it returns is open (reduce.h), so one is replaced.
//
// Without a device the device tests skip, and the program exits 77 (meson's SKIP) with the
// reason, after checking that the build flag and the stubs agree.
#include "kernels/cuda_kernels.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce.h"
#include "test_util.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

namespace bc = braid::cuda;
namespace bk = braid::kernels;

TEST(CudaKernelsBuild, BuiltMatchesTheBuildFlag) {
#if BRAID_HAVE_CUDA
  EXPECT_TRUE(bc::built());
#else
  EXPECT_FALSE(bc::built());
  std::string why;
  EXPECT_EQ(bc::deviceCount(&why), 0);
  EXPECT_EQ(why, "Braid built without CUDA");
  EXPECT_EQ(bc::reduce(nullptr, nullptr, nullptr, 1, braidFloat32, braidSum, nullptr),
            bc::kNotBuilt);
  EXPECT_EQ(bc::copy(nullptr, nullptr, 1, nullptr), bc::kNotBuilt);
  EXPECT_STREQ(bc::errorString(bc::kNotBuilt), "Braid built without CUDA");
#endif
}

TEST(CudaKernelsBuild, DeviceCountSaysWhyNone) {
  std::string why;
  if (bc::deviceCount(&why) == 0) {
    EXPECT_FALSE(why.empty());
  }
  bc::deviceCount(nullptr);  // why may be NULL
}

#if BRAID_HAVE_CUDA

const braidDataType_t kTypes[] = {braidInt8,    braidUint8,    braidInt32,      braidUint32,
                                  braidInt64,   braidUint64,   braidFloat16,    braidFloat32,
                                  braidFloat64, braidBfloat16, braidFloat8e4m3, braidFloat8e5m2};
const braidRedOp_t kOps[] = {braidSum, braidProd, braidMax, braidMin, braidAvg};

// Whether element i of a buffer of dtype is a NaN.
bool isNaN(braidDataType_t dtype, const std::vector<uint8_t>& buf, size_t i) {
  const uint8_t* p = buf.data() + i * braidTypeSize(dtype);
  uint16_t h;
  float f;
  double d;
  switch (dtype) {
    case braidFloat16:
      std::memcpy(&h, p, 2);
      return std::isnan(bk::halfToFloat(h));
    case braidBfloat16:
      std::memcpy(&h, p, 2);
      return std::isnan(bk::bf16ToFloat(h));
    case braidFloat8e4m3:
      return std::isnan(bk::fp8e4m3ToFloat(*p));
    case braidFloat8e5m2:
      return std::isnan(bk::fp8e5m2ToFloat(*p));
    case braidFloat32:
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    case braidFloat64:
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    default:
      return false;
  }
}

bool isFp8(braidDataType_t dtype) { return dtype == braidFloat8e4m3 || dtype == braidFloat8e5m2; }

// Elements per test: every pair of fp8 codes; for the rest enough for many vectors, a tail and
// a head when offset.
size_t countFor(braidDataType_t dtype) { return isFp8(dtype) ? 65536 : 20011; }

// Inputs a and b: random bits (fp8: all pairs). With noTwoNaNs, b[i] becomes a[i]'s bits with
// the NaN's bits cleared (never a NaN) where both are NaN. Floating-point values are mixed
// with small integers so sums and products are also ordinary.
void fill(braidDataType_t dtype, size_t n, bool noTwoNaNs, uint32_t seed, std::vector<uint8_t>* a,
          std::vector<uint8_t>* b) {
  const size_t size = braidTypeSize(dtype);
  a->resize(n * size);
  b->resize(n * size);
  std::mt19937_64 rng(seed);
  for (auto& v : *a) v = static_cast<uint8_t>(rng());
  for (auto& v : *b) v = static_cast<uint8_t>(rng());
  if (isFp8(dtype)) {
    for (size_t i = 0; i < n; ++i) {
      (*a)[i] = static_cast<uint8_t>(i & 0xff);
      (*b)[i] = static_cast<uint8_t>(i >> 8);
    }
  }
  for (size_t i = 0; i < n; i += 3) {  // ordinary values beside the random bits
    const double x = static_cast<double>(static_cast<int>(rng() % 200) - 100) / 4;
    uint8_t* p = a->data() + i * size;
    if (dtype == braidFloat32) {
      const float f = static_cast<float>(x);
      std::memcpy(p, &f, 4);
    } else if (dtype == braidFloat64) {
      std::memcpy(p, &x, 8);
    } else if (dtype == braidFloat16 || dtype == braidBfloat16) {
      const uint16_t h = dtype == braidFloat16 ? bk::floatToHalf(static_cast<float>(x))
                                               : bk::floatToBf16(static_cast<float>(x));
      std::memcpy(p, &h, 2);
    }
  }
  if (!noTwoNaNs) return;
  for (size_t i = 0; i < n; ++i) {
    if (isNaN(dtype, *a, i) && isNaN(dtype, *b, i)) std::memset(b->data() + i * size, 0x11, size);
  }
}

// Index and bits of the first element where two buffers differ, or "" when they agree.
std::string firstDifference(braidDataType_t dtype, const std::vector<uint8_t>& want,
                            const std::vector<uint8_t>& got, const std::vector<uint8_t>& a,
                            const std::vector<uint8_t>& b) {
  const size_t size = braidTypeSize(dtype);
  for (size_t i = 0; i * size < want.size(); ++i) {
    if (std::memcmp(&want[i * size], &got[i * size], size) == 0) continue;
    auto hex = [&](const std::vector<uint8_t>& v) {
      uint64_t x = 0;
      std::memcpy(&x, &v[i * size], size);
      char s[32];
      std::snprintf(s, sizeof s, "0x%" PRIx64, x);
      return std::string(s);
    };
    return "element " + std::to_string(i) + ": a " + hex(a) + ", b " + hex(b) + ", host " +
           hex(want) + ", device " + hex(got);
  }
  return "";
}

// Device buffers for one comparison, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr_, bytes + 64), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // The buffer's start plus offset bytes.
  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(ptr_) + offset; }

 private:
  void* ptr_ = nullptr;
};

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (bc::deviceCount(&why) == 0) GTEST_SKIP() << why;
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  void toDevice(uint8_t* dst, const std::vector<uint8_t>& src) {
    ASSERT_EQ(cudaMemcpy(dst, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<uint8_t> toHost(const uint8_t* src, size_t bytes) {
    std::vector<uint8_t> v(bytes);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), src, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

  // reduce() at byte offset `offset` of each buffer (0: aligned; one element: the inputs
  // share a misalignment; `bOffset` != offset: they do not), out-of-place or in place
  // (out = a or out = b), against kernels::reduce on the same inputs.
  void checkReduce(braidDataType_t dtype, braidRedOp_t op, int divisor, size_t offset,
                   size_t bOffset, int inPlace) {
    const size_t n = countFor(dtype);
    const size_t size = braidTypeSize(dtype);
    const bool arithmetic = op == braidSum || op == braidProd || op == braidAvg;
    std::vector<uint8_t> a, b;
    fill(dtype, n, arithmetic, 7 + dtype * 31 + op, &a, &b);
    std::vector<uint8_t> want(n * size);
    ASSERT_TRUE(bk::reduce(dtype, op, want.data(), a.data(), b.data(), n, divisor));
    DeviceBuffer da(n * size), db(n * size), dout(n * size);
    toDevice(da.at(offset), a);
    toDevice(db.at(bOffset), b);
    uint8_t* out = inPlace == 1 ? da.at(offset) : inPlace == 2 ? db.at(bOffset) : dout.at(offset);
    ASSERT_EQ(bc::reduce(out, da.at(offset), db.at(bOffset), n, dtype, op, stream_, divisor),
              bc::kSuccess);
    const std::vector<uint8_t> got = toHost(out, n * size);
    EXPECT_EQ(firstDifference(dtype, want, got, a, b), "")
        << braidTypeName(dtype) << " " << braidOpName(op) << " divisor " << divisor << " offsets "
        << offset << "/" << bOffset << " in place " << inPlace;
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaKernels, ReduceEveryTypeAndOpMatchesHost) {
  for (braidDataType_t dtype : kTypes) {
    for (braidRedOp_t op : kOps) checkReduce(dtype, op, 1, 0, 0, 0);
  }
}

TEST_F(CudaKernels, ReduceInPlaceAndUnaligned) {
  for (braidDataType_t dtype : kTypes) {
    const size_t size = braidTypeSize(dtype);
    for (braidRedOp_t op : {braidSum, braidMax}) {
      checkReduce(dtype, op, 1, 0, 0, 1);
      checkReduce(dtype, op, 1, 0, 0, 2);
      checkReduce(dtype, op, 1, size, size, 0);  // shared misalignment: head, vectors, tail
      checkReduce(dtype, op, 1, 0, size, 0);     // different alignments: element by element
      checkReduce(dtype, op, 1, 3 * size, 3 * size, 1);
    }
  }
}

TEST_F(CudaKernels, AverageDividesLikeHost) {
  for (braidDataType_t dtype : kTypes) {
    for (int divisor : {2, 3, 7}) checkReduce(dtype, braidAvg, divisor, 0, 0, 0);
  }
}

TEST_F(CudaKernels, DivideMatchesHost) {
  for (braidDataType_t dtype : kTypes) {
    const size_t n = countFor(dtype);
    const size_t size = braidTypeSize(dtype);
    std::vector<uint8_t> a, b;
    fill(dtype, n, false, 99 + dtype, &a, &b);
    for (int divisor : {1, 3, 8}) {
      for (bool inPlace : {false, true}) {
        std::vector<uint8_t> want(n * size);
        ASSERT_TRUE(bk::divide(dtype, want.data(), a.data(), n, divisor));
        DeviceBuffer src(n * size), dst(n * size);
        toDevice(src.at(size), a);
        uint8_t* out = inPlace ? src.at(size) : dst.at(size);
        ASSERT_EQ(bc::divide(out, src.at(size), n, dtype, divisor, stream_), bc::kSuccess);
        EXPECT_EQ(firstDifference(dtype, want, toHost(out, n * size), a, a), "")
            << braidTypeName(dtype) << " divisor " << divisor << " in place " << inPlace;
      }
    }
  }
  EXPECT_EQ(bc::divide(nullptr, nullptr, 1, braidFloat32, 0, stream_), bc::kInvalidValue);
}

// PreMulSum: host multiplies by a scalar array of the element type (core/collectives.cc).
TEST_F(CudaKernels, ScaleMatchesHostPreMulSum) {
  for (braidDataType_t dtype : kTypes) {
    const size_t n = countFor(dtype);
    const size_t size = braidTypeSize(dtype);
    std::vector<uint8_t> a, b;
    fill(dtype, n, false, 123 + dtype, &a, &b);
    for (double factor : {3.0, -1.5, 0.25}) {
      std::vector<uint8_t> scalar(size);
      const float f = static_cast<float>(factor);
      const auto i = static_cast<int64_t>(factor);
      uint16_t h;
      switch (dtype) {
        case braidFloat16:
          h = bk::floatToHalf(f);
          std::memcpy(scalar.data(), &h, 2);
          break;
        case braidBfloat16:
          h = bk::floatToBf16(f);
          std::memcpy(scalar.data(), &h, 2);
          break;
        case braidFloat8e4m3:
          scalar[0] = bk::floatToFp8e4m3(f);
          break;
        case braidFloat8e5m2:
          scalar[0] = bk::floatToFp8e5m2(f);
          break;
        case braidFloat32:
          std::memcpy(scalar.data(), &f, 4);
          break;
        case braidFloat64:
          std::memcpy(scalar.data(), &factor, 8);
          break;
        default:  // integers: truncated, little-endian low bytes of the two's complement
          std::memcpy(scalar.data(), &i, size);
      }
      std::vector<uint8_t> scalars(n * size);
      for (size_t k = 0; k < n; ++k) std::memcpy(&scalars[k * size], scalar.data(), size);
      std::vector<uint8_t> want(n * size);
      ASSERT_TRUE(bk::reduce(dtype, braidProd, want.data(), a.data(), scalars.data(), n));
      DeviceBuffer buf(n * size);
      toDevice(buf.at(0), a);
      ASSERT_EQ(bc::scale(buf.at(0), n, dtype, factor, stream_), bc::kSuccess);
      EXPECT_EQ(firstDifference(dtype, want, toHost(buf.at(0), n * size), a, scalars), "")
          << braidTypeName(dtype) << " factor " << factor;
    }
  }
}

TEST_F(CudaKernels, CopyEveryAlignment) {
  std::vector<uint8_t> src(100003);
  std::mt19937 rng(5);
  for (auto& v : src) v = static_cast<uint8_t>(rng());
  for (size_t srcOff : {0, 1, 5, 16}) {
    for (size_t dstOff : {0, 1, 9}) {
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{17}, src.size()}) {
        DeviceBuffer s(src.size()), d(src.size());
        toDevice(s.at(srcOff), src);
        ASSERT_EQ(cudaMemset(d.at(0), 0xee, src.size() + 32), cudaSuccess);
        ASSERT_EQ(bc::copy(d.at(dstOff), s.at(srcOff), bytes, stream_), bc::kSuccess);
        const std::vector<uint8_t> got = toHost(d.at(dstOff), src.size());
        EXPECT_EQ(std::memcmp(got.data(), src.data(), bytes), 0)
            << "copy of " << bytes << " bytes at offsets " << srcOff << "/" << dstOff;
        if (bytes < src.size()) EXPECT_EQ(got[bytes], 0xee) << "copy wrote past its end";
      }
    }
  }
}

TEST_F(CudaKernels, RefusesUnknownTypeAndOp) {
  EXPECT_EQ(bc::reduce(nullptr, nullptr, nullptr, 1, braidNumTypes, braidSum, stream_),
            bc::kInvalidValue);
  EXPECT_EQ(bc::reduce(nullptr, nullptr, nullptr, 1, braidFloat32, braidNumOps, stream_),
            bc::kInvalidValue);
  EXPECT_EQ(bc::scale(nullptr, 1, braidNumTypes, 2.0, stream_), bc::kInvalidValue);
  EXPECT_STRNE(bc::errorString(bc::kInvalidValue), "");
}

// Calls ordered on the caller's CUDA stream (braidStreamCreateCuda) on a real device: a copy
// to the device before the all-reduce and a copy back after it, on the same stream, with
// cudaStreamSynchronize as the only wait; then the same three captured into a graph and
// launched three times on new inputs. Two ranks as threads, each with its own stream.
std::string orderedOnDevice(braidComm_t comm, int rank) {
  constexpr size_t kCount = 1 << 20;
  constexpr int kReplays = 3;
  auto value = [](int r, size_t i, int round) {
    return static_cast<float>(r + 1) + static_cast<float>(i % 31) + 100.0f * round;
  };
  cudaStream_t cs = nullptr;
  braidStream_t s = nullptr;
  float *in = nullptr, *out = nullptr, *hostIn = nullptr, *hostOut = nullptr;
  std::string e;
  auto fail = [&](const std::string& what) {
    if (e.empty()) e = "rank " + std::to_string(rank) + ": " + what;
  };
  if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess)
    fail("cudaStreamCreate");
  if (e.empty() && braidStreamCreateCuda(&s, cs) != braidSuccess)
    fail(std::string("braidStreamCreateCuda: ") + braidGetLastError(nullptr));
  const size_t bytes = kCount * sizeof(float);
  if (e.empty() && (braidMemAlloc(reinterpret_cast<void**>(&in), bytes) != braidSuccess ||
                    braidMemAlloc(reinterpret_cast<void**>(&out), bytes) != braidSuccess ||
                    cudaMallocHost(reinterpret_cast<void**>(&hostIn), bytes) != cudaSuccess ||
                    cudaMallocHost(reinterpret_cast<void**>(&hostOut), bytes) != cudaSuccess))
    fail("allocation");
  auto enqueue = [&] {
    if (cudaMemcpyAsync(in, hostIn, bytes, cudaMemcpyHostToDevice, cs) != cudaSuccess ||
        braidAllReduce(in, out, kCount, braidFloat32, braidSum, comm, s) != braidSuccess ||
        cudaMemcpyAsync(hostOut, out, bytes, cudaMemcpyDeviceToHost, cs) != cudaSuccess)
      fail(std::string("enqueue: ") + braidGetLastError(comm));
  };
  auto check = [&](int round) {
    for (size_t i = 0; e.empty() && i < kCount; ++i) {
      const float want = value(0, i, round) + value(1, i, round);
      if (hostOut[i] != want)
        fail("round " + std::to_string(round) + ": element " + std::to_string(i) + " is " +
             std::to_string(hostOut[i]) + ", expected " + std::to_string(want));
    }
  };
  auto fill = [&](int round) {
    for (size_t i = 0; i < kCount; ++i) hostIn[i] = value(rank, i, round);
  };
  if (e.empty()) {
    fill(0);
    enqueue();
    if (cudaStreamSynchronize(cs) != cudaSuccess) fail("cudaStreamSynchronize");
    check(0);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (e.empty()) {
    if (cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
      fail("cudaStreamBeginCapture");
    enqueue();
    if (cudaStreamEndCapture(cs, &graph) != cudaSuccess ||
        cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
      fail("capture: " + std::string(cudaGetErrorString(cudaGetLastError())));
  }
  for (int k = 1; e.empty() && k <= kReplays; ++k) {
    fill(k);
    if (cudaGraphLaunch(exec, cs) != cudaSuccess || cudaStreamSynchronize(cs) != cudaSuccess)
      fail("graph launch " + std::to_string(k));
    check(k);
  }
  if (s && braidStreamSynchronize(s) != braidSuccess)
    fail(std::string("the calls: ") + braidGetLastError(nullptr));
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (s) braidStreamDestroy(s);
  if (in) braidMemFree(in);
  if (out) braidMemFree(out);
  if (hostIn) cudaFreeHost(hostIn);
  if (hostOut) cudaFreeHost(hostOut);
  if (cs) cudaStreamDestroy(cs);
  return e;
}

TEST_F(CudaKernels, CallsAreOrderedOnTheCallersStreamAndInGraphs) {
  for (const std::string& e : braid::test::runThreads(2, orderedOnDevice)) ADD_FAILURE() << e;
}

#endif  // BRAID_HAVE_CUDA

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::string why;
  if (rc == 0 && bc::deviceCount(&why) == 0) {
    std::fprintf(stderr, "SKIP: CUDA kernel tests need a device: %s\n", why.c_str());
    return 77;
  }
  return rc;
}
