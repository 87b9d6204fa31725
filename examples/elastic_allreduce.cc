// A job that survives a lost rank: a loop of all-reduce steps that, when a step fails because a
// peer died or timed out, shrinks the communicator to the live ranks and redoes the step. Under
// `chorus-run --elastic`, the launcher starts a replacement with CHORUS_JOIN=1: fromEnvOrJoin()
// then joins the running job at the next membership change instead of creating a communicator.
//
//   chorus-run -n 4 --elastic --timeout 10 -- ./elastic_allreduce --steps 200
//   ELASTIC_KILL_RANK=2 ELASTIC_KILL_STEP=50 chorus-run -n 4 --elastic ...   (rank 2 dies at 50)
//
// Each member contributes (slot + 1) * (step + 1), where slot is the rank it was started as
// (a replacement started by chorus-run takes the slot, CHORUS_RANK, of the rank it replaces), so
// every result is checked against the sum for the current membership. The first rank prints one
// line per membership change and one at the end; any wrong result ends the program with status 1.
#include <chorus/chorus.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Seconds since the epoch, to compare times across processes (the kill, the recovery).
double wallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Settings {
  int steps = 200;
  int stepMs = 10;      // pause per step, so that a job lasts long enough to lose a rank
  int admitEvery = 20;  // steps between checks for newcomers waiting to join
  size_t count = 4096;  // elements per all-reduce
  int killSlot = -1;    // ELASTIC_KILL_RANK: this slot SIGKILLs itself (first start only)
  int killStep = -1;    // ELASTIC_KILL_STEP
};

int envInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--steps") s.steps = value;
    if (flag == "--step-ms") s.stepMs = value;
    if (flag == "--admit-every") s.admitEvery = value;
    if (flag == "--count") s.count = static_cast<size_t>(value);
  }
  s.killSlot = envInt("ELASTIC_KILL_RANK", -1);
  s.killStep = envInt("ELASTIC_KILL_STEP", -1);
  return s;
}

bool recoverable(const chorus::Error& e) {
  return e.code() == chorus::ErrorCode::kPeerFailure || e.code() == chorus::ErrorCode::kTimeout ||
         e.code() == chorus::ErrorCode::kAborted;
}

// The state every member must agree on after a membership change.
struct Membership {
  std::vector<int32_t> slots;  // slot of each rank of the communicator
  int64_t expectedFactor = 0;  // sum of (slot + 1) over the members
};

// Collective on a new communicator: the members exchange their slots and agree on the step to
// redo, the lowest step not completed by every survivor (a newcomer has none: it offers
// INT64_MAX). Rank 0 prints the change.
Membership agree(chorus::Communicator& comm, int32_t slot, int64_t& step) {
  Membership m;
  m.slots.resize(static_cast<size_t>(comm.size()));
  std::vector<int32_t> mine{slot};
  comm.allGather(std::span<const int32_t>(mine), std::span<int32_t>(m.slots)).wait();
  std::vector<int64_t> next{step};
  comm.allReduce(std::span<int64_t>(next), chorus::ReduceOp::kMin).wait();
  step = next[0];
  for (int32_t s : m.slots) m.expectedFactor += s + 1;
  if (comm.rank() == 0 && comm.generation() > 0) {
    std::string slots, lost;
    for (int32_t s : m.slots) slots += (slots.empty() ? "" : ",") + std::to_string(s);
    std::printf("membership: generation=%llu size=%d slots=%s redo_step=%lld\n",
                static_cast<unsigned long long>(comm.generation()), comm.size(), slots.c_str(),
                static_cast<long long>(step));
    std::fflush(stdout);
  }
  return m;
}

// Newcomers registered to join (e.g. a replacement started without the launcher announcing it):
// the members agree on whether any wait, and if so change the membership to admit them.
bool newcomersWaiting(chorus::Communicator& comm) {
  std::vector<int32_t> waiting{comm.joinersWaiting()};
  comm.allReduce(std::span<int32_t>(waiting), chorus::ReduceOp::kMax).wait();
  return waiting[0] > 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Settings settings = parse(argc, argv);
  // The rank the launcher started this process as (CHORUS_RANK, SLURM_PROCID, ...).
  const int32_t slot = chorus::launchInfoFromEnv().rank;
  const bool replacement = envInt("CHORUS_RESTART", 0) > 0;
  try {
    std::unique_ptr<chorus::Communicator> comm = chorus::Communicator::fromEnvOrJoin();
    int64_t step = replacement ? INT64_MAX : 0;
    Membership m = agree(*comm, slot, step);
    std::vector<int32_t> buffer(settings.count);
    // When this rank saw the last membership change begin; cleared once a step completes.
    Clock::time_point changeBegan;
    bool changing = false;
    while (step < settings.steps) {
      if (slot == settings.killSlot && step == settings.killStep && !replacement) {
        std::printf("slot %d: killing myself (SIGKILL) at step %lld, time=%.3f\n", slot,
                    static_cast<long long>(step), wallSeconds());
        std::fflush(stdout);
        raise(SIGKILL);
      }
      bool changeMembership = false;
      try {
        if (settings.admitEvery > 0 && step > 0 && step % settings.admitEvery == 0 &&
            newcomersWaiting(*comm)) {
          changeMembership = true;
        } else {
          const auto value = static_cast<int32_t>((slot + 1) * (step + 1));
          std::fill(buffer.begin(), buffer.end(), value);
          comm->allReduce(std::span<int32_t>(buffer)).wait();
          const auto expected = static_cast<int32_t>(m.expectedFactor * (step + 1));
          for (int32_t got : buffer) {
            if (got != expected) {
              std::fprintf(stderr, "slot %d: wrong sum at step %lld on %d ranks: %d, expected %d\n",
                           slot, static_cast<long long>(step), comm->size(), got, expected);
              return 1;
            }
          }
          ++step;
          if (changing && comm->rank() == 0) {
            std::printf(
                "first step of generation %llu (%d ranks) done at time=%.3f, %.0f ms after "
                "the change began here\n",
                static_cast<unsigned long long>(comm->generation()), comm->size(), wallSeconds(),
                std::chrono::duration<double, std::milli>(Clock::now() - changeBegan).count());
            std::fflush(stdout);
          }
          changing = false;
          std::this_thread::sleep_for(std::chrono::milliseconds(settings.stepMs));
        }
      } catch (const chorus::Error& e) {
        if (!recoverable(e)) throw;
        changeMembership = true;  // a peer died or timed out: this step is redone
      }
      if (changeMembership) {
        if (!changing) changeBegan = Clock::now();
        changing = true;
        comm = comm->shrink();
        m = agree(*comm, slot, step);
      }
    }
    if (comm->rank() == 0) {
      std::printf("finished %d steps on %d ranks (generation %llu), every result correct\n",
                  settings.steps, comm->size(),
                  static_cast<unsigned long long>(comm->generation()));
    }
    return 0;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "slot %d: chorus error (%s): %s\n", slot,
                 std::string(chorus::toString(e.code())).c_str(), e.what());
    return 1;
  }
}
