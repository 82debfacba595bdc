// Mixed precision, dynamic loss scaling, activation recomputation and unused parameters in
// the training layer (issue 9):
//  - fp16 conversion (round to nearest even, subnormals, overflow to inf);
//  - LossScaler's policy (torch.amp.GradScaler's): skip and halve on inf/NaN, double after
//    growth_interval good steps;
//  - the engine under fp16: an overflow that only one rank's shard sees skips the step and
//    halves the scale on every rank, at every ZeRO stage;
//  - recomputation gives bit-identical gradients (MLP and ViT, fp32 and bf16, and through
//    the engine at stages 0 and 3) and keeps fewer activation elements;
//  - bf16 and fp16 training on 2 and 4 ranks against one rank at the same precision on the
//    global batch;
//  - a parameter that gets no gradient in a step (on one rank or on all) neither hangs nor
//    breaks the bucket collectives: its update is the average of the ranks' gradients, 0
//    where unused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_scale.h"
#include "test_util.h"
#include "training/attention.h"
#include "training/data_parallel.h"
#include "training/loss_scaler.h"
#include "training/model.h"
#include "training/optimizer.h"
#include "training_fixtures.h"

namespace braid::training {
namespace {

using namespace fixtures;

void expectNoErrors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) {
    if (!e.empty()) ADD_FAILURE() << e;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(toFp16(1.0f).bits, 0x3c00);
  EXPECT_EQ(toFp16(-2.0f).bits, 0xc000);
  EXPECT_EQ(toFp16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(toFp16(65519.0f).bits, 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(toFp16(65520.0f).bits, 0x7c00);  // the midpoint rounds to even: inf
  EXPECT_EQ(toFp16(1e6f).bits, 0x7c00);
  EXPECT_EQ(toFp16(-std::numeric_limits<float>::infinity()).bits, 0xfc00);
  EXPECT_TRUE(std::isnan(fromFp16(toFp16(std::nanf("")))));
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to even (1); 1 + 3 * 2^-11 to 1 + 2^-9.
  EXPECT_EQ(fromFp16(toFp16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(fromFp16(toFp16(1.0f + 3 * std::ldexp(1.0f, -11))), 1.0f + std::ldexp(1.0f, -9));
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie that rounds to 0, 1.5 * 2^-25 to 2^-24.
  EXPECT_EQ(toFp16(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(toFp16(std::ldexp(1.0f, -25)).bits, 0x0000);
  EXPECT_EQ(toFp16(1.5f * std::ldexp(1.0f, -25)).bits, 0x0001);
  EXPECT_EQ(toFp16(std::ldexp(1.0f, -14)).bits, 0x0400);  // the smallest normal
  // Every fp16 value survives the round trip.
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const Fp16 h{static_cast<uint16_t>(b)};
    if (((b >> 10) & 0x1f) == 0x1f && (b & 0x3ff)) continue;  // NaN payloads
    ASSERT_EQ(toFp16(fromFp16(h)).bits, h.bits) << b;
  }
  // roundTo's in-place fast path agrees with the conversion on random bit patterns.
  std::mt19937 rng(5);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    float r = f;
    roundTo(Precision::kFp16, &r, 1);
    ASSERT_EQ(r, fromFp16(toFp16(f))) << f;
  }
  float v[3] = {0.1f, 1.0f / 3, 1e-9f};
  roundTo(Precision::kFp16, v, 3);
  EXPECT_EQ(v[0], fromFp16(toFp16(0.1f)));
  EXPECT_EQ(v[2], 0.0f);
}

TEST(LossScaler, SkipsAndHalvesOnOverflowGrowsAfterTheInterval) {
  LossScalerOptions o;
  o.growth_interval = 3;
  LossScaler s(o);
  EXPECT_EQ(s.scale(), 65536.0f);
  EXPECT_FALSE(s.update(true));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.skippedSteps(), 1);
  EXPECT_TRUE(s.update(false));
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_FALSE(s.update(true));  // an overflow restarts the count of good steps
  EXPECT_EQ(s.scale(), 16384.0f);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 16384.0f);
  EXPECT_TRUE(s.update(false));
  EXPECT_EQ(s.scale(), 32768.0f);
  EXPECT_EQ(s.goodStepsInARow(), 0);
  EXPECT_EQ(s.skippedSteps(), 2);
  // The default interval is GradScaler's 2000 steps.
  LossScaler d;
  for (int i = 0; i < 1999; ++i) d.update(false);
  EXPECT_EQ(d.scale(), 65536.0f);
  d.update(false);
  EXPECT_EQ(d.scale(), 131072.0f);
  // Never below min_scale.
  LossScalerOptions m;
  m.initial_scale = 2.0f;
  LossScaler low(m);
  for (int i = 0; i < 4; ++i) low.update(true);
  EXPECT_EQ(low.scale(), 1.0f);
  EXPECT_THROW(LossScaler(LossScalerOptions{0.0f}), std::invalid_argument);
  EXPECT_FALSE(allFinite(std::vector<float>{1, std::nanf(""), 2}.data(), 3));
  EXPECT_FALSE(allFinite(std::vector<float>{1, -INFINITY}.data(), 2));
  EXPECT_TRUE(allFinite(std::vector<float>{1, -3e38f, 0}.data(), 3));
}

TEST(LossScaler, OverflowOnOneRanksShardSkipsTheStepOnEveryRank) {
  // Linear(4, 2) on 2 ranks: one unit of 10 parameters laid out in reverse order, b0 b1 W00
  // .. W13; at stages 1-3 rank 0 owns b0..W02, rank 1 W03..W13. Rank 0's input x3 = 60000
  // (finite in fp16) makes dW03 and dW13 = dy * 60000 overflow fp16 on the wire, inside rank
  // 1's slice only: rank 0's share stays finite and it must still skip. Then 3 good steps
  // (growth interval 3) double the scale.
  for (int zero : {0, 1, 2, 3}) {
    auto errors = test::runThreads(2, [&](braidComm_t comm, int rank) -> std::string {
      auto model = makeMlp({4, 2});
      model->initialize(kSeed);
      // The label the model gets wrong, so that dy is +-scale, not 0.
      Tensor big({1, 4}, {0.1f, 0.2f, 0.3f, 60000.0f});
      const Tensor& z = model->forward(big);
      const int32_t wrong = z[0] < z[1] ? 0 : 1;
      Sgd sgd(0.1f, 0.0f);
      DataParallelOptions o;
      o.zero_stage = zero;
      o.compute = Precision::kFp16;
      o.grad_dtype = braidFloat16;
      o.loss_scaling = true;
      o.scaler.initial_scale = 2.0f;
      o.scaler.growth_interval = 3;
      DataParallel engine(*model, sgd, comm, o);
      SoftmaxCrossEntropy loss;
      const std::vector<float> before = engine.fullParameters();
      Tensor small({1, 4}, {0.5f, -0.25f, 0.125f, 1.0f});
      engine.step(rank == 0 ? big : small, {rank == 0 ? wrong : 0}, loss);
      const std::string where = "zero " + std::to_string(zero) + ", rank " + std::to_string(rank);
      if (engine.lastStepApplied()) return where + ": the overflowed step was applied";
      if (engine.lossScale() != 1.0f) {
        return where + ": scale " + std::to_string(engine.lossScale()) + " after the overflow";
      }
      if (engine.skippedSteps() != 1) return where + ": skipped steps not counted";
      if (engine.fullParameters() != before) return where + ": a skipped step moved parameters";
      for (int s = 0; s < 3; ++s) {
        engine.step(small, {s % 2}, loss);
        if (!engine.lastStepApplied()) return where + ": a good step was skipped";
        const float want = s < 2 ? 1.0f : 2.0f;
        if (engine.lossScale() != want) {
          return where + ": scale " + std::to_string(engine.lossScale()) + " after good step " +
                 std::to_string(s + 1);
        }
      }
      if (engine.fullParameters() == before) return where + ": good steps did not train";
      return "";
    });
    expectNoErrors(errors);
  }
}

// Parameter gradients in model order after one forward and backward on `x`.
std::vector<float> gradients(Sequential& m, const Tensor& x, const std::vector<int32_t>& y,
                             size_t* activation_elements) {
  SoftmaxCrossEntropy loss;
  m.zeroGrad();
  loss.forward(m.forward(x), y);
  *activation_elements = m.activationElements();
  Tensor d;
  loss.backward(d);
  m.backward(d);
  std::vector<float> g;
  for (Parameter* p : m.parameters()) g.insert(g.end(), p->grad, p->grad + p->numel);
  return g;
}

TEST(Recompute, GradientsAreBitIdentical) {
  Tensor x;
  std::vector<int32_t> y;
  data().batch(0, 16, x, y);
  for (bool vit : {false, true}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
      auto make = [&] { return vit ? makeVit(28, 28, 7, 16, 2, 2, kClasses) : makeMlp(); };
      auto plain = make(), again = make();
      plain->initialize(kSeed);
      again->initialize(kSeed);
      plain->setPrecision(p);
      again->setPrecision(p);
      again->setRecompute(true);
      size_t kept_plain = 0, kept_again = 0;
      // Twice: the second pass runs on buffers the first left behind.
      for (int pass = 0; pass < 2; ++pass) {
        const std::vector<float> g1 = gradients(*plain, x, y, &kept_plain);
        const std::vector<float> g2 = gradients(*again, x, y, &kept_again);
        ASSERT_EQ(g1, g2) << (vit ? "vit " : "mlp ") << precisionName(p) << ", pass " << pass;
      }
      EXPECT_LT(kept_again, kept_plain);
      printf(
          "[recompute] %s %s, 16 rows: %zu activation elements kept without, %zu with "
          "(peak during backward %zu)\n",
          vit ? "vit" : "mlp", precisionName(p), kept_plain, kept_again,
          again->peakBackwardActivationElements());
    }
  }
}

struct RunConfig {
  int zero = 0;
  Precision precision = Precision::kFp32;
  bool recompute = false;
  std::string optimizer = "sgd";
  bool fp32_wire = false;  // 16-bit compute, but gradients sent as fp32
  size_t steps = kSteps;   // at most kSteps (the data set's batches)
};

// Trains c.steps on `nranks` thread ranks; returns rank 0's final fp32 master parameters.
std::vector<float> train(int nranks, const RunConfig& c, long* skipped = nullptr) {
  std::vector<std::vector<float>> result(nranks);
  std::vector<long> skips(nranks);
  auto errors = test::runThreads(nranks, [&](braidComm_t comm, int rank) -> std::string {
    try {
      auto model = makeMlp();
      model->initialize(kSeed);
      model->setRecompute(c.recompute);
      auto opt = makeOptimizer(c.optimizer, c.optimizer == "sgd" ? 0.05f : 1e-3f);
      DataParallelOptions o;
      o.zero_stage = c.zero;
      o.first_bucket_bytes = 4096;
      o.bucket_cap_bytes = 65536;
      o.compute = c.precision;
      o.grad_dtype = c.fp32_wire                       ? braidFloat32
                     : c.precision == Precision::kBf16 ? braidBfloat16
                     : c.precision == Precision::kFp16 ? braidFloat16
                                                       : braidFloat32;
      o.loss_scaling = c.precision == Precision::kFp16;
      DataParallel engine(*model, *opt, comm, o);
      SoftmaxCrossEntropy loss;
      Tensor x;
      std::vector<int32_t> y;
      const size_t local = kGlobalBatch / static_cast<size_t>(nranks);
      for (size_t s = 0; s < c.steps; ++s) {
        data().batch(s * kGlobalBatch + static_cast<size_t>(rank) * local, local, x, y);
        engine.step(x, y, loss);
      }
      skips[rank] = engine.skippedSteps();
      result[rank] = engine.fullParameters();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  expectNoErrors(errors);
  for (int r = 1; r < nranks; ++r) EXPECT_EQ(result[r], result[0]) << "rank " << r << " differs";
  if (skipped) *skipped = skips[0];
  return result[0];
}

TEST(Recompute, EngineStepsAreBitIdentical) {
  // Stage 3 gathers each block's parameters again for the recomputed forward.
  for (int zero : {0, 3}) {
    for (Precision p : {Precision::kFp32, Precision::kBf16}) {
      RunConfig c;
      c.zero = zero;
      c.precision = p;
      const std::vector<float> plain = train(2, c);
      c.recompute = true;
      EXPECT_EQ(train(2, c), plain) << "zero " << zero << " " << precisionName(p);
    }
  }
}

TEST(MixedPrecision, OneStepMatchesOneRankWithinTheWireRounding) {
  // One SGD step (lr 1, no momentum) from the same weights: p0 - p1 is the averaged gradient
  // as the optimizer saw it. Forward and backward are row by row the same on N ranks and on
  // one (the same 16-bit working copy, the same rounded activations), so the N-rank and
  // one-rank gradients differ only in (a) the order of the fp32 sums over rows and (b) the
  // 16-bit rounding on the wire: each rank rounds its local gradient g_r and Braid rounds
  // after each of the N - 1 additions and the average (N + 1 roundings of relative size u =
  // 2^-8 bf16, 2^-11 fp16, of at most mean_r |g_r| each), where one rank rounds once. Per
  // element: |g_N - g_1| <= (N + 2) u mean_r |g_r| (1% margin), plus for fp16 the subnormal
  // spacing 2^-25 / S per rounding, plus the fp32 rounding of p0 - g (2^-24 |p1|).
  constexpr size_t kLocalRows = 8;
  for (Precision p : {Precision::kBf16, Precision::kFp16}) {
    const double u = std::ldexp(1.0, p == Precision::kBf16 ? -8 : -11);
    const float scale = p == Precision::kFp16 ? 65536.0f : 1.0f;
    for (int nranks : {2, 4}) {
      // The local gradients at this precision, on plain models holding the working copy.
      const size_t global = kLocalRows * static_cast<size_t>(nranks);
      std::vector<std::vector<float>> local(nranks);
      for (int r = 0; r < nranks; ++r) {
        auto m = makeMlp();
        m->initialize(kSeed);
        m->setPrecision(p);
        for (Parameter* q : m->parameters()) roundTo(p, q->value, q->numel);
        Tensor x;
        std::vector<int32_t> y;
        data().batch(static_cast<size_t>(r) * kLocalRows, kLocalRows, x, y);
        SoftmaxCrossEntropy loss;
        m->zeroGrad();
        loss.forward(m->forward(x), y);
        Tensor d;
        loss.backward(d);
        for (size_t i = 0; i < d.numel(); ++i) d[i] *= scale;
        m->backward(d);
        for (Parameter* q : m->parameters()) {
          for (size_t i = 0; i < q->numel; ++i) local[r].push_back(q->grad[i] / scale);
        }
      }
      uint64_t volume = 0;
      auto oneStep = [&](int ranks, int zero) {
        std::vector<float> out;
        auto errors = test::runThreads(ranks, [&](braidComm_t comm, int rank) -> std::string {
          auto model = makeMlp();
          model->initialize(kSeed);
          Sgd sgd(1.0f, 0.0f);
          DataParallelOptions o;
          o.zero_stage = zero;
          o.compute = p;
          o.grad_dtype = p == Precision::kBf16 ? braidBfloat16 : braidFloat16;
          o.loss_scaling = p == Precision::kFp16;
          DataParallel engine(*model, sgd, comm, o);
          SoftmaxCrossEntropy loss;
          Tensor x;
          std::vector<int32_t> y;
          const size_t rows = global / static_cast<size_t>(ranks);
          data().batch(static_cast<size_t>(rank) * rows, rows, x, y);
          engine.step(x, y, loss);
          if (!engine.lastStepApplied()) return "the step was skipped";
          const uint64_t v = engine.commVolumeBytes();
          std::vector<float> q = engine.fullParameters();
          if (rank == 0) {
            out = std::move(q);
            volume = v;
          }
          return "";
        });
        expectNoErrors(errors);
        return out;
      };
      auto start = makeMlp();
      start->initialize(kSeed);
      const std::vector<float> p0 = start->flatValues();
      for (int zero : {0, 1, 2, 3}) {
        const std::vector<float> ref = oneStep(1, zero), got = oneStep(nranks, zero);
        // Gradients and parameter gathers in 16 bits: DDP 2 psi x 2 B; stages 1-2 psi x 2 B
        // each way; stage 3 three times psi x 2 B; fp16 adds the 8-byte overflow flag.
        const uint64_t psi = p0.size(), flag = p == Precision::kFp16 ? 8 : 0;
        const uint64_t want = (zero == 3 ? 6 : 4) * psi + flag;
        EXPECT_GE(volume, want) << precisionName(p) << " zero " << zero;
        EXPECT_LE(volume, want + 64) << precisionName(p) << " zero " << zero;
        ASSERT_EQ(got.size(), p0.size());
        ASSERT_EQ(ref.size(), p0.size());
        double worst = 0.0, diff2 = 0.0, step2 = 0.0;
        size_t differ = 0;
        for (size_t i = 0; i < p0.size(); ++i) {
          double mean_abs = 0.0;
          for (int r = 0; r < nranks; ++r) mean_abs += std::fabs(local[r][i]) / nranks;
          const double g1 = double{p0[i]} - ref[i], gn = double{p0[i]} - got[i];
          const double bound = 1.01 * (nranks + 2) * u * mean_abs +
                               (nranks + 2) * std::ldexp(1.0, -25) / scale +
                               std::ldexp(std::fabs(double{ref[i]}) + std::fabs(got[i]), -24);
          worst = std::max(worst, std::fabs(gn - g1) / bound);
          differ += gn != g1 ? 1 : 0;
          diff2 += (gn - g1) * (gn - g1);
          step2 += g1 * g1;
        }
        // The bound holds where the GEMMs round every row the same at any row count; OpenBLAS
        // does not promise that (single-threaded on an AMD EPYC, its Haswell kernels round
        // some 16-bit activations of the 8-row products one ulp away from the 16-row one's),
        // and a flipped activation moves the gradients below it by a few u: a few elements
        // then end up to 8.5 bounds away. The whole vector stays within (N + 2) u of the
        // one-rank step (measured 0.14-0.2 of it), a flipped activation or not.
        EXPECT_LE(worst, 16.0) << precisionName(p) << ", " << nranks << " ranks, zero " << zero;
        EXPECT_LE(std::sqrt(diff2 / step2), (nranks + 2) * u)
            << precisionName(p) << ", " << nranks << " ranks, zero " << zero;
        printf(
            "[mixed parity] %s, 1 step, %d ranks, zero %d: |g_N - g_1| / |g_1| = %.3g, "
            "%zu of %zu elements differ, worst element at %.3g of its bound\n",
            precisionName(p), nranks, zero, std::sqrt(diff2 / step2), differ, p0.size(), worst);
      }
    }
  }
}

TEST(MixedPrecision, TwentyStepsAgainstOneRank) {
  // Over many steps the rounding differences above feed back (a master weight that moves by
  // a rounding can flip its 16-bit working copy by u |w|, far more than one update), so the
  // trajectories drift apart chaotically; this reports the distance relative to the distance
  // training moved, next to the distance to fp32 training, and checks only that every rank
  // agrees and nothing overflows at the default loss scale. Under a sanitizer
  // (test_scale.h) the runs take 5 steps: every step runs the same code, and the 20 runs of
  // 20 steps were the training tests' longest case there (22 s under TSan).
  const size_t steps = test::reducedSizes() ? 5 : kSteps;
  auto start = makeMlp();
  start->initialize(kSeed);
  const std::vector<float> p0 = start->flatValues();
  auto distance = [&](const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0.0, moved = 0.0;
    for (size_t i = 0; i < p0.size(); ++i) {
      d += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
      moved += (double{b[i]} - p0[i]) * (double{b[i]} - p0[i]);
    }
    return std::sqrt(d / moved);
  };
  for (const char* optimizer : {"sgd", "adamw"}) {
    RunConfig f;
    f.optimizer = optimizer;
    f.steps = steps;
    const std::vector<float> fp32 = train(1, f);
    const std::vector<float> fp32_4 = train(4, f);
    printf("[mixed parity] fp32 %s, %zu steps, 4 ranks: %.3g of the distance moved\n", optimizer,
           steps, distance(fp32_4, fp32));
    for (Precision p : {Precision::kBf16, Precision::kFp16}) {
      RunConfig c = f;
      c.precision = p;
      long skipped = 0;
      const std::vector<float> ref = train(1, c, &skipped);
      EXPECT_EQ(skipped, 0) << "2^16 does not overflow this model's fp16 gradients";
      RunConfig w = c;
      w.fp32_wire = true;
      printf(
          "[mixed parity] %s %s, %zu steps, 1 rank, gradients sent as fp32 instead: %.3g of "
          "the distance moved\n",
          precisionName(p), optimizer, steps, distance(train(1, w), ref));
      for (int nranks : {2, 4}) {
        const std::vector<float> got = train(nranks, c);
        printf(
            "[mixed parity] %s %s, %zu steps, %d ranks: %.3g of the distance moved from the "
            "one-rank run at %s; one rank at %s is %.3g from fp32\n",
            precisionName(p), optimizer, steps, nranks, distance(got, ref), precisionName(p),
            precisionName(p), distance(ref, fp32));
      }
    }
  }
}

// y = x W^T, plus x V^T when `use` is set: V gets no gradient in a step where `use` is
// false, as with a branch that a step does not take (DDP's find_unused_parameters case).
class MaybeUnused : public Layer {
 public:
  MaybeUnused(size_t in, size_t out) : in_(in), out_(out) {
    w_ = Parameter{"w", {out, in}, out * in};
    v_ = Parameter{"v", {out, in}, out * in};
  }
  std::string name() const override { return "maybe_unused"; }
  std::vector<Parameter*> parameters() override { return {&w_, &v_}; }
  void initialize(std::mt19937_64& rng) override {
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (size_t i = 0; i < w_.numel; ++i) w_.value[i] = u(rng);
    for (size_t i = 0; i < v_.numel; ++i) v_.value[i] = u(rng);
  }
  void forward(const Tensor& x, Tensor& y) override {
    x_ = x;
    y.resize({x.rows(), out_});
    gemm(false, true, x.rows(), out_, in_, 1.0f, x.data(), w_.value, 0.0f, y.data());
    if (use) gemm(false, true, x.rows(), out_, in_, 1.0f, x.data(), v_.value, 1.0f, y.data());
  }
  void backward(const Tensor& dy, Tensor& dx) override {
    gemm(true, false, out_, in_, dy.rows(), 1.0f, dy.data(), x_.data(), 1.0f, w_.grad);
    if (use) gemm(true, false, out_, in_, dy.rows(), 1.0f, dy.data(), x_.data(), 1.0f, v_.grad);
    dx.resize({dy.rows(), in_});
    gemm(false, false, dy.rows(), in_, out_, 1.0f, dy.data(), w_.value, 0.0f, dx.data());
    if (use) gemm(false, false, dy.rows(), in_, out_, 1.0f, dy.data(), v_.value, 1.0f, dx.data());
  }
  bool use = true;

 private:
  size_t in_, out_;
  Parameter w_, v_;
  Tensor x_;
};

std::unique_ptr<Sequential> modelWithUnused(MaybeUnused** branch) {
  auto m = std::make_unique<Sequential>();
  m->add(std::make_unique<Linear>(8, 6, "fc1"));
  m->add(std::make_unique<ReLU>());
  auto b = std::make_unique<MaybeUnused>(6, 4);
  *branch = b.get();
  m->add(std::move(b));
  m->add(std::make_unique<Linear>(4, 3, "fc2"));
  return m;
}

TEST(DataParallel, UnusedParametersNeitherHangNorBreakTheBuckets) {
  // 2 ranks, SGD (lr 0.5, no momentum), 4 steps: V used by both ranks, by neither, by rank 0
  // only, by rank 1 only. The result must equal p -= lr * (g_0 + g_1) / 2 computed on one
  // model, with V's gradient 0 on a rank that did not use it. Buckets of 64 B (V in buckets
  // of its own) and of 25 MiB (V shares the one bucket), queued during backward or after it.
  constexpr int kRanks = 2, kUnusedSteps = 4;
  constexpr size_t kRows = 5;
  auto uses = [](int step, int rank) { return step == 0 || (step >= 2 && step - 2 == rank); };
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> xs(kUnusedSteps * kRanks * kRows * 8);
  for (float& v : xs) v = u(rng);
  auto batch = [&](int step, int rank) {
    const size_t first = (static_cast<size_t>(step) * kRanks + rank) * kRows * 8;
    return Tensor({kRows, 8},
                  std::vector<float>(xs.begin() + first, xs.begin() + first + kRows * 8));
  };
  auto labels = [&](int step, int rank) {
    std::vector<int32_t> y(kRows);
    for (size_t i = 0; i < kRows; ++i) y[i] = static_cast<int32_t>((step + rank + i) % 3);
    return y;
  };
  // The reference on one model.
  MaybeUnused* ref_branch = nullptr;
  auto ref = modelWithUnused(&ref_branch);
  ref->initialize(kSeed);
  for (int s = 0; s < kUnusedSteps; ++s) {
    ref->zeroGrad();
    for (int r = 0; r < kRanks; ++r) {
      ref_branch->use = uses(s, r);
      SoftmaxCrossEntropy loss;
      loss.forward(ref->forward(batch(s, r)), labels(s, r));
      Tensor d;
      loss.backward(d);
      ref->backward(d);
    }
    for (Parameter* p : ref->parameters()) {
      for (size_t i = 0; i < p->numel; ++i) p->value[i] -= 0.5f * (p->grad[i] / kRanks);
    }
  }
  const std::vector<float> want = ref->flatValues();
  for (int zero : {0, 1, 2, 3}) {
    for (size_t cap : {size_t{64}, size_t{25} << 20}) {
      for (bool overlap : {true, false}) {
        std::vector<float> got;
        auto errors = test::runThreads(kRanks, [&](braidComm_t comm, int rank) -> std::string {
          MaybeUnused* branch = nullptr;
          auto model = modelWithUnused(&branch);
          model->initialize(kSeed);
          Sgd sgd(0.5f, 0.0f);
          DataParallelOptions o;
          o.zero_stage = zero;
          o.first_bucket_bytes = o.bucket_cap_bytes = cap;
          o.overlap = overlap;
          DataParallel engine(*model, sgd, comm, o);
          SoftmaxCrossEntropy loss;
          for (int s = 0; s < kUnusedSteps; ++s) {
            branch->use = uses(s, rank);
            engine.step(batch(s, rank), labels(s, rank), loss);
          }
          std::vector<float> p = engine.fullParameters();
          if (rank == 0) got = std::move(p);
          return "";
        });
        expectNoErrors(errors);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_LE(relativeDifference(got, want), 1e-6)
            << "zero " << zero << ", bucket cap " << cap << ", overlap " << overlap;
      }
    }
  }
}

}  // namespace
}  // namespace braid::training
