// Elastic data-parallel training over thread-ranks: a rank lost mid-step (after some of its
// buckets went out) makes the survivors discard that step, shrink and redo it; a newcomer
// receives the parameters, the optimizer state and the step count; waiting newcomers are admitted
// between steps; after every change the replicas are bit-identical and the training equals one
// process that followed the same membership.
#include "dp/mlp_model.h"
#include "harness/thread_ranks.h"

#include <gtest/gtest.h>
#include <chorus/dp.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

namespace chorus::testing {
namespace {

constexpr int kBatch = 3;
constexpr float kLr = 0.2f, kMomentum = 0.5f;

// SGD with momentum on the Mlp; the velocities are registered as Replica state.
struct Velocity {
  std::vector<std::vector<float>> v;
  explicit Velocity(Mlp& m) {
    for (auto* t : m.values()) v.emplace_back(t->size(), 0.0f);
  }
  void step(Mlp& m) {
    for (size_t t = 0; t < 4; ++t) {
      auto& value = *m.values()[t];
      const auto& grad = *m.grads()[t];
      for (size_t i = 0; i < value.size(); ++i) {
        v[t][i] = kMomentum * v[t][i] + grad[i];
        value[i] -= kLr * v[t][i];
      }
    }
  }
};

// The reference: one process taking, at each step, the global batch of the membership of that
// step (sizes[s] ranks of kBatch samples, consecutive from the global position).
std::vector<float> reference(const std::vector<int>& sizes) {
  Mlp m(7);
  Velocity vel(m);
  int64_t pos = 0;
  for (int n : sizes) {
    m.backward(range(pos, n * kBatch));
    vel.step(m);
    m.zeroGrad();
    pos += n * kBatch;
  }
  return m.flat();
}

// How a rank of the elastic job behaves.
struct Plan {
  int steps = 8;
  int dieAtStep = 0;  // this rank dies during this step, after its first bucket went out
  int admitEvery = 0;
  std::string compression = "none";
};

struct Outcome {
  std::vector<float> params;
  int64_t steps = 0;
  std::vector<dp::MembershipChange> changes;
  std::vector<int> sizes;  // world size of each completed step
  bool died = false;
  std::vector<int> differing = {-1};
};

// Threads as ranks of one elastic job on an in-process store; newcomers join it with join().
class ThreadJob {
 public:
  explicit ThreadJob(Options options) : options_(std::move(options)) {}
  ~ThreadJob() { waitAll(); }

  void startRanks(int size, const std::function<Plan(int)>& plans) {
    outcomes_.resize(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      threads_.emplace_back([this, r, size, plan = plans(r)] {
        guard(r, [&] {
          auto comm = Communicator::create(store_, r, size, options_);
          train(std::move(comm), plan, outcomes_[static_cast<size_t>(r)]);
        });
      });
    }
  }

  // A newcomer: like a launcher, announce it first (so the next shrink waits for it) when asked.
  Outcome& startNewcomer(bool announce, Plan plan) {
    if (announce) store_->add("chorus/elastic/expected_joiners", 1);
    joiners_.push_back(std::make_unique<Outcome>());
    Outcome& out = *joiners_.back();
    const int index = static_cast<int>(joiners_.size()) + 100;
    threads_.emplace_back([this, index, plan, &out] {
      guard(index, [&] { train(Communicator::join(store_, options_), plan, out); });
    });
    return out;
  }

  std::vector<std::string> waitAll() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    return errors_;
  }
  Outcome& rank(int r) { return outcomes_[static_cast<size_t>(r)]; }

 private:
  void guard(int who, const std::function<void()>& f) {
    try {
      f();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      errors_.push_back("thread " + std::to_string(who) + ": " + e.what());
    }
  }

  void train(std::unique_ptr<Communicator> comm, const Plan& plan, Outcome& out) {
    // A newcomer starts from other parameters: synchronize() must replace them.
    const bool newcomer = comm->generation() > 0;
    Mlp m(newcomer ? 99 : 7);
    Velocity vel(m);
    int64_t pos = 0;  // global sample position: the trainer's data state
    dp::Options o = smallBuckets();
    o.elastic.enabled = true;
    o.elastic.admitJoinersEvery = plan.admitEvery;
    o.elastic.onChange = [&](const dp::MembershipChange& c) { out.changes.push_back(c); };
    o.compression = dp::parseCompression(plan.compression);
    o.compression.minElements = 16;
    auto rep = std::make_unique<dp::Replica>(std::move(comm), o);
    m.registerWithShapes(*rep);
    for (size_t t = 0; t < 4; ++t)
      rep->addState("velocity" + std::to_string(t), vel.v[t].data(), vel.v[t].size());
    rep->addState("position", &pos, 1);
    try {
      rep->synchronize();
    } catch (const dp::MembershipChanged&) {
    }
    while (rep->step() < plan.steps) {
      try {
        const int r = rep->communicator().rank(), n = rep->communicator().size();
        rep->beginStep();
        m.backward(range(pos + r * kBatch, kBatch));
        if (rep->step() + 1 == plan.dieAtStep) {
          // Bucket 0 ({b2, w2}) goes out and completes everywhere; then this rank is gone while
          // the others wait for bucket 1.
          rep->gradientReady(3);
          rep->gradientReady(2);
          out.died = true;
          out.steps = rep->step();
          rep.reset();  // waits for bucket 0, then closes the communicator
          return;
        }
        for (size_t i : {3, 2, 1, 0}) rep->gradientReady(i);
        rep->waitGradients();
        vel.step(m);
        pos += n * kBatch;
        out.sizes.push_back(n);
        rep->afterOptimizerStep();
        m.zeroGrad();
      } catch (const dp::MembershipChanged& e) {
        // The step was dropped everywhere; the replica's gradients are zero.
        for (auto* g : m.grads()) {
          for (float x : *g) {
            if (x != 0.0f) throw std::runtime_error("gradients not zeroed after a change");
          }
        }
      }
    }
    for (;;) {
      try {
        out.differing = rep->ranksDifferingFromRoot();
        break;
      } catch (const dp::MembershipChanged&) {
      }
    }
    out.params = m.flat();
    out.steps = rep->step();
  }

  Options options_;
  std::shared_ptr<Store> store_ = makeHashStore();
  std::mutex mu_;
  std::vector<std::string> errors_;
  std::vector<std::thread> threads_;
  std::vector<Outcome> outcomes_;
  std::vector<std::unique_ptr<Outcome>> joiners_;
};

void expectNoErrors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) ADD_FAILURE() << e;
}

void expectSameBits(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& who) {
  ASSERT_EQ(a.size(), b.size()) << who;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << who;
}

TEST(DpElastic, LostRankMidStepIsDroppedAndTheSurvivorsRedoTheStep) {
  ThreadJob job(testOptions());
  job.startRanks(3, [](int r) { return Plan{.steps = 7, .dieAtStep = r == 1 ? 4 : 0}; });
  expectNoErrors(job.waitAll());
  ASSERT_TRUE(job.rank(1).died);
  EXPECT_EQ(job.rank(1).steps, 3);
  for (int r : {0, 2}) {
    const Outcome& o = job.rank(r);
    EXPECT_EQ(o.steps, 7);
    ASSERT_EQ(o.changes.size(), 1u) << "rank " << r;
    const dp::MembershipChange& c = o.changes[0];
    EXPECT_EQ(c.oldSize, 3);
    EXPECT_EQ(c.newSize, 2);
    EXPECT_EQ(c.generation, 1u);
    EXPECT_EQ(c.formerRanks, (std::vector<int>{0, 2}));
    EXPECT_EQ(c.lostRanks, (std::vector<int>{1}));
    EXPECT_EQ(c.joined, 0);
    EXPECT_EQ(c.step, 3);
    EXPECT_EQ(c.stateSource, -1);  // the survivors were equally advanced: nothing to copy
    EXPECT_FALSE(c.cause.empty());
    EXPECT_EQ(o.sizes, (std::vector<int>{3, 3, 3, 2, 2, 2, 2}));
    EXPECT_TRUE(o.differing.empty());
  }
  expectSameBits(job.rank(0).params, job.rank(2).params, "ranks 0 and 2");
  // Step 4's partial average (bucket 0 completed on every rank) was never applied.
  expectClose(job.rank(0).params, reference({3, 3, 3, 2, 2, 2, 2}));
}

// Compressed buckets (PowerSGD's two phases, error feedback) through the same failure: the
// survivors reset their compression state and stay bit-identical.
TEST(DpElastic, LostRankWithCompressionLeavesTheSurvivorsIdentical) {
  for (const char* compression : {"bf16", "powersgd:2"}) {
    ThreadJob job(testOptions());
    job.startRanks(3, [&](int r) {
      return Plan{.steps = 6, .dieAtStep = r == 1 ? 3 : 0, .compression = compression};
    });
    expectNoErrors(job.waitAll());
    for (int r : {0, 2}) {
      EXPECT_EQ(job.rank(r).steps, 6) << compression;
      EXPECT_EQ(job.rank(r).changes.size(), 1u) << compression;
      EXPECT_TRUE(job.rank(r).differing.empty()) << compression;
    }
    expectSameBits(job.rank(0).params, job.rank(2).params, compression);
  }
}

TEST(DpElastic, ReplacementReceivesTheStateAndTheJobGoesOnAtFullSize) {
  ThreadJob job(testOptions());
  job.startRanks(3, [](int r) { return Plan{.steps = 7, .dieAtStep = r == 2 ? 3 : 0}; });
  Outcome& newcomer = job.startNewcomer(true, Plan{.steps = 7});
  expectNoErrors(job.waitAll());
  ASSERT_TRUE(job.rank(2).died);
  for (const Outcome* o : {&job.rank(0), &job.rank(1), &newcomer}) {
    EXPECT_EQ(o->steps, 7);
    EXPECT_TRUE(o->differing.empty());
  }
  // The newcomer sees no change: its synchronize() was its start.
  EXPECT_TRUE(newcomer.changes.empty());
  for (const Outcome* o : {&job.rank(0), &job.rank(1)}) {
    ASSERT_EQ(o->changes.size(), 1u);
    const dp::MembershipChange& c = o->changes[0];
    EXPECT_EQ(c.oldSize, 3);
    EXPECT_EQ(c.newSize, 3);
    EXPECT_EQ(c.formerRanks, (std::vector<int>{0, 1, -1}));
    EXPECT_EQ(c.lostRanks, (std::vector<int>{2}));
    EXPECT_EQ(c.joined, 1);
    EXPECT_EQ(c.stateSource, 0);
    EXPECT_EQ(c.step, 2);
  }
  EXPECT_EQ(newcomer.sizes, (std::vector<int>{3, 3, 3, 3, 3}));
  expectSameBits(job.rank(0).params, newcomer.params, "rank 0 and the newcomer");
  expectSameBits(job.rank(0).params, job.rank(1).params, "ranks 0 and 1");
  // Parameters, velocities and the data position all came across: as if nobody had failed.
  expectClose(newcomer.params, reference(std::vector<int>(7, 3)));
}

TEST(DpElastic, WaitingNewcomerIsAdmittedBetweenStepsWithoutAFailure) {
  ThreadJob job(testOptions());
  job.startRanks(2, [](int) { return Plan{.steps = 40, .admitEvery = 2}; });
  Outcome& newcomer = job.startNewcomer(false, Plan{.steps = 40, .admitEvery = 2});
  expectNoErrors(job.waitAll());
  ASSERT_EQ(job.rank(0).changes.size(), 1u) << "the newcomer was not admitted within 40 steps";
  const dp::MembershipChange& c = job.rank(0).changes[0];
  EXPECT_TRUE(c.cause.empty());
  EXPECT_EQ(c.oldSize, 2);
  EXPECT_EQ(c.newSize, 3);
  EXPECT_TRUE(c.lostRanks.empty());
  EXPECT_EQ(c.step % 2, 0);
  std::vector<int> sizes(40, 3);
  for (int64_t s = 0; s < c.step; ++s) sizes[static_cast<size_t>(s)] = 2;
  EXPECT_EQ(job.rank(0).sizes, sizes);
  EXPECT_EQ(newcomer.steps, 40);
  EXPECT_TRUE(newcomer.differing.empty());
  expectSameBits(job.rank(0).params, newcomer.params, "rank 0 and the newcomer");
  expectClose(job.rank(0).params, reference(sizes));
}

TEST(DpElastic, LostRankInACallersCollectiveBecomesAMembershipChange) {
  auto store = makeHashStore();
  std::vector<std::thread> threads;
  std::vector<int64_t> sums(3, -1);
  std::vector<std::vector<int>> lost(3);
  std::mutex mu;
  std::vector<std::string> errors;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      try {
        dp::Options o = smallBuckets();
        o.elastic.enabled = true;
        dp::Replica rep(Communicator::create(store, r, 3, testOptions()), o);
        Mlp m(7);
        m.registerWith(rep);
        rep.synchronize();
        if (r == 1) return;  // gone before the evaluation: its communicator closes
        for (;;) {
          try {
            int64_t x = rep.communicator().rank() + 1;
            rep.collective([&](Communicator& c) { c.allReduce(std::span<int64_t>(&x, 1)).wait(); });
            sums[static_cast<size_t>(r)] = x;
            break;
          } catch (const dp::MembershipChanged& e) {
            lost[static_cast<size_t>(r)] = e.change.lostRanks;
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  expectNoErrors(errors);
  for (int r : {0, 2}) {
    EXPECT_EQ(lost[static_cast<size_t>(r)], (std::vector<int>{1})) << "rank " << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], 3) << "rank " << r;  // 1 + 2 among the survivors
  }
}

TEST(DpSynchronize, CopiesFromTheMostAdvancedRank) {
  std::vector<std::vector<float>> params(3);
  std::vector<int64_t> steps(3), extra(3);
  expectRanks(3, [&](Communicator& c) {
    Mlp m(static_cast<uint32_t>(c.rank()) + 1);
    int64_t counter = c.rank() * 10;
    dp::Replica rep(c, smallBuckets());
    m.registerWith(rep);
    rep.addState("counter", &counter, 1);
    if (c.rank() == 1) rep.restoreStep(5);
    rep.synchronize();
    params[static_cast<size_t>(c.rank())] = m.flat();
    steps[static_cast<size_t>(c.rank())] = rep.step();
    extra[static_cast<size_t>(c.rank())] = counter;
  });
  expectSameBits(params[0], Mlp(2).flat(), "rank 0 has rank 1's parameters");
  expectSameBits(params[2], Mlp(2).flat(), "rank 2 has rank 1's parameters");
  EXPECT_EQ(steps, (std::vector<int64_t>{5, 5, 5}));
  EXPECT_EQ(extra, (std::vector<int64_t>{10, 10, 10}));
}

TEST(DpSynchronize, DifferentRegistrationsAreAnErrorOnEveryRank) {
  auto errors = runRanks(2, [&](Communicator& c) {
    Mlp m(1);
    std::vector<float> state(c.rank() == 0 ? 4 : 5);
    dp::Replica rep(c, smallBuckets());
    m.registerWith(rep);
    rep.addState("moments", state.data(), state.size());
    rep.synchronize();
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const auto& e : errors)
    EXPECT_NE(e.find("registered different parameters or state"), std::string::npos) << e;
}

TEST(DpElastic, MisuseIsRejectedUpFront) {
  expectRanks(1, [](Communicator& c) {
    dp::Options o;
    o.elastic.enabled = true;
    EXPECT_THROW(dp::Replica(c, o), Error);  // a borrowed communicator cannot be replaced
    o.mode = dp::Mode::kDelayed;
    EXPECT_THROW(dp::Replica(Communicator::create(makeHashStore(), 0, 1, testOptions()), o), Error);
  });
}

}  // namespace
}  // namespace chorus::testing
