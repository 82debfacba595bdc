// Mixture of experts against one rank: Linear(784, 16) -> MoE(E = 4 experts of width 16) ->
// Linear(16, 10), trained 10 steps with SGD on the global batch by one rank, and by 2 and 4
// expert-parallel ranks (threads) each on its share of the batch, top-1 (Switch) and top-2
// (GShard), with capacity enough that nothing drops: the parameters agree to rounding
// (|| p - p_ref || / || p_ref || <= 1e-6). Also: drops counted when capacity is short, a rank
// with no tokens still takes part in every exchange, and all-to-all bytes per step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "training/data_parallel.h"
#include "training/model.h"
#include "training/moe.h"
#include "training/optimizer.h"
#include "training_fixtures.h"

namespace braid::training {
namespace {

using namespace fixtures;

constexpr size_t kWidth = 16, kExperts = 4, kMoeSteps = 10;
constexpr float kLr = 0.05f;

struct Net {
  std::unique_ptr<Sequential> model;
  MoELayer* moe = nullptr;
};

Net makeNet(braidComm_t group, const MoEOptions& o) {
  Net n;
  n.model = std::make_unique<Sequential>();
  n.model->add(std::make_unique<Linear>(kFeatures, kWidth, "in"));
  auto moe = std::make_unique<MoELayer>(kWidth, o, group);
  n.moe = moe.get();
  n.model->add(std::move(moe));
  n.model->add(std::make_unique<Linear>(kWidth, kClasses, "out"));
  n.model->initialize(kSeed);
  return n;
}

void flatten(const std::vector<Parameter*>& ps, std::vector<float>& out) {
  for (Parameter* p : ps) out.insert(out.end(), p->value, p->value + p->numel);
}

struct Result {
  std::vector<float> params;  // in, router, experts 0..E-1, out
  size_t dropped = 0, alltoallBytes = 0;
  float aux = 0;
};

// Trains on n thread ranks; every rank's shared parameters must end equal to rank 0's.
Result train(int n, const MoEOptions& o) {
  std::vector<std::vector<float>> shared(n), experts(n);
  std::vector<size_t> dropped(n), bytes(n);
  float aux = 0;
  auto errors = test::runThreads(n, [&](braidComm_t comm, int rank) -> std::string {
    try {
      Net net = makeNet(comm, o);
      SoftmaxCrossEntropy loss;
      const size_t rows = kGlobalBatch / static_cast<size_t>(n);
      std::vector<Parameter*> replicated;
      for (Parameter* p : net.model->parameters()) replicated.push_back(p);
      auto local = net.moe->expertParameters();
      for (size_t step = 0; step < kMoeSteps; ++step) {
        Tensor x;
        std::vector<int32_t> y;
        data().batch(step * kGlobalBatch + static_cast<size_t>(rank) * rows, rows, x, y);
        net.model->zeroGrad();
        const Tensor& logits = net.model->forward(x);
        loss.forward(logits, y);
        Tensor dlogits;
        loss.backward(dlogits);
        net.model->backward(dlogits);
        dropped[rank] += net.moe->dropped();
        bytes[rank] = net.moe->alltoallBytes();
        if (rank == 0) aux = net.moe->auxLoss();
        // DDP over the replicated parameters (everything but this rank's experts).
        for (Parameter* p : replicated) {
          if (std::find(local.begin(), local.end(), p) != local.end()) continue;
          if (braidAllReduce(p->grad, p->grad, p->numel, braidFloat32, braidAvg, comm, nullptr) !=
              braidSuccess)
            return std::string("all-reduce: ") + braidGetLastError(comm);
        }
        for (Parameter* p : replicated)
          for (size_t i = 0; i < p->numel; ++i) p->value[i] -= kLr * p->grad[i];
      }
      std::vector<Parameter*> notExperts;
      for (Parameter* p : replicated)
        if (std::find(local.begin(), local.end(), p) == local.end()) notExperts.push_back(p);
      flatten(notExperts, shared[rank]);
      flatten(local, experts[rank]);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  Result r;
  for (int k = 1; k < n; ++k) EXPECT_EQ(shared[k], shared[0]) << "rank " << k << " diverged";
  // Reassemble in the one-rank order: in, router | experts by rank | out.
  const size_t head = kFeatures * kWidth + kWidth + kExperts * kWidth;
  r.params.assign(shared[0].begin(), shared[0].begin() + head);
  for (int k = 0; k < n; ++k) r.params.insert(r.params.end(), experts[k].begin(), experts[k].end());
  r.params.insert(r.params.end(), shared[0].begin() + head, shared[0].end());
  for (int k = 0; k < n; ++k) r.dropped += dropped[k];
  for (int k = 0; k < n; ++k) r.alltoallBytes += bytes[k];
  r.aux = aux;
  return r;
}

MoEOptions noDrop(int topK) {
  MoEOptions o;
  o.experts = kExperts;
  o.hidden = kWidth;
  o.top_k = topK;
  o.capacity_factor = static_cast<double>(kExperts);  // K * T slots per expert: none drop
  return o;
}

class MoEParity : public ::testing::TestWithParam<int> {};

TEST_P(MoEParity, ExpertParallelMatchesOneRank) {
  const int topK = GetParam();
  const Result ref = train(1, noDrop(topK));
  EXPECT_EQ(ref.dropped, 0u);
  EXPECT_GT(ref.aux, 0.0f);
  for (int ep : {2, 4}) {
    const Result got = train(ep, noDrop(topK));
    ASSERT_EQ(got.params.size(), ref.params.size());
    const double diff = relativeDifference(got.params, ref.params);
    EXPECT_LE(diff, 1e-6) << "ep " << ep << ", top-" << topK;
    EXPECT_EQ(got.dropped, 0u);
    std::printf(
        "top-%d ep %d: relative difference %.3g; aux loss %.6f (one rank %.6f); "
        "all-to-all-v bytes sent by all ranks in the last step %zu\n",
        topK, ep, diff, got.aux, ref.aux, got.alltoallBytes);
  }
}

INSTANTIATE_TEST_SUITE_P(TopK, MoEParity, ::testing::Values(1, 2));

// Each step every kept choice's row goes to its expert and back, in forward and again in
// backward: the ranks together send 4 * tokens * top-k rows of `features` floats (rows whose
// expert is on their own rank included).
TEST(MoE, AllToAllBytesAreTokensTimesFeaturesTimesTopK) {
  for (int ep : {2, 4})
    for (int topK : {1, 2}) {
      const Result r = train(ep, noDrop(topK));
      EXPECT_EQ(r.alltoallBytes, 4 * kGlobalBatch * topK * kWidth * sizeof(float))
          << "ep " << ep << ", top-" << topK;
    }
}

TEST(MoE, ShortCapacityDropsChoices) {
  MoEOptions o = noDrop(2);
  o.capacity_factor = 0.5;  // ceil(0.5 * 2 * 16 / 4) = 4 slots of 32 choices per expert
  const Result r = train(2, o);
  EXPECT_GT(r.dropped, 0u);
  for (float v : r.params) ASSERT_TRUE(std::isfinite(v));
}

// A factor beyond K T / E slots is clamped to K T (1e300 would not fit a size_t).
TEST(MoE, HugeCapacityDropsNothing) {
  MoEOptions o = noDrop(2);
  o.capacity_factor = 1e300;
  EXPECT_EQ(train(2, o).dropped, 0u);
}

// The same through DataParallel (DDP, stage 0) with the experts as local parameters, the
// MoE on a communicator of its own (a braidCommSplit of the world), so that its exchanges never
// interleave with the engine's stream: ep 2 and 4 against one rank, SGD with momentum.
// A model and its MoE layers, built on the expert-parallel group.
struct Built {
  std::unique_ptr<Sequential> model;
  std::vector<MoELayer*> moes;
};
using Builder = std::function<Built(braidComm_t group)>;

Built netBuilder(braidComm_t group, const MoEOptions& o) {
  Net net = makeNet(group, o);
  return {std::move(net.model), {net.moe}};
}

// n data-parallel ranks in groups of ep (default n) expert-parallel ranks: the MoE on the
// group's braidCommSplit, the experts' gradients averaged over the n / ep ranks that hold them
// (DataParallelOptions::local_comm). Returns the shared parameters, then the experts of group 0.
std::vector<float> trainWithEngine(int n, const Builder& build, int ep = 0) {
  if (ep == 0) ep = n;
  std::vector<std::vector<float>> shared(n), experts(n);
  auto errors = test::runThreads(n, [&](braidComm_t comm, int rank) -> std::string {
    braidComm_t group = nullptr, replicas = nullptr;
    if (braidCommSplit(comm, rank / ep, rank, &group, nullptr) != braidSuccess ||
        braidCommSplit(comm, rank % ep, rank, &replicas, nullptr) != braidSuccess)
      return std::string("split: ") + braidGetLastError(comm);
    std::string error;
    try {
      Built net = build(group);
      auto opt = makeOptimizer("sgd", kLr);
      DataParallelOptions dpo;
      for (MoELayer* m : net.moes)
        for (Parameter* p : m->expertParameters()) dpo.local_parameters.push_back(p);
      dpo.local_comm = replicas;
      DataParallel engine(*net.model, *opt, comm, dpo);
      SoftmaxCrossEntropy loss;
      const size_t rows = kGlobalBatch / static_cast<size_t>(n);
      for (size_t step = 0; step < kMoeSteps; ++step) {
        Tensor x;
        std::vector<int32_t> y;
        data().batch(step * kGlobalBatch + static_cast<size_t>(rank) * rows, rows, x, y);
        engine.step(x, y, loss);
      }
      shared[rank] = engine.fullParameters();
      for (MoELayer* m : net.moes) flatten(m->expertParameters(), experts[rank]);
    } catch (const std::exception& e) {
      error = e.what();
    }
    braidCommDestroy(group);
    braidCommDestroy(replicas);
    return error;
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int k = 1; k < n; ++k) EXPECT_EQ(shared[k], shared[0]) << "rank " << k << " diverged";
  for (int k = ep; k < n; ++k)
    EXPECT_EQ(experts[k], experts[k % ep]) << "rank " << k << "'s experts diverged";
  std::vector<float> all = shared[0];
  for (int k = 0; k < ep; ++k) all.insert(all.end(), experts[k].begin(), experts[k].end());
  return all;
}

TEST(MoE, DataParallelWithLocalExpertsMatchesOneRank) {
  for (int topK : {1, 2}) {
    const Builder build = [&](braidComm_t group) { return netBuilder(group, noDrop(topK)); };
    const std::vector<float> ref = trainWithEngine(1, build);
    for (int ep : {2, 4}) {
      const std::vector<float> got = trainWithEngine(ep, build);
      ASSERT_EQ(got.size(), ref.size());
      const double diff = relativeDifference(got, ref);
      EXPECT_LE(diff, 1e-6) << "ep " << ep << ", top-" << topK;
      std::printf("DataParallel top-%d ep %d: relative difference %.3g\n", topK, ep, diff);
    }
    // Expert parallelism inside data parallelism: dp 4 in two groups of ep 2. Each group's
    // balancing loss is its own tokens' (a product of two means, not their mean), so it is
    // left out here: the experts' gradients then average exactly over the groups.
    MoEOptions noAux = noDrop(topK);
    noAux.aux_loss_weight = 0.0f;
    const Builder buildNoAux = [&](braidComm_t group) { return netBuilder(group, noAux); };
    const double diff =
        relativeDifference(trainWithEngine(4, buildNoAux, 2), trainWithEngine(1, buildNoAux));
    EXPECT_LE(diff, 1e-6) << "dp 4 x ep 2, top-" << topK;
    std::printf("DataParallel top-%d dp 4 x ep 2: relative difference %.3g\n", topK, diff);
  }
}

// The ViT with MoE blocks through DataParallel: ep 2 against one rank, 10 steps.
TEST(MoE, VitMoeMatchesOneRank) {
  const Builder build = [](braidComm_t group) {
    Built b;
    b.model = makeVitMoe(28, 28, 7, 16, 2, 1, kClasses, noDrop(2), group, &b.moes);
    b.model->initialize(kSeed);
    return b;
  };
  auto run = [&](int n) { return trainWithEngine(n, build); };
  const std::vector<float> ref = run(1), got = run(2);
  ASSERT_EQ(got.size(), ref.size());
  EXPECT_LE(relativeDifference(got, ref), 1e-6);
  std::printf("ViT-MoE ep 2 (SGD): relative difference %.3g\n", relativeDifference(got, ref));
}

TEST(MoE, DataParallelRefusesLocalParametersWithZero) {
  auto errors = test::runThreads(1, [&](braidComm_t comm, int) -> std::string {
    Net net = makeNet(nullptr, noDrop(1));
    auto opt = makeOptimizer("sgd", kLr);
    DataParallelOptions dpo;
    dpo.local_parameters = net.moe->expertParameters();
    dpo.zero_stage = 1;
    try {
      DataParallel engine(*net.model, *opt, comm, dpo);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).find("stage 0") == std::string::npos ? e.what() : "";
    }
    return "ZeRO-1 with local parameters was accepted";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

// A rank with no tokens still joins every exchange; the others' outputs are unchanged.
TEST(MoE, RankWithoutTokensTakesPart) {
  const MoEOptions o = noDrop(1);
  Tensor x;
  std::vector<int32_t> y;
  data().batch(0, 8, x, y);
  Tensor want;
  {
    auto errors = test::runThreads(1, [&](braidComm_t comm, int) -> std::string {
      Net net = makeNet(comm, o);
      want = net.model->forward(x);
      return "";
    });
    ASSERT_TRUE(errors.empty());
  }
  std::vector<Tensor> got(2);
  auto errors = test::runThreads(2, [&](braidComm_t comm, int rank) -> std::string {
    try {
      Net net = makeNet(comm, o);
      Tensor mine = rank == 0 ? x : Tensor({0, kFeatures});
      got[rank] = net.model->forward(mine);
      Tensor d(got[rank].shape());
      d.fill(1.0f);
      net.model->backward(d);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  ASSERT_EQ(got[0].numel(), want.numel());
  EXPECT_EQ(got[1].numel(), 0u);
  std::vector<float> a(got[0].data(), got[0].data() + got[0].numel()),
      b(want.data(), want.data() + want.numel());
  EXPECT_LE(relativeDifference(a, b), 1e-6);
}

// Gradients against central differences of L = sum(y * r) + auxLoss, on one rank without a
// communicator: the gates (top-1, and top-2's renormalisation), the experts, the router's
// softmax and the auxiliary loss's gradient through P_e.
TEST(MoE, GradientsMatchFiniteDifferences) {
  for (int topK : {1, 2}) {
    MoEOptions o;
    o.experts = 4;
    o.hidden = 3;
    o.top_k = topK;
    o.capacity_factor = 4.0;
    o.aux_loss_weight = 0.5f;  // large enough to matter
    MoELayer moe(4, o, nullptr);
    std::mt19937_64 rng(5);
    moe.initialize(rng);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    Tensor x({5, 4}), r({5, 4}), y, dx;
    for (size_t i = 0; i < x.numel(); ++i) x[i] = u(rng);
    for (size_t i = 0; i < r.numel(); ++i) r[i] = u(rng);
    auto loss = [&](const Tensor& in) {
      moe.forward(in, y);
      double l = moe.auxLoss();
      for (size_t i = 0; i < y.numel(); ++i) l += static_cast<double>(y[i]) * r[i];
      return l;
    };
    for (Parameter* p : moe.parameters()) std::fill(p->grad, p->grad + p->numel, 0.0f);
    loss(x);
    moe.backward(r, dx);
    const float h = 1e-3f;
    auto close = [](double numeric, double analytic, const std::string& what) {
      EXPECT_NEAR(numeric, analytic, 2e-3 * std::max(1.0, std::fabs(analytic))) << what;
    };
    for (size_t i = 0; i < x.numel(); ++i) {
      Tensor xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      close((loss(xp) - loss(xm)) / (2 * h), dx[i], "top-" + std::to_string(topK) + " dx");
    }
    for (Parameter* p : moe.parameters()) {
      std::vector<float> analytic(p->grad, p->grad + p->numel);
      for (size_t i = 0; i < p->numel; ++i) {
        const float keep = p->value[i];
        p->value[i] = keep + h;
        const double lp = loss(x);
        p->value[i] = keep - h;
        const double lm = loss(x);
        p->value[i] = keep;
        close((lp - lm) / (2 * h), analytic[i],
              "top-" + std::to_string(topK) + " " + p->name + "[" + std::to_string(i) + "]");
      }
    }
  }
}

TEST(MoE, BadOptionsAreRefused) {
  auto errors = test::runThreads(2, [&](braidComm_t comm, int) -> std::string {
    MoEOptions o = noDrop(1);
    o.experts = 3;  // not a multiple of 2 ranks
    try {
      MoELayer bad(kWidth, o, comm);
      return "3 experts over 2 ranks was accepted";
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("3 experts") == std::string::npos) return e.what();
    }
    o = noDrop(3);
    try {
      MoELayer bad(kWidth, o, comm);
      return "top_k 3 was accepted";
    } catch (const std::invalid_argument&) {
    }
    return "";
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::training
