// Data parallelism against one rank: the MLP trained 20 steps by DDP on 1, 2 and 4 ranks
// (threads), and by ZeRO stages 1-3, ends with the parameters that one rank reaches on the
// whole global batch. Gradients are averaged with braidAvg; only the order of floating-point
// sums differs, so the results agree to rounding: || p - p_ref || / || p_ref || <= 1e-6 (1e-5 with
// AdamW, fixtures::parityBound says why).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "training/attention.h"
#include "training/data_parallel.h"
#include "training/model.h"
#include "training/optimizer.h"
#include "training_fixtures.h"

namespace braid::training {
namespace {

using namespace fixtures;

struct Config {
  std::string optimizer = "sgd";
  int zero = 0;
  size_t first_bucket_bytes = 1 << 20, bucket_cap_bytes = 25u << 20;
  bool overlap = true;
  size_t micro_batches = 1;  // > 1: no_sync accumulation over that many micro-batches
  bool vit = false;          // a small ViT instead of the MLP
};

std::unique_ptr<Sequential> modelFor(const Config& c) {
  return c.vit ? makeVit(28, 28, 7, 16, 2, 1, kClasses) : makeMlp();
}

std::unique_ptr<Optimizer> optimizerFor(const Config& c) {
  return makeOptimizer(c.optimizer, c.optimizer == "sgd"         ? 0.05f
                                    : c.optimizer == "adafactor" ? 1e-2f
                                                                 : 1e-3f);
}

// Trains on `nranks` thread ranks; returns rank 0's final parameters (and checks that every
// rank ends with the same ones).
std::vector<float> train(int nranks, const Config& c) {
  std::vector<std::vector<float>> result(nranks);
  auto errors = test::runThreads(nranks, [&](braidComm_t comm, int rank) -> std::string {
    try {
      auto model = modelFor(c);
      model->initialize(kSeed);
      auto opt = optimizerFor(c);
      DataParallelOptions o;
      o.zero_stage = c.zero;
      o.first_bucket_bytes = c.first_bucket_bytes;
      o.bucket_cap_bytes = c.bucket_cap_bytes;
      o.overlap = c.overlap;
      DataParallel engine(*model, *opt, comm, o);
      SoftmaxCrossEntropy loss;
      Tensor x;
      std::vector<int32_t> y;
      const size_t micro = kGlobalBatch / c.micro_batches;  // rows of a global micro-batch
      const size_t local = micro / static_cast<size_t>(nranks);
      for (size_t s = 0; s < kSteps; ++s) {
        for (size_t k = 0; k < c.micro_batches; ++k) {
          data().batch(s * kGlobalBatch + k * micro + static_cast<size_t>(rank) * local, local, x,
                       y);
          engine.forwardBackward(x, y, loss, k + 1 == c.micro_batches);
        }
        engine.optimizerStep();
      }
      result[rank] = engine.fullParameters();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int r = 1; r < nranks; ++r) EXPECT_EQ(result[r], result[0]) << "rank " << r << " differs";
  return result[0];
}

const std::vector<float>& reference(const Config& c) {
  static std::map<std::string, std::vector<float>> cache;
  const std::string key =
      c.optimizer + "/" + std::to_string(c.micro_batches) + (c.vit ? "/vit" : "/mlp");
  auto it = cache.find(key);
  if (it == cache.end()) {
    Config one;
    one.optimizer = c.optimizer;
    one.micro_batches = c.micro_batches;
    one.vit = c.vit;
    it = cache.emplace(key, train(1, one)).first;
  }
  return it->second;
}

void expectParity(int nranks, const Config& c) {
  const std::vector<float>& ref = reference(c);
  const std::vector<float> got = train(nranks, c);
  ASSERT_EQ(got.size(), ref.size());
  const double rel = relativeDifference(got, ref);
  EXPECT_LE(rel, parityBound(c.optimizer))
      << nranks << " ranks, zero " << c.zero << ", " << c.optimizer;
  // The trained model moved away from its start: parity is not trivially met.
  auto start = modelFor(c);
  start->initialize(kSeed);
  EXPECT_GT(relativeDifference(start->flatValues(), ref), 1e-3);
  printf(
      "[parity] %s, %d ranks, zero %d, %s, buckets %zu/%zu B, overlap %d, micro-batches %zu: "
      "relative difference %.3g\n",
      c.vit ? "vit" : "mlp", nranks, c.zero, c.optimizer.c_str(), c.first_bucket_bytes,
      c.bucket_cap_bytes, c.overlap ? 1 : 0, c.micro_batches, rel);
}

class Parity : public ::testing::TestWithParam<std::tuple<int, int, std::string>> {};

TEST_P(Parity, MatchesOneRankOnTheGlobalBatch) {
  Config c;
  c.zero = std::get<1>(GetParam());
  c.optimizer = std::get<2>(GetParam());
  expectParity(std::get<0>(GetParam()), c);
}

INSTANTIATE_TEST_SUITE_P(DdpAndZero, Parity,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values("sgd", "adamw")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_zero" +
                                  std::to_string(std::get<1>(info.param)) + "_" +
                                  std::get<2>(info.param);
                         });

TEST(Parity, SmallBucketsOverlappedAndNot) {
  // 4 KiB first bucket, 64 KiB others: fc1's weight (784 KiB) has a bucket of its own, the
  // others share; buckets are queued during backward, or all after it.
  for (bool overlap : {true, false}) {
    for (int zero : {0, 1, 2}) {
      Config c;
      c.zero = zero;
      c.first_bucket_bytes = 4096;
      c.bucket_cap_bytes = 65536;
      c.overlap = overlap;
      expectParity(4, c);
    }
  }
}

TEST(Parity, SmallVit) {
  // Patch embedding, attention, residual blocks: one bucket per few layers at stages 0-2, one
  // unit per top-level layer (embedding, residual blocks, norm, head) at stage 3; DDP on 1, 2
  // and 4 ranks, ZeRO 1-3 on 2 and 4.
  for (int nranks : {1, 2, 4})
    for (int zero : {0, 1, 2, 3}) {
      if (nranks == 1 && zero > 0) continue;
      Config c;
      c.vit = true;
      c.zero = zero;
      c.first_bucket_bytes = 4096;
      c.bucket_cap_bytes = 16384;
      expectParity(nranks, c);
    }
}

TEST(Parity, AdafactorDdp) {
  // AdaFactor steps whole matrices, so only DDP (stage 0) runs it.
  for (int nranks : {2, 4}) {
    Config c;
    c.optimizer = "adafactor";
    expectParity(nranks, c);
  }
}

TEST(Parity, NoSyncAccumulation) {
  // Two micro-batches per step, the first under no_sync: the accumulated gradient is the sum
  // of the two micro-batches' means, on 1 rank and on 2 or 4.
  for (int nranks : {2, 4}) {
    for (int zero : {0, 1}) {
      Config c;
      c.zero = zero;
      c.micro_batches = 2;
      expectParity(nranks, c);
    }
  }
}

TEST(DataParallel, MemoryFollowsTheZeroFormulas) {
  // psi = 235,146 parameters; 4 ranks; AdamW (8 bytes of state per parameter). Each unit is
  // padded to a multiple of 4, so the shards' sizes round up by at most 3 elements per unit.
  const size_t psi = 235146;
  for (int zero : {0, 1, 2, 3}) {
    auto errors = test::runThreads(4, [&](braidComm_t comm, int) -> std::string {
      auto model = makeMlp();
      model->initialize(kSeed);
      auto opt = makeOptimizer("adamw", 1e-3f);
      DataParallelOptions o;
      o.zero_stage = zero;
      DataParallel engine(*model, *opt, comm, o);
      const MemoryAccount m = engine.memory();
      const size_t units = engine.numUnits();
      auto within = [&](size_t got, size_t want) {
        return got >= want && got <= want + 8 * 3 * units;
      };
      const size_t p = zero >= 3 ? psi : 4 * psi, g = zero >= 2 ? psi : 4 * psi,
                   s = zero >= 1 ? 2 * psi : 8 * psi;
      if (!within(m.param_bytes, p) || !within(m.grad_bytes, g) || !within(m.optim_bytes, s)) {
        return "zero " + std::to_string(zero) + ": params " + std::to_string(m.param_bytes) +
               " grads " + std::to_string(m.grad_bytes) + " optimizer " +
               std::to_string(m.optim_bytes) + ", formulas " + std::to_string(p) + " " +
               std::to_string(g) + " " + std::to_string(s);
      }
      return "";
    });
    for (const auto& e : errors) ADD_FAILURE() << e;
  }
}

TEST(DataParallel, CommunicationVolumePerStep) {
  // Per step and rank: 2 psi elements for DDP and ZeRO-1/2 (all-reduce = reduce-scatter +
  // all-gather), 3 psi for ZeRO-3 (gather for forward and for backward, reduce-scatter), in
  // fp32 bytes, up to the padding of each unit.
  const size_t psi = 235146;
  for (int zero : {0, 1, 2, 3}) {
    auto errors = test::runThreads(2, [&](braidComm_t comm, int rank) -> std::string {
      auto model = makeMlp();
      model->initialize(kSeed);
      auto opt = makeOptimizer("sgd", 0.05f);
      DataParallelOptions o;
      o.zero_stage = zero;
      DataParallel engine(*model, *opt, comm, o);
      SoftmaxCrossEntropy loss;
      Tensor x;
      std::vector<int32_t> y;
      data().batch(static_cast<size_t>(rank) * 16, 16, x, y);
      engine.resetCounters();
      engine.step(x, y, loss);
      const uint64_t want = (zero == 3 ? 3 : 2) * psi * 4;
      const uint64_t got = engine.commVolumeBytes();
      if (got < want || got > want + 3 * 4 * 2 * engine.numUnits()) {
        return "zero " + std::to_string(zero) + ": " + std::to_string(got) + " bytes, formula " +
               std::to_string(want);
      }
      return "";
    });
    for (const auto& e : errors) ADD_FAILURE() << e;
  }
}

TEST(DataParallel, Bf16GradientsWithinTheirRoundingBound) {
  // One SGD step (lr 1, no momentum) from p0 gives p0 - p1 = the averaged gradient as it came
  // through bf16. Each rank's gradient is rounded to bf16 (unit roundoff u = 2^-8), the sum
  // is rounded after each of the N - 1 additions and the average once more, so per element
  // |avg_bf16 - avg| <= (N + 1) u mean_r |g_r| to first order (1% margin for the rest), plus
  // the fp32 rounding of p0 - g (2^-24 |p1|).
  constexpr int kRanks = 4;
  constexpr size_t kLocal = 8;
  for (int zero : {0, 1, 2, 3}) {
    std::vector<std::vector<float>> local_grads(kRanks);
    std::vector<float> p0, p1;
    uint64_t volume = 0;
    auto errors = test::runThreads(kRanks, [&](braidComm_t comm, int rank) -> std::string {
      Tensor x;
      std::vector<int32_t> y;
      data().batch(static_cast<size_t>(rank) * kLocal, kLocal, x, y);
      SoftmaxCrossEntropy loss;
      {
        auto plain = makeMlp();
        plain->initialize(kSeed);
        plain->zeroGrad();
        loss.forward(plain->forward(x), y);
        Tensor d;
        loss.backward(d);
        plain->backward(d);
        for (Parameter* p : plain->parameters()) {
          local_grads[rank].insert(local_grads[rank].end(), p->grad, p->grad + p->numel);
        }
      }
      auto model = makeMlp();
      model->initialize(kSeed);
      if (rank == 0) p0 = model->flatValues();
      Sgd sgd(1.0f, 0.0f);
      DataParallelOptions o;
      o.zero_stage = zero;
      o.grad_dtype = braidBfloat16;
      DataParallel engine(*model, sgd, comm, o);
      engine.step(x, y, loss);
      const uint64_t step_volume = engine.commVolumeBytes();
      std::vector<float> p = engine.fullParameters();
      if (rank == 0) {
        p1 = std::move(p);
        volume = step_volume;
      }
      return "";
    });
    for (const auto& e : errors) ADD_FAILURE() << e;
    ASSERT_EQ(p1.size(), p0.size());
    const size_t psi = p0.size();
    size_t inexact = 0;
    for (size_t i = 0; i < psi; ++i) {
      double mean = 0.0, mean_abs = 0.0;
      for (int r = 0; r < kRanks; ++r) {
        mean += local_grads[r][i] / double{kRanks};
        mean_abs += std::fabs(local_grads[r][i]) / double{kRanks};
      }
      const double got = double{p0[i]} - p1[i];
      const double bound = 1.01 * (kRanks + 1) * std::ldexp(1.0, -8) * mean_abs +
                           std::ldexp(std::fabs(double{p1[i]}), -24);
      ASSERT_LE(std::fabs(got - mean), bound) << "zero " << zero << ", parameter " << i;
      inexact += std::fabs(got - mean) > std::ldexp(mean_abs, -20) ? 1 : 0;
    }
    EXPECT_GT(inexact, psi / 10) << "zero " << zero << ": the gradients did not go through bf16";
    // Gradient bytes in bf16: 2 psi x 2 B for the all-reduce; stages 1-3 reduce-scatter psi x
    // 2 B and gather fp32 parameters (psi x 4 B, twice at stage 3), up to padding.
    const uint64_t want = zero == 0 ? 4 * psi : zero == 3 ? 10 * psi : 6 * psi;
    EXPECT_GE(volume, want) << "zero " << zero;
    EXPECT_LE(volume, want + 64) << "zero " << zero;
  }
}

TEST(DataParallel, RefusesBadOptions) {
  auto errors = test::runThreads(1, [&](braidComm_t comm, int) -> std::string {
    auto model = makeMlp({4, 3, 2});
    model->initialize(1);
    auto opt = makeOptimizer("sgd", 0.1f);
    DataParallelOptions o;
    o.zero_stage = 4;
    try {
      DataParallel engine(*model, *opt, comm, o);
      return "zero stage 4 accepted";
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("stage 4") == std::string::npos) return e.what();
    }
    auto adafactor = makeOptimizer("adafactor", 0.01f);
    o.zero_stage = 1;
    try {
      DataParallel engine(*model, *adafactor, comm, o);
      return "adafactor accepted at stage 1";
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("adafactor") == std::string::npos) return e.what();
    }
    // Refused before it touched the model.
    auto fresh = makeMlp({4, 3, 2});
    fresh->initialize(1);
    if (model->flatValues() != fresh->flatValues()) return "a refused engine changed the model";
    o.zero_stage = 2;
    DataParallel engine(*model, *opt, comm, o);
    SoftmaxCrossEntropy loss;
    try {
      engine.forwardBackward(Tensor({1, 4}), {0}, loss, false);
      return "no_sync accepted at stage 2";
    } catch (const std::invalid_argument&) {
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::training
