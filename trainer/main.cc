// chorus-train: data-parallel training of Fashion-MNIST with LibTorch, gradients averaged by
// chorus::dp through TorchReplica. Run under chorus-run; see docs/dp.md.
#include <dlfcn.h>
#include <malloc.h>
#include <torch/torch.h>
#include <unistd.h>
#include <chorus/chorus.hpp>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "data.h"
#include "options.h"
#include "torch_replica.h"

namespace {

using chorus::train::Dataset;
using chorus::train::TrainOptions;
using Clock = std::chrono::steady_clock;

constexpr float kMean = 0.2860f;  // Fashion-MNIST pixel mean and standard deviation
constexpr float kStd = 0.3530f;

torch::nn::Sequential makeModel(const std::string& name) {
  namespace nn = torch::nn;
  if (name == "cnn") {
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 5).padding(2)), nn::ReLU(),
                          nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 5).padding(2)),
                          nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(32 * 7 * 7, 128),
                          nn::ReLU(), nn::Linear(128, 10));
  }
  return nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 256),
                        nn::ReLU(), nn::Linear(256, 10));
}

// Normalised images [B, 1, 28, 28] and labels [B] for the given sample indices.
std::pair<torch::Tensor, torch::Tensor> makeBatch(const Dataset& d, const size_t* idx, size_t n) {
  auto x = torch::empty({static_cast<int64_t>(n), 1, 28, 28}, torch::kFloat);
  auto y = torch::empty({static_cast<int64_t>(n)}, torch::kLong);
  float* xp = x.data_ptr<float>();
  int64_t* yp = y.data_ptr<int64_t>();
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* img = d.images.data() + idx[i] * Dataset::kPixels;
    for (size_t k = 0; k < Dataset::kPixels; ++k) {
      xp[i * Dataset::kPixels + k] = (static_cast<float>(img[k]) / 255.0f - kMean) / kStd;
    }
    yp[i] = d.labels[idx[i]];
  }
  return {x, y};
}

// Test accuracy: each rank evaluates its shard (no padding), the counts are summed.
double evaluate(torch::nn::Sequential& model, const Dataset& test, chorus::Communicator& comm) {
  torch::NoGradGuard guard;
  model->eval();
  int64_t counts[2] = {0, 0};  // correct, seen
  std::vector<size_t> idx;
  for (size_t i = static_cast<size_t>(comm.rank()); i < test.count;
       i += static_cast<size_t>(comm.size())) {
    idx.push_back(i);
  }
  for (size_t b = 0; b < idx.size(); b += 500) {
    size_t n = std::min<size_t>(500, idx.size() - b);
    auto [x, y] = makeBatch(test, idx.data() + b, n);
    auto pred = model->forward(x).argmax(1);
    counts[0] += pred.eq(y).sum().item<int64_t>();
    counts[1] += static_cast<int64_t>(n);
  }
  comm.allReduce(std::span<int64_t>(counts, 2), chorus::ReduceOp::kSum).wait();
  model->train();
  return counts[1] == 0 ? 0.0 : static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
}

void setThreads(int threads) {
  torch::set_num_threads(threads);
  // Debian's LibTorch calls BLAS through libblas.so.3; with OpenBLAS behind it, its own thread
  // pool would oversubscribe the cores when several ranks share a host.
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
}

struct Row {
  int64_t step;
  int epoch;
  double loss;
  chorus::dp::StepMetrics m;
  double accuracy = -1;  // set on the last step of an epoch
};

void writeCsv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << "step,epoch,loss,compute_s,comm_s,exposed_comm_s,bytes,buckets,buckets_early,divergence,"
       "test_accuracy\n";
  for (const auto& r : rows) {
    f << r.step << ',' << r.epoch << ',' << r.loss << ',' << r.m.computeSeconds << ','
      << r.m.commSeconds << ',' << r.m.exposedCommSeconds << ',' << r.m.bytesReduced << ','
      << r.m.buckets << ',' << r.m.bucketsLaunchedEarly << ',';
    if (r.m.divergence) f << *r.m.divergence;
    f << ',';
    if (r.accuracy >= 0) f << r.accuracy;
    f << '\n';
  }
}

class Progress {
 public:
  Progress(bool enabled, int epoch, int epochs, size_t total)
      : enabled_(enabled),
        tty_(isatty(STDERR_FILENO) != 0),
        epoch_(epoch),
        epochs_(epochs),
        total_(total) {}

  void update(size_t done, double loss, double samplesPerSecond) {
    if (!enabled_ || total_ == 0) return;
    // Without a terminal (chorus-run pipes the ranks' output), one line per 10%.
    int tenth = static_cast<int>(done * 10 / total_);
    if (!tty_ && tenth == lastTenth_ && done != total_) return;
    lastTenth_ = tenth;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(done * kWidth / total_);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "%sepoch %d/%d [%s] %zu/%zu  loss %.4f  %.0f samples/s%s",
                 tty_ ? "\r" : "", epoch_, epochs_, bar.c_str(), done, total_, loss,
                 samplesPerSecond, tty_ ? "" : "\n");
    if (tty_ && done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool enabled_, tty_;
  int epoch_, epochs_;
  size_t total_;
  int lastTenth_ = -1;
};

int run(const TrainOptions& o) {
  auto comm = chorus::Communicator::fromEnv();
  const int rank = comm->rank();
  const int ranks = comm->size();
  const bool root = rank == 0;

  int threads = o.threads;
  if (threads == 0) {
    // The ranks on this host share its cores; every launcher says how many there are.
    const int localSize = std::max(1, chorus::launchInfoFromEnv().localSize);
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / localSize);
  }
  setThreads(threads);
  torch::manual_seed(o.seed);
  // Adam's second moments underflow into denormals, which are ~50x slower on x86: flush them.
  at::globalContext().setFlushDenormal(true);

  Dataset train = chorus::train::loadIdx(o.data, "train", o.limit);
  Dataset test = chorus::train::loadIdx(o.data, "t10k");

  auto model = makeModel(o.model);
  chorus::dp::Options dpo;
  dpo.bucketBytes = std::max<size_t>(4, static_cast<size_t>(o.bucketMb * 1024 * 1024));
  dpo.minBuckets = o.minBuckets;
  dpo.accumulationSteps = o.accumulation;
  dpo.mode = o.mode == "delayed"     ? chorus::dp::Mode::kDelayed
             : o.mode == "local-sgd" ? chorus::dp::Mode::kLocalSgd
                                     : chorus::dp::Mode::kSync;
  dpo.localSgdPeriod = o.localSgdPeriod;
  dpo.checkEvery = o.checkEvery;
  chorus::torch_dp::TorchReplica replica(*comm, *model, dpo);
  replica.broadcast(0);

  std::unique_ptr<torch::optim::Optimizer> opt;
  if (o.optimizer == "sgd") {
    opt = std::make_unique<torch::optim::SGD>(model->parameters(),
                                              torch::optim::SGDOptions(o.lr).momentum(o.momentum));
  } else {
    opt =
        std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(o.lr));
  }

  if (root) {
    std::printf(
        "chorus-train: %d ranks, %s (%zu tensors, %zu parameters, %zu buckets), %s lr %g, batch "
        "%d per rank x %d ranks x %d accumulation, mode %s, %zu training samples, %d thread(s) "
        "per rank\n",
        ranks, o.model.c_str(), replica.parameterCount(), replica.parameterElements(),
        replica.replica().buckets().size(), o.optimizer.c_str(), o.lr, o.batch, ranks,
        o.accumulation, o.mode.c_str(), train.count, threads);
    std::fflush(stdout);
  }

  std::vector<Row> rows;
  double stepLoss = 0;
  int microInStep = 0;
  size_t hookReports = 0, expectedReports = 0;
  const auto start = Clock::now();
  double lastAccuracy = 0;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    auto idx = chorus::train::shardIndices(train.count, rank, ranks, o.seed, epoch, true);
    size_t batches = (idx.size() + static_cast<size_t>(o.batch) - 1) / static_cast<size_t>(o.batch);
    Progress progress(root && o.progress, epoch, o.epochs, idx.size() * static_cast<size_t>(ranks));
    const auto epochStart = Clock::now();
    double epochLoss = 0;
    size_t done = 0;
    for (size_t b = 0; b < batches; ++b) {
      size_t first = b * static_cast<size_t>(o.batch);
      size_t n = std::min<size_t>(static_cast<size_t>(o.batch), idx.size() - first);
      auto [x, y] = makeBatch(train, idx.data() + first, n);
      replica.beginStep();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      if (rank == o.failRank && replica.replica().step() + 1 == o.failStep) {
        std::fprintf(stderr, "chorus-train: rank %d exits now, in step %d (--fail-rank)\n", rank,
                     o.failStep);
        std::fflush(stderr);
        _exit(17);  // like a crash: no destructor tells the peers
      }
      loss.backward();
      hookReports += replica.hookReports();
      expectedReports += replica.parameterCount();
      double l = loss.item<double>();
      stepLoss += l;
      ++microInStep;
      epochLoss += l;
      done += n;
      if (replica.waitGradients()) {
        opt->step();
        replica.afterOptimizerStep();
        replica.zeroGradients();
        rows.push_back(
            {replica.replica().step(), epoch, stepLoss / microInStep, replica.lastMetrics(), -1});
        stepLoss = 0;
        microInStep = 0;
      }
      double secs = std::chrono::duration<double>(Clock::now() - epochStart).count();
      progress.update(done * static_cast<size_t>(ranks), epochLoss / static_cast<double>(b + 1),
                      secs > 0 ? static_cast<double>(done * static_cast<size_t>(ranks)) / secs : 0);
    }
    double secs = std::chrono::duration<double>(Clock::now() - epochStart).count();
    lastAccuracy = evaluate(model, test, *comm);
    if (!rows.empty() && rows.back().epoch == epoch) rows.back().accuracy = lastAccuracy;
    if (root) {
      std::printf(
          "epoch %d: train loss %.4f (rank 0), %.1f s, %.0f samples/s, test accuracy %.2f%%\n",
          epoch, epochLoss / static_cast<double>(std::max<size_t>(batches, 1)), secs,
          static_cast<double>(done * static_cast<size_t>(ranks)) / secs, 100.0 * lastAccuracy);
      std::fflush(stdout);
    }
  }
  double total = std::chrono::duration<double>(Clock::now() - start).count();

  if (dpo.mode == chorus::dp::Mode::kLocalSgd) {
    replica.averageParameters();  // the replicas drift between averagings; end on the average
    if (root) std::printf("local-sgd: parameters averaged once more at the end\n");
  }
  auto differ = replica.ranksDifferingFromRoot();
  if (root) {
    std::printf("gradients reported by autograd hooks: %zu of %zu (rest taken as final at wait)\n",
                hookReports, expectedReports);
    std::printf("final test accuracy %.2f%%, %.1f s in total\n", 100.0 * lastAccuracy, total);
    if (differ.empty()) {
      std::printf("parameters identical on all %d ranks (hash %016" PRIx64 ")\n", ranks,
                  replica.parameterHash());
    } else {
      std::string list;
      for (int r : differ) list += (list.empty() ? "" : ", ") + std::to_string(r);
      std::printf("parameters DIFFER: rank(s) %s differ from rank 0 (of %d ranks)\n", list.c_str(),
                  ranks);
    }
    // Who reached the all-reduces last, as rank 0 saw it: a rank that is last in most calls by
    // more than a millisecond is slow before the call (compute, input), not in the network.
    const chorus::StragglerReport stragglers = comm->stragglerReport();
    std::fputs(stragglers.summary().c_str(), stdout);
    for (const auto& r : stragglers.ranks) {
      if (r.lastFraction >= 0.5 && r.lagSamples > 0 && r.medianLagMs >= 1.0) {
        std::printf(
            "rank %d reaches the all-reduces late in most steps: its compute or input is "
            "slower, not the network\n",
            r.rank);
      }
    }
    double waitSum = 0, transferSum = 0;
    for (const auto& r : rows)
      waitSum += r.m.waitForSlowestSeconds, transferSum += r.m.transferSeconds;
    std::printf(
        "all-reduce time over %zu steps (rank 0): %.3f s waiting for the slowest rank, "
        "%.3f s moving bytes\n",
        rows.size(), waitSum, transferSum);
    std::fflush(stdout);
    if (!o.metrics.empty() || !o.plot.empty()) {
      std::string csv = o.metrics.empty() ? o.plot + ".csv" : o.metrics;
      writeCsv(csv, rows);
      std::printf("metrics: %s (%zu steps)\n", csv.c_str(), rows.size());
      if (!o.plot.empty()) {
        if (access("/usr/bin/python3", X_OK) != 0) {
          std::printf("plot: skipped, /usr/bin/python3 not found\n");
        } else {
          std::string cmd = std::string("/usr/bin/python3 '") + CHORUS_TRAIN_PLOT_SCRIPT + "' '" +
                            csv + "' '" + o.plot + "'";
          int rc = std::system(cmd.c_str());
          std::printf(rc == 0 ? "plot: %s\n" : "plot: failed (%s not written)\n", o.plot.c_str());
        }
      }
    }
  }
  return differ.empty() ? 0 : 3;
}

}  // namespace

// LibTorch allocates and frees every activation and gradient each step. With glibc's defaults the
// large ones go back to the kernel (munmap, heap trim) and fault in again, page by page, on the
// next step; on virtual machines where a page fault is expensive that tripled the CNN's
// forward+backward time. Keeping the freed memory in the heap makes later steps fault-free.
static void keepFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's maximum: blocks below it come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap top is not handed back below 1 GiB
}

int main(int argc, char** argv) {
  keepFreedMemory();
  TrainOptions o;
  if (int rc = chorus::train::parseOptions(argc, argv, o); rc >= 0) return rc;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-train: %s\n", e.what());
    return 1;
  }
}
