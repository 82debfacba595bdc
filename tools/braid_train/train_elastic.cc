// braid-train --elastic: data parallelism (DDP, --zero 0) that survives a lost rank. Each
// global step s of epoch e takes the images at positions [s B, (s + 1) B) of the epoch's order
// (B the global batch), and rank r of n takes those whose position is r mod n: when the world
// shrinks, the same images are split over fewer ranks, so none is trained twice or skipped.
// When a call fails (a rank died: its peers see it within BRAID_TIMEOUT, or sooner on this
// host), every survivor shrinks the communicator with BRAID_SHRINK_ABORT (which revokes it,
// ending the calls of ranks still waiting) and no list (the agreement finds the dead), then
// the survivors take the parameters and optimizer state of the lowest-ranked survivor that
// finished the most steps (a survivor may have finished the step in flight, another not), and
// go on from there. Every survivor keeps the whole optimizer state (ZeRO stage 0), so nothing
// is lost with a rank: ZeRO-1/2 would need each shard kept on a buddy rank as well (not yet).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "braid/braid.h"
#include "train_loops.h"
#include "training/attention.h"
#include "training/data_parallel.h"
#include "training/model.h"
#include "training/optimizer.h"

namespace braid::training::cli {
namespace {

using Clock = std::chrono::steady_clock;

void ok(braidResult_t r, const char* what) {
  if (r != braidSuccess)
    throw std::runtime_error(std::string(what) + ": " + braidGetErrorString(r) + ": " +
                             braidGetLastError(nullptr));
}

// Epoch e's order of the training images, the same on every rank.
std::vector<size_t> epochOrder(size_t count, uint64_t seed, int epoch) {
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// The job as this rank sees it: communicator, rank, size, and each rank's original rank.
struct World {
  braidComm_t comm = nullptr;
  int rank = 0, n = 1;
  std::vector<int> original;
};

// Every rank takes the parameters and optimizer state of the lowest rank that finished the
// most steps (a survivor may have finished the step in flight, another not; a process that
// joined has none, *steps -1); *steps becomes that count. params has the model's size.
void resync(World& w, std::vector<float>& params, Optimizer::State& state, long* steps) {
  int64_t furthest = *steps;
  ok(braidAllReduce(&furthest, &furthest, 1, braidInt64, braidMax, w.comm, nullptr), "step max");
  int32_t root = *steps == furthest ? w.rank : INT_MAX;
  ok(braidAllReduce(&root, &root, 1, braidInt32, braidMin, w.comm, nullptr), "root min");
  int64_t head[2] = {state.step, static_cast<int64_t>(state.values.size())};
  ok(braidBroadcast(head, head, 2, braidInt64, root, w.comm, nullptr), "optimizer step");
  state.step = head[0];
  state.values.resize(static_cast<size_t>(head[1]));
  ok(braidBroadcast(params.data(), params.data(), params.size(), braidFloat32, root, w.comm,
                    nullptr),
     "parameters");
  ok(braidBroadcast(state.values.data(), state.values.data(), state.values.size(), braidFloat32,
                    root, w.comm, nullptr),
     "optimizer state");
  *steps = furthest;
}

// The model's parameters from params, and a new engine on w.comm with that optimizer state.
void rebuild(World& w, Sequential& model, Optimizer& optimizer, const DataParallelOptions& dpo,
             std::unique_ptr<DataParallel>& engine, const std::vector<float>& params,
             const Optimizer::State& state, uint64_t seed) {
  model.initialize(seed);  // fresh storage, then the values
  size_t at = 0;
  for (Parameter* p : model.parameters()) {
    std::copy(params.begin() + static_cast<std::ptrdiff_t>(at),
              params.begin() + static_cast<std::ptrdiff_t>(at + p->numel), p->value);
    at += p->numel;
  }
  engine = std::make_unique<DataParallel>(model, optimizer, w.comm, dpo);
  engine->setOptimizerState(state);  // into the layout for this rank count
}

// One shrink: the survivors' communicator (w renumbered), then resync. Throws where a call
// fails (another rank died meanwhile). False: the survivors left this rank out.
bool shrinkAndResync(World& w, std::vector<float>& params, Optimizer::State& state, long* steps) {
  braidComm_t next = nullptr;
  ok(braidCommShrink(w.comm, nullptr, 0, &next, nullptr, BRAID_SHRINK_ABORT), "braidCommShrink");
  const std::vector<int> was = w.original;
  braidCommDestroy(w.comm);
  w.comm = next;
  if (!next) return false;
  ok(braidCommUserRank(next, &w.rank), "braidCommUserRank");
  ok(braidCommCount(next, &w.n), "braidCommCount");
  std::vector<int> parents(static_cast<size_t>(w.n));
  ok(braidCommParentRanks(next, parents.data()), "braidCommParentRanks");
  w.original.clear();
  for (int p : parents) w.original.push_back(was[static_cast<size_t>(p)]);
  resync(w, params, state, steps);
  return true;
}

// --respawn's rendezvous (braidrun --respawn sets BRAID_ELASTIC_DIR): a replacement process
// (BRAID_ELASTIC_JOIN=1) creates DIR/join-PID and waits for DIR/grow-PID, which rank 0 writes
// at a step boundary: "UNIQUE_ID NRANKS RANK" for braidCommGrow. DIR/done: training is over.
std::string elasticDir() {
  const char* d = std::getenv("BRAID_ELASTIC_DIR");
  return d ? d : "";
}

// Rank 0: the pids of the processes waiting to join, in order.
std::vector<long> waitingJoiners(const std::string& dir) {
  std::vector<long> pids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("join-", 0) == 0) pids.push_back(std::atol(name.c_str() + 5));
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

// At a step boundary: admits the processes waiting to join, if any (rank 0 counts them and the
// engine's all-reduce tells the others), through braidCommGrow, then resync. True if it did.
bool admitJoiners(World& w, const std::string& dir, Sequential& model, Optimizer& optimizer,
                  const DataParallelOptions& dpo, std::unique_ptr<DataParallel>& engine,
                  long* steps, uint64_t seed) {
  const std::vector<long> pids = w.rank == 0 ? waitingJoiners(dir) : std::vector<long>{};
  std::vector<double> count = {static_cast<double>(pids.size())};
  engine->allReduceSum(count);
  const int joining = static_cast<int>(count[0]);
  if (joining == 0) return false;
  const auto t0 = Clock::now();
  const int before = w.n;
  braidUniqueId id{};
  if (w.rank == 0) {
    ok(braidCommGetUniqueId(w.comm, &id), "braidCommGetUniqueId");
    char text[2 * BRAID_UNIQUE_ID_BYTES + 1];
    ok(braidUniqueIdToString(&id, text), "braidUniqueIdToString");
    for (int i = 0; i < joining; ++i) {
      const std::string grow = dir + "/grow-" + std::to_string(pids[static_cast<size_t>(i)]);
      if (FILE* f = std::fopen((grow + ".tmp").c_str(), "w")) {
        std::fprintf(f, "%s %d %d\n", text, w.n + joining, w.n + i);
        std::fclose(f);
        std::rename((grow + ".tmp").c_str(), grow.c_str());
      }
      std::remove((dir + "/join-" + std::to_string(pids[static_cast<size_t>(i)])).c_str());
    }
  }
  std::vector<float> params = engine->fullParameters();
  Optimizer::State state = engine->optimizerState();
  engine.reset();
  braidComm_t grown = nullptr;
  ok(braidCommGrow(w.comm, w.n + joining, w.rank == 0 ? &id : nullptr, -1, &grown, nullptr),
     "braidCommGrow");
  braidCommDestroy(w.comm);
  w.comm = grown;
  w.n += joining;
  w.original.resize(static_cast<size_t>(w.n), -1);
  resync(w, params, state, steps);
  rebuild(w, model, optimizer, dpo, engine, params, state, seed);
  if (w.rank == 0) {
    std::printf("# elastic: %d process(es) joined at step %ld; world %d -> %d; in %.3f s\n",
                joining, *steps, before, w.n,
                std::chrono::duration<double>(Clock::now() - t0).count());
    std::fflush(stdout);
  }
  return true;
}

// A replacement process (BRAID_ELASTIC_JOIN=1): announces itself, waits for rank 0's grow
// file and joins; then takes the survivors' state. False if training ended first.
bool joinJob(World& w, const std::string& dir, Sequential& model, Optimizer& optimizer,
             const DataParallelOptions& dpo, std::unique_ptr<DataParallel>& engine, long* steps,
             uint64_t seed) {
  const std::string me = std::to_string(getpid());
  if (FILE* f = std::fopen((dir + "/join-" + me).c_str(), "w")) std::fclose(f);
  const std::string grow = dir + "/grow-" + me;
  std::ifstream in;
  while (!(in.open(grow), in.is_open())) {
    if (std::filesystem::exists(dir + "/done")) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string text;
  int nranks = 0, rank = -1;
  in >> text >> nranks >> rank;
  braidUniqueId id{};
  ok(braidUniqueIdFromString(text.c_str(), &id), "the grow file's unique id");
  std::remove(grow.c_str());
  ok(braidCommGrow(nullptr, nranks, &id, rank, &w.comm, nullptr), "braidCommGrow (joining)");
  w.rank = rank;
  w.n = nranks;
  w.original.assign(static_cast<size_t>(nranks), -1);
  std::vector<float> params(model.numParameters());
  Optimizer::State state;
  *steps = -1;
  resync(w, params, state, steps);
  rebuild(w, model, optimizer, dpo, engine, params, state, seed);
  return true;
}

// After a failed call: shrink, resynchronise (again if another rank dies meanwhile, up to 4
// times), rebuild the engine on the survivors' communicator. *steps is this rank's count of
// finished steps and becomes the survivors' furthest. False where this rank was left out.
bool recover(World& w, std::string why, Sequential& model, Optimizer& optimizer,
             const DataParallelOptions& dpo, std::unique_ptr<DataParallel>& engine, long* steps,
             uint64_t seed) {
  const auto t0 = Clock::now();
  // Stage 0: the master values are this rank's own, as of its last finished step (a failed
  // step has not reached the optimizer).
  std::vector<float> params = engine->fullParameters();
  Optimizer::State state = engine->optimizerState();  // in parameter order, unpadded
  engine.reset();
  const int before = w.n;
  const std::vector<int> start = w.original;
  for (int attempt = 0;; ++attempt) {
    try {
      if (!shrinkAndResync(w, params, state, steps)) return false;
      rebuild(w, model, optimizer, dpo, engine, params, state, seed);
      break;
    } catch (const std::runtime_error& e) {
      engine.reset();
      if (attempt == 3 || !w.comm) throw;
      why = e.what();
    }
  }
  if (w.rank == 0) {
    std::string lost;
    for (int r : start)
      if (std::find(w.original.begin(), w.original.end(), r) == w.original.end()) {
        if (!lost.empty()) lost += ',';
        lost += std::to_string(r);
      }
    std::printf(
        "# elastic: lost rank %s at step %ld; world %d -> %d; recovered in %.3f s (from the "
        "failed call: %s)\n",
        lost.empty() ? "(a process that had joined)" : lost.c_str(), *steps, before, w.n,
        std::chrono::duration<double>(Clock::now() - t0).count(), why.substr(0, 160).c_str());
    std::fflush(stdout);
  }
  return true;
}

}  // namespace

void trainElastic(braidComm_t* comm, int rank, int nranks, const Options& o,
                  const ImageDataset& train, const ImageDataset& test) {
  World w{*comm, rank, nranks, {}};
  w.original.resize(static_cast<size_t>(nranks));
  std::iota(w.original.begin(), w.original.end(), 0);
  auto model = o.model == "vit" ? makeVit(28, 28, 7, 64, 4, 2, 10) : makeMlp(o.widths);
  model->initialize(o.seed);
  auto optimizer = makeOptimizer(o.optimizer, static_cast<float>(o.lr));
  DataParallelOptions dpo;
  dpo.first_bucket_bytes = static_cast<size_t>(std::max(1.0, o.first_bucket_mb * (1 << 20)));
  dpo.bucket_cap_bytes = static_cast<size_t>(std::max(1.0, o.bucket_cap_mb * (1 << 20)));
  dpo.overlap = o.overlap;
  dpo.grad_dtype = o.precision == "bf16" ? braidBfloat16 : braidFloat32;
  dpo.compute = o.precision == "bf16" ? Precision::kBf16 : Precision::kFp32;
  model->setRecompute(o.recompute);
  const std::string dir = elasticDir();
  const bool joining = std::getenv("BRAID_ELASTIC_JOIN") && !dir.empty();
  std::unique_ptr<DataParallel> engine;
  long steps = 0;
  if (!joining) {
    engine = std::make_unique<DataParallel>(*model, *optimizer, w.comm, dpo);
  } else if (!joinJob(w, dir, *model, *optimizer, dpo, engine, &steps, o.seed)) {
    std::fprintf(stderr, "braid-train: training ended before this process could join\n");
    return;
  }
  const size_t count =
      o.train_limit > 0 ? std::min(train.count, static_cast<size_t>(o.train_limit)) : train.count;
  const size_t batch = static_cast<size_t>(o.batch_size);
  long per_epoch = static_cast<long>((count + batch - 1) / batch);
  if (o.max_steps > 0) per_epoch = std::min(per_epoch, o.max_steps);
  const long total = per_epoch * o.epochs;
  if (w.rank == 0 && !o.json && !joining)
    std::printf(
        "# braid-train --elastic: model %s, dp %d, global batch %zu, %ld steps\n%6s %8s "
        "%10s %10s %6s\n",
        o.model.c_str(), w.n, batch, total, "epoch", "step", "loss", "test_acc", "world");
  SoftmaxCrossEntropy loss;
  Tensor x;
  std::vector<int32_t> labels;
  std::vector<size_t> order, mine;
  int order_epoch = -1, evaluated = static_cast<int>(steps / std::max(per_epoch, 1L));
  bool just_joined = joining;
  double loss_sum = 0;
  long loss_steps = 0;
  while (evaluated < o.epochs) {
    try {
      for (; steps < static_cast<long>(evaluated + 1) * per_epoch; ++steps) {
        // A process that has just joined starts at the step its peers go on with.
        if (!dir.empty() && !just_joined)
          admitJoiners(w, dir, *model, *optimizer, dpo, engine, &steps, o.seed);
        just_joined = false;
        const int epoch = static_cast<int>(steps / per_epoch);
        if (epoch != order_epoch) order = epochOrder(count, o.seed, order_epoch = epoch);
        const size_t lo = static_cast<size_t>(steps % per_epoch) * batch;
        const size_t hi = std::min(count, lo + batch);
        mine.clear();
        for (size_t j = lo + static_cast<size_t>(w.rank); j < hi; j += static_cast<size_t>(w.n))
          mine.push_back(order[j]);
        if (o.cosine)
          optimizer->setLearningRate(cosineLearningRate(
              static_cast<float>(o.lr), static_cast<size_t>(steps), static_cast<size_t>(total)));
        gatherBatch(train, mine, 0, mine.size(), x, labels);
        loss_sum += engine->step(x, labels, loss);
        ++loss_steps;
        if (o.log_every > 0 && w.rank == 0 && (steps + 1) % o.log_every == 0) {
          std::printf("# step %ld world %d\n", steps + 1, w.n);
          std::fflush(stdout);
        }
      }
      // The epoch's test accuracy: rank r of n classifies a contiguous share of the test set.
      const size_t share = (test.count + static_cast<size_t>(w.n) - 1) / static_cast<size_t>(w.n);
      const size_t tlo = std::min(test.count, static_cast<size_t>(w.rank) * share);
      const size_t thi = std::min(test.count, tlo + share);
      std::vector<size_t> tidx(thi - tlo);
      std::iota(tidx.begin(), tidx.end(), tlo);
      size_t correct = 0;
      if (!tidx.empty()) {
        gatherBatch(test, tidx, 0, tidx.size(), x, labels);
        loss.forward(engine->forward(x), labels);
        correct = loss.correct();
      }
      std::vector<double> totals = {static_cast<double>(correct),
                                    loss_steps ? loss_sum / static_cast<double>(loss_steps) : 0.0};
      engine->allReduceSum(totals);
      if (w.rank == 0) {
        const double acc = totals[0] / static_cast<double>(test.count);
        if (o.json)
          std::printf(
              "{\"epoch\":%d,\"step\":%ld,\"loss\":%.6f,\"test_accuracy\":%.4f,\"world\":%d,"
              "\"elastic\":true}\n",
              evaluated + 1, steps, totals[1] / w.n, acc, w.n);
        else
          std::printf("%6d %8ld %10.4f %10.4f %6d\n", evaluated + 1, steps, totals[1] / w.n, acc,
                      w.n);
        std::fflush(stdout);
      }
      ++evaluated;
      loss_sum = 0;
      loss_steps = 0;
    } catch (const std::exception& e) {
      if (!recover(w, e.what(), *model, *optimizer, dpo, engine, &steps, o.seed)) {
        std::fprintf(stderr, "braid-train: rank %d: the survivors left this rank out\n", rank);
        break;
      }
    }
  }
  engine.reset();
  if (!dir.empty() && w.rank == 0)  // a process still waiting to join gives up
    if (FILE* f = std::fopen((dir + "/done").c_str(), "w")) std::fclose(f);
  *comm = w.comm;
}

}  // namespace braid::training::cli
