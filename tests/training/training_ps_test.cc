// The parameter server against one rank: the MLP trained 10 steps (SGD with momentum) by S
// servers and W workers under BSP ends with the parameters one rank reaches on the workers'
// batches together (|| p - p_ref || / || p_ref || <= 1e-6); SSP (staleness 2) pulls every third
// clock, so its workers train on stale values and end elsewhere; bad layouts are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"
#include "training/model.h"
#include "training/optimizer.h"
#include "training/parameter_server.h"
#include "training_fixtures.h"

namespace braid::training {
namespace {

using namespace fixtures;

constexpr size_t kPsSteps = 10;
constexpr float kLr = 0.05f;

std::vector<float> oneRank() {
  auto model = makeMlp();
  model->initialize(kSeed);
  auto opt = makeOptimizer("sgd", kLr);
  opt->resize(model->numParameters());
  SoftmaxCrossEntropy loss;
  float* values = model->parameters().front()->value;
  float* grads = model->parameters().front()->grad;
  for (size_t step = 0; step < kPsSteps; ++step) {
    Tensor x;
    std::vector<int32_t> y;
    data().batch(step * kGlobalBatch, kGlobalBatch, x, y);
    model->zeroGrad();
    loss.forward(model->forward(x), y);
    Tensor d;
    loss.backward(d);
    model->backward(d);
    opt->beginStep();
    opt->update(values, grads, model->numParameters(), 0);
  }
  return model->flatValues();
}

struct PsRun {
  std::vector<std::vector<float>> workerValues;
  size_t pulls = 0, pushedBytes = 0;
};

PsRun train(int servers, int workers, int staleness) {
  PsRun run;
  run.workerValues.resize(static_cast<size_t>(workers));
  std::vector<size_t> pulls(static_cast<size_t>(workers)), bytes(static_cast<size_t>(workers));
  auto errors = test::runThreads(servers + workers, [&](braidComm_t comm, int rank) {
    try {
      auto model = makeMlp();
      model->initialize(kSeed);
      auto opt = makeOptimizer("sgd", kLr);
      ParameterServer ps(*model, *opt, comm, {servers, staleness});
      SoftmaxCrossEntropy loss;
      const size_t rows = kGlobalBatch / static_cast<size_t>(workers);
      for (size_t step = 0; step < kPsSteps; ++step) {
        if (ps.isServer()) {
          ps.serve();
          continue;
        }
        const size_t w = static_cast<size_t>(rank - servers);
        Tensor x;
        std::vector<int32_t> y;
        data().batch(step * kGlobalBatch + w * rows, rows, x, y);
        if (!std::isfinite(ps.step(x, y, loss))) return std::string("loss is not finite");
      }
      ps.synchronize();
      if (!ps.isServer()) {
        const size_t w = static_cast<size_t>(rank - servers);
        run.workerValues[w] = model->flatValues();
        pulls[w] = ps.pulls();
        bytes[w] = ps.bytesSent();
      }
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
  for (int w = 1; w < workers; ++w)
    EXPECT_EQ(run.workerValues[w], run.workerValues[0]) << "worker " << w << " differs";
  run.pulls = pulls[0];
  run.pushedBytes = bytes[0];
  return run;
}

TEST(ParameterServer, BspMatchesOneRank) {
  const std::vector<float> ref = oneRank();
  const size_t psiBytes = ref.size() * sizeof(float);
  for (auto [servers, workers] : {std::pair{1, 1}, {1, 2}, {2, 2}, {3, 4}}) {
    const PsRun r = train(servers, workers, 0);
    const double diff = relativeDifference(r.workerValues[0], ref);
    EXPECT_LE(diff, 1e-6) << servers << " servers, " << workers << " workers";
    EXPECT_EQ(r.pulls, kPsSteps + 1);  // every clock, and the final synchronize
    EXPECT_EQ(r.pushedBytes, kPsSteps * psiBytes);
    std::printf("BSP %d servers x %d workers: relative difference %.3g\n", servers, workers, diff);
  }
}

TEST(ParameterServer, SspPullsEveryStalenessPlusOneClocks) {
  const std::vector<float> ref = oneRank();
  const PsRun r = train(1, 2, 2);
  EXPECT_EQ(r.pulls, kPsSteps / 3 + 1);  // clocks 2, 5, 8, then the final synchronize
  const double diff = relativeDifference(r.workerValues[0], ref);
  EXPECT_GT(diff, 1e-4) << "stale values should change the result";
  EXPECT_LT(diff, 0.5);
  std::printf("SSP s=2, 1 server x 2 workers: %zu pulls, relative difference to BSP %.3g\n",
              r.pulls, diff);
}

TEST(ParameterServer, BadLayoutsAreRefused) {
  auto errors = test::runThreads(2, [&](braidComm_t comm, int) {
    auto model = makeMlp();
    model->initialize(kSeed);
    auto opt = makeOptimizer("sgd", kLr);
    for (ParameterServerOptions o : {ParameterServerOptions{0, 0}, ParameterServerOptions{2, 0},
                                     ParameterServerOptions{1, -1}}) {
      try {
        ParameterServer ps(*model, *opt, comm, o);
        return "servers " + std::to_string(o.servers) + ", staleness " +
               std::to_string(o.staleness) + " was accepted";
      } catch (const std::invalid_argument&) {
      }
    }
    return std::string();
  });
  for (const auto& e : errors) ADD_FAILURE() << e;
}

}  // namespace
}  // namespace braid::training
