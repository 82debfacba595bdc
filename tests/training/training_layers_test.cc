// The training layer's pieces on one rank: tensors and bf16, each layer's backward against
// central finite differences, the optimizers' updates in closed form, the IDX reader (its
// errors name the file) and DistributedSampler-style sharding.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "training/attention.h"
#include "training/data.h"
#include "training/layers.h"
#include "training/model.h"
#include "training/optimizer.h"
#include "training/tensor.h"

namespace braid::training {
namespace {

Tensor randomTensor(std::vector<size_t> shape, std::mt19937_64& rng, float lo = -1.0f,
                    float hi = 1.0f) {
  Tensor t(std::move(shape));
  std::uniform_real_distribution<float> u(lo, hi);
  for (size_t i = 0; i < t.numel(); ++i) t[i] = u(rng);
  return t;
}

TEST(Tensor, ShapeAndGemm) {
  Tensor a({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(a.rows(), 2u);
  EXPECT_EQ(a.cols(), 3u);
  EXPECT_EQ(a.shapeString(), "[2, 3]");
  EXPECT_THROW(Tensor({2, 2}, {1, 2, 3}), std::invalid_argument);
  // [2,3] x [3,2]^T-free: C = A B with B [3, 2].
  const float b[] = {1, 0, 0, 1, 1, 1};
  float c[4] = {0, 0, 0, 0};
  gemm(false, false, 2, 2, 3, 1.0f, a.data(), b, 0.0f, c);
  EXPECT_EQ(c[0], 4.0f);
  EXPECT_EQ(c[1], 5.0f);
  EXPECT_EQ(c[2], 10.0f);
  EXPECT_EQ(c[3], 11.0f);
  // C += A^T-shaped product: A^T [3,2] x A [2,3] diagonal = column sums of squares.
  float d[9] = {};
  gemm(true, false, 3, 3, 2, 1.0f, a.data(), a.data(), 0.0f, d);
  EXPECT_EQ(d[0], 17.0f);
  EXPECT_EQ(d[4], 29.0f);
  EXPECT_EQ(d[8], 45.0f);
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(toBf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(toBf16(-2.0f).bits, 0xc000);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(toBf16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(toBf16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(fromBf16(Bf16{0x3f82}), 1.015625f);
  EXPECT_TRUE(std::isnan(fromBf16(toBf16(NAN))));
  EXPECT_EQ(fromBf16(toBf16(INFINITY)), INFINITY);
}

TEST(Linear, ForwardExact) {
  Sequential m;
  m.add(std::make_unique<Linear>(2, 2));
  m.initialize(1);
  auto p = m.parameters();
  const float w[] = {1, 2, 3, 4}, b[] = {0.5f, -1};
  std::copy(w, w + 4, p[0]->value);
  std::copy(b, b + 2, p[1]->value);
  const Tensor& y = m.forward(Tensor({1, 2}, {1, 1}));
  EXPECT_EQ(y[0], 3.5f);  // 1 + 2 + 0.5
  EXPECT_EQ(y[1], 6.0f);  // 3 + 4 - 1
  EXPECT_THROW(m.forward(Tensor({1, 3})), std::invalid_argument);
}

// Checks a model's backward against finite differences of L = sum(y * r), r random, by the
// five-point stencil (-L(+2h) + 8 L(+h) - 8 L(-h) + L(-2h)) / 12h. In fp32 with h = 1e-2 its
// truncation error is h^4 |L^(5)| / 30 (O(1e-8) times the fifth derivative) and its rounding
// error about 3 u |L| / h (u = 2^-24: ~2e-5 for |L| ~ 10), so 2e-3 (absolute, or relative to
// larger gradients) leaves a wide margin while a wrong term in a backward fails.
void gradientCheck(Sequential& m, Tensor x, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor r = randomTensor(m.forward(x).shape(), rng);
  auto lossAt = [&](const Tensor& in) {
    const Tensor& y = m.forward(in);
    double l = 0.0;
    for (size_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y[i]) * r[i];
    return l;
  };
  m.zeroGrad();
  m.forward(x);
  m.backward(r);
  const float h = 1e-2f;
  auto expectClose = [](double numeric, double analytic, const std::string& what) {
    EXPECT_NEAR(numeric, analytic, 2e-3 * std::max(1.0, std::fabs(analytic))) << what;
  };
  for (Parameter* p : m.parameters()) {
    std::vector<float> analytic(p->grad, p->grad + p->numel);
    for (size_t i = 0; i < p->numel; ++i) {
      const float keep = p->value[i];
      auto at = [&](float step) {
        p->value[i] = keep + step;
        return lossAt(x);
      };
      const double numeric = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12.0 * h);
      p->value[i] = keep;
      expectClose(numeric, analytic[i], p->name + "[" + std::to_string(i) + "]");
    }
  }
}

// dx of a single layer against central differences of L = sum(layer(x) * r).
void inputGradientCheck(Layer& layer, const Tensor& x, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor y;
  layer.forward(x, y);
  Tensor r = randomTensor(y.shape(), rng), dx;
  layer.backward(r, dx);
  ASSERT_EQ(dx.shape(), x.shape());
  const float h = 1e-2f;
  for (size_t i = 0; i < x.numel(); ++i) {
    Tensor xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    double lp = 0.0, lm = 0.0;
    layer.forward(xp, y);
    for (size_t k = 0; k < y.numel(); ++k) lp += static_cast<double>(y[k]) * r[k];
    layer.forward(xm, y);
    for (size_t k = 0; k < y.numel(); ++k) lm += static_cast<double>(y[k]) * r[k];
    EXPECT_NEAR((lp - lm) / (2 * h), dx[i], 2e-3 * std::max(1.0, std::fabs(double{dx[i]})))
        << layer.name() << " dx[" << i << "]";
  }
}

TEST(GradientCheck, Linear) {
  std::mt19937_64 rng(7);
  Sequential m;
  m.add(std::make_unique<Linear>(5, 4));
  m.initialize(3);
  gradientCheck(m, randomTensor({3, 5}, rng), 11);
  m.layer(0).needs_input_grad = true;
  inputGradientCheck(m.layer(0), randomTensor({3, 5}, rng), 12);
}

TEST(GradientCheck, ReLU) {
  // Inputs kept at least 0.1 away from the kink at 0, farther than the step h.
  std::mt19937_64 rng(8);
  Tensor x = randomTensor({4, 6}, rng, 0.1f, 1.0f);
  for (size_t i = 0; i < x.numel(); i += 2) x[i] = -x[i];
  ReLU relu;
  inputGradientCheck(relu, x, 13);
}

TEST(GradientCheck, GELU) {
  std::mt19937_64 rng(9);
  GELU gelu;
  inputGradientCheck(gelu, randomTensor({4, 6}, rng, -3.0f, 3.0f), 14);
}

TEST(GradientCheck, LayerNorm) {
  std::mt19937_64 rng(10);
  Sequential m;
  m.add(std::make_unique<LayerNorm>(6));
  m.initialize(1);
  // Non-trivial gamma and beta so that their gradients and dx's gamma term are exercised.
  for (Parameter* p : m.parameters()) {
    for (size_t i = 0; i < p->numel; ++i) p->value[i] += 0.1f * static_cast<float>(i + 1);
  }
  gradientCheck(m, randomTensor({3, 6}, rng), 15);
  m.layer(0).needs_input_grad = true;
  inputGradientCheck(m.layer(0), randomTensor({3, 6}, rng), 16);
}

TEST(GradientCheck, MlpWithGeluAndLayerNorm) {
  std::mt19937_64 rng(11);
  Sequential m;
  m.add(std::make_unique<Linear>(5, 7, "fc1"));
  m.add(std::make_unique<LayerNorm>(7, 1e-5f, "ln"));
  m.add(std::make_unique<GELU>());
  m.add(std::make_unique<Linear>(7, 3, "fc2"));
  m.initialize(5);
  gradientCheck(m, randomTensor({4, 5}, rng), 17);
}

TEST(GradientCheck, PatchEmbedding) {
  // 6x4 images in 2x2 patches: 6 tokens of 4 pixels, embedded in 3 features.
  std::mt19937_64 rng(13);
  Sequential m;
  m.add(std::make_unique<PatchEmbedding>(6, 4, 2, 3));
  m.initialize(2);
  gradientCheck(m, randomTensor({2, 24}, rng), 18);
  m.layer(0).needs_input_grad = true;
  inputGradientCheck(m.layer(0), randomTensor({2, 24}, rng), 19);
  EXPECT_THROW(PatchEmbedding(6, 4, 4, 3), std::invalid_argument);
}

TEST(PatchEmbedding, TokenOrderExact) {
  // A 4x4 image of its pixel indices, 2x2 patches, W = identity on 4 features, no bias or
  // position: token t holds its patch's pixels row by row, patches in row-major order.
  Sequential m;
  m.add(std::make_unique<PatchEmbedding>(4, 4, 2, 4));
  m.initialize(1);
  for (Parameter* p : m.parameters()) std::fill(p->value, p->value + p->numel, 0.0f);
  for (size_t i = 0; i < 4; ++i) m.parameters()[0]->value[i * 4 + i] = 1.0f;
  Tensor x({1, 16});
  for (size_t i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  const Tensor& y = m.forward(x);
  ASSERT_EQ(y.shape(), (std::vector<size_t>{4, 4}));
  const float want[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(y[i], want[i]) << i;
}

TEST(GradientCheck, MultiHeadSelfAttention) {
  // 2 sequences of 3 tokens, dim 4 in 2 heads.
  std::mt19937_64 rng(14);
  Sequential m;
  m.add(std::make_unique<MultiHeadSelfAttention>(4, 2, 3));
  m.initialize(4);
  gradientCheck(m, randomTensor({6, 4}, rng), 20);
  m.layer(0).needs_input_grad = true;
  inputGradientCheck(m.layer(0), randomTensor({6, 4}, rng), 21);
  EXPECT_THROW(MultiHeadSelfAttention(4, 3, 3), std::invalid_argument);
  EXPECT_THROW(m.forward(Tensor({5, 4})), std::invalid_argument);
}

TEST(MultiHeadSelfAttention, UniformAttentionAveragesValues) {
  // Wq = Wk = 0: every score is 0, attention is uniform, so with Wv = Wo = identity each
  // token's output is the mean of its sequence's inputs (plus biases, here 0).
  Sequential m;
  m.add(std::make_unique<MultiHeadSelfAttention>(2, 1, 2));
  m.initialize(1);
  for (Parameter* p : m.parameters()) std::fill(p->value, p->value + p->numel, 0.0f);
  float* wqkv = m.parameters()[0]->value;  // [6, 2]: rows 4, 5 are Wv
  wqkv[4 * 2 + 0] = 1.0f;
  wqkv[5 * 2 + 1] = 1.0f;
  float* wo = m.parameters()[2]->value;
  wo[0] = wo[3] = 1.0f;
  const Tensor& y = m.forward(Tensor({2, 2}, {1, 2, 3, 6}));
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[1], 4.0f);
  EXPECT_EQ(y[2], 2.0f);
  EXPECT_EQ(y[3], 4.0f);
}

TEST(GradientCheck, SmallVit) {
  // 4x4 images, 2x2 patches (4 tokens), dim 4, 2 heads, 1 block, 3 classes: every ViT
  // layer (patch embedding, pre-norm residual blocks, attention, GELU MLP, token pooling, head).
  std::mt19937_64 rng(15);
  auto m = makeVit(4, 4, 2, 4, 2, 1, 3);
  m->initialize(6);
  gradientCheck(*m, randomTensor({2, 16}, rng), 22);
  const Tensor& y = m->forward(randomTensor({5, 16}, rng));
  EXPECT_EQ(y.shape(), (std::vector<size_t>{5, 3}));
  EXPECT_THROW(Residual({}), std::invalid_argument);
}

TEST(GradientCheck, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(12);
  Tensor logits = randomTensor({4, 5}, rng, -2.0f, 2.0f);
  const std::vector<int32_t> labels = {0, 3, 4, 1};
  SoftmaxCrossEntropy ce;
  ce.forward(logits, labels);
  Tensor d;
  ce.backward(d);
  const float h = 1e-2f;
  for (size_t i = 0; i < logits.numel(); ++i) {
    Tensor p = logits, m = logits;
    p[i] += h;
    m[i] -= h;
    const double numeric = (double{ce.forward(p, labels)} - ce.forward(m, labels)) / (2 * h);
    EXPECT_NEAR(numeric, d[i], 2e-3) << "dlogits[" << i << "]";
  }
}

TEST(SoftmaxCrossEntropy, ExactValuesAndErrors) {
  SoftmaxCrossEntropy ce;
  // Equal logits: loss = log(classes), gradient (1/C - onehot) / batch.
  const float loss = ce.forward(Tensor({2, 4}), {1, 2});
  EXPECT_FLOAT_EQ(loss, std::log(4.0f));
  Tensor d;
  ce.backward(d);
  EXPECT_FLOAT_EQ(d[0], 0.125f);
  EXPECT_FLOAT_EQ(d[1], -0.375f);
  EXPECT_THROW(ce.forward(Tensor({2, 4}), {1, 4}), std::invalid_argument);
  EXPECT_THROW(ce.forward(Tensor({2, 4}), {1}), std::invalid_argument);
}

TEST(Optimizer, SgdMomentumClosedForm) {
  Sgd sgd(0.1f, 0.9f);
  sgd.resize(1);
  float p = 1.0f;
  const float g = 0.5f;
  sgd.update(&p, &g, 1, 0);  // buf = 0.5, p = 1 - 0.05
  EXPECT_FLOAT_EQ(p, 0.95f);
  sgd.update(&p, &g, 1, 0);  // buf = 0.45 + 0.5, p = 0.95 - 0.095
  EXPECT_FLOAT_EQ(p, 0.855f);
  EXPECT_EQ(sgd.stateBytes(), 4u);
}

TEST(Optimizer, AdamWFirstStepIsSignedLr) {
  // Step 1: m_hat = g, v_hat = g^2, so p = p (1 - lr wd) - lr g / (|g| + eps).
  AdamW adam(0.01f, 0.9f, 0.999f, 1e-8f, 0.1f);
  adam.resize(2);
  float p[2] = {1.0f, -2.0f};
  const float g[2] = {0.25f, -4.0f};
  adam.beginStep();
  adam.update(p, g, 2, 0);
  EXPECT_NEAR(p[0], 1.0f * (1 - 0.001f) - 0.01f, 1e-6f);
  EXPECT_NEAR(p[1], -2.0f * (1 - 0.001f) + 0.01f, 1e-6f);
  EXPECT_EQ(adam.stateBytes(), 16u);
  EXPECT_FLOAT_EQ(cosineLearningRate(1.0f, 0, 10), 1.0f);
  EXPECT_FLOAT_EQ(cosineLearningRate(1.0f, 5, 10), 0.5f);
}

TEST(Optimizer, AdafactorFirstStepIsSignedRelativeStep) {
  // Step 1: beta2 = 0, so V = G^2 (+ 1e-30) exactly for a vector, and for a matrix whose G^2
  // is rank one (G = u v^T: R C^T / sum(R) = G^2). Then U = sign(G), RMS(U) = 1, and
  // p -= min(lr, 1) * max(eps2, RMS(p)) * sign(g).
  Adafactor opt(0.01f);
  opt.resize(8);
  // A 2x3 matrix at offset 0 and a vector of 2 at offset 6.
  opt.setSlots({ParameterSlot{0, 2, 3}, ParameterSlot{6, 1, 2}});
  EXPECT_EQ(opt.stateBytes(), (2 + 3 + 2) * sizeof(float));
  const float u[2] = {1.0f, -2.0f}, v[3] = {0.5f, -1.0f, 4.0f};
  float g[8], p[8];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) g[i * 3 + j] = u[i] * v[j];
  }
  g[6] = 0.25f;
  g[7] = -3.0f;
  for (int i = 0; i < 8; ++i) p[i] = 2.0f;  // RMS(p) = 2 for both parameters
  opt.beginStep();
  opt.update(p, g, 8, 0);
  for (int i = 0; i < 8; ++i) {
    EXPECT_NEAR(p[i], 2.0f - 0.02f * (g[i] > 0 ? 1.0f : -1.0f), 1e-6f) << i;
  }
  Adafactor unset;
  float q = 1.0f;
  const float gq = 1.0f;
  unset.beginStep();
  EXPECT_THROW(unset.update(&q, &gq, 1, 0), std::logic_error);
}

TEST(DistributedIndices, CoverPadAndShuffleLikeDistributedSampler) {
  const size_t count = 10;
  const int nranks = 4;
  std::vector<size_t> all;
  for (int r = 0; r < nranks; ++r) {
    auto idx = distributedIndices(count, r, nranks, 5, 0);
    EXPECT_EQ(idx.size(), 3u);  // ceil(10 / 4)
    all.insert(all.end(), idx.begin(), idx.end());
  }
  EXPECT_EQ(std::set<size_t>(all.begin(), all.end()).size(), count);  // 2 repeats as padding
  EXPECT_EQ(distributedIndices(count, 1, nranks, 5, 0), distributedIndices(count, 1, nranks, 5, 0));
  EXPECT_NE(distributedIndices(count, 1, nranks, 5, 0), distributedIndices(count, 1, nranks, 5, 1));
  // Without shuffling: rank r takes r, r + nranks, ... and wraps around to pad.
  EXPECT_EQ(distributedIndices(count, 2, nranks, 5, 0, false), (std::vector<size_t>{2, 6, 0}));
}

std::string writeGz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  return path;
}

// Initial weights: uniformFill's closed form (tensor.h) gives libstdc++'s
// std::uniform_real_distribution<float> values bit for bit, and stays in [lo, hi).
TEST(Init, UniformFillIsTheUniformRealDistributionOfLibstdcxx) {
  std::mt19937_64 mine(7), theirs(7);
  const float lo = -0.0625f, hi = 0.0625f;
  std::vector<float> x(200000);
  uniformFill(mine, lo, hi, x.data(), x.size());
  std::uniform_real_distribution<float> u(lo, hi);
  size_t differ = 0, outside = 0;
  for (float v : x) {
    outside += !(v >= lo && v < hi);
#ifdef __GLIBCXX__
    const float want = u(theirs);
    differ += std::memcmp(&v, &want, sizeof(float)) != 0;
#endif
  }
  EXPECT_EQ(outside, 0u);
  EXPECT_EQ(differ, 0u);
}

TEST(Idx, ReadsGzipAndNamesBadFiles) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("braid_idx_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // Two 2x2 images and their labels.
  const std::vector<uint8_t> img = {0, 0, 8, 3, 0, 0,   0,  2,   0, 0, 0, 2,
                                    0, 0, 0, 2, 0, 255, 51, 102, 1, 2, 3, 4};
  const std::vector<uint8_t> lab = {0, 0, 8, 1, 0, 0, 0, 2, 7, 3};
  const auto d = readIdx(writeGz(dir + "/img.gz", img), writeGz(dir + "/lab.gz", lab));
  EXPECT_EQ(d.count, 2u);
  EXPECT_EQ(d.features, 4u);
  EXPECT_EQ(d.image(1), 1.0f);
  EXPECT_EQ(d.image(2), 0.2f);
  // Standardizing rewrites the value of each byte: (byte / 255 - mean) / stddev, in fp32.
  ImageDataset s = d;
  standardize(s, 0.25f, 0.5f);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(s.image(i), (d.image(i) - 0.25f) * (1.0f / 0.5f));
  Tensor x;
  std::vector<int32_t> y;
  gatherBatch(s, {1}, 0, 1, x, y);
  EXPECT_EQ(x.shape(), (std::vector<size_t>{1, 4}));
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(x[k], s.image(4 + k));
  EXPECT_EQ(y, (std::vector<int32_t>{3}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{7, 3}));

  auto expectError = [&](const std::string& images, const std::string& labels,
                         const std::string& must_name) {
    try {
      readIdx(images, labels);
      ADD_FAILURE() << "no error for " << must_name;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(must_name), std::string::npos) << e.what();
    }
  };
  expectError(dir + "/missing.gz", dir + "/lab.gz", dir + "/missing.gz");
  std::vector<uint8_t> truncated(img.begin(), img.end() - 1);
  expectError(writeGz(dir + "/short.gz", truncated), dir + "/lab.gz", dir + "/short.gz");
  std::vector<uint8_t> bad_magic = img;
  bad_magic[3] = 1;
  expectError(writeGz(dir + "/magic.gz", bad_magic), dir + "/lab.gz", dir + "/magic.gz");
  const std::vector<uint8_t> three = {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3};
  expectError(dir + "/img.gz", writeGz(dir + "/three.gz", three), dir + "/three.gz");
  // Gzip whose compressed stream is cut short.
  {
    FILE* f = fopen((dir + "/img.gz").c_str(), "rb");
    std::vector<uint8_t> gz(4096);
    gz.resize(fread(gz.data(), 1, gz.size(), f));
    fclose(f);
    gz.resize(gz.size() / 2);
    FILE* o = fopen((dir + "/cut.gz").c_str(), "wb");
    fwrite(gz.data(), 1, gz.size(), o);
    fclose(o);
  }
  expectError(dir + "/cut.gz", dir + "/lab.gz", dir + "/cut.gz");
  std::filesystem::remove_all(dir);
}

TEST(Idx, FashionMnist) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << dir << " is absent (Debian package dataset-fashion-mnist)";
  }
  const auto train = loadFashionMnist(dir, true);
  const auto test = loadFashionMnist(dir, false);
  EXPECT_EQ(train.count, 60000u);
  EXPECT_EQ(test.count, 10000u);
  EXPECT_EQ(train.features, 784u);
  std::vector<int> per_class(10, 0);
  for (int32_t l : test.labels) ++per_class[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << "class " << c;
}

}  // namespace
}  // namespace braid::training
