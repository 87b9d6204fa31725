// A stand-in rank for the chorus-run --hang-seconds test: publishes progress records and, on
// SIGUSR1, writes a dump as docs/trace-format.md describes them, without running collectives.
// Rank STUCK never issues allreduce #5; the others wait in it (rank 0 for STUCK, the others for
// rank 0). Exits 0 after LIFETIME seconds.
//   fake_progress_rank STUCK LIFETIME
#include <chorus/store.hpp>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace {

using nlohmann::json;

volatile sig_atomic_t dumpRequested = 0;

void onSignal(int) { dumpRequested = 1; }

int64_t nowUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

int envInt(const char* name) {
  const char* v = getenv(name);
  return v ? atoi(v) : -1;
}

chorus::Store::Bytes bytes(const std::string& s) { return {s.begin(), s.end()}; }

constexpr const char* kComm = "fa4efa4efa4efa4e";
constexpr int kStuckAt = 5;

json entry(int rank, int size, int number, bool done, int waitingOn, int64_t t0) {
  json peers = json::array();
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    bool heard = done || p != waitingOn;
    peers.push_back({{"rank", p},
                     {"sent", heard ? 32 : 0},
                     {"received", heard ? 32 : 0},
                     {"first_arrival_us", heard ? t0 + number * 1000 + 50 : 0}});
  }
  return {{"number", number},
          {"collective", "allreduce"},
          {"algorithm", "ring"},
          {"dtype", "f32"},
          {"op", "sum"},
          {"count", 8},
          {"bytes", 32},
          {"root", -1},
          {"state", done ? "done" : "waiting"},
          {"waiting_on", done ? -1 : waitingOn},
          {"issued_us", t0 + number * 1000},
          {"started_us", t0 + number * 1000},
          {"ended_us", done ? t0 + number * 1000 + 500 : 0},
          {"peers", peers}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fake_progress_rank STUCK LIFETIME\n");
    return 2;
  }
  const int stuck = atoi(argv[1]);
  const double lifetime = atof(argv[2]);
  const int rank = envInt("CHORUS_RANK"), size = envInt("CHORUS_WORLD_SIZE");
  const char* url = getenv("CHORUS_STORE");
  const char* dir = getenv("CHORUS_TRACE_DIR");
  const char* sig = getenv("CHORUS_TRACE_SIGNAL");
  if (rank < 0 || size < 2 || !url || !dir || !sig || std::string(sig) != "USR1") {
    std::fprintf(stderr,
                 "fake_progress_rank: needs CHORUS_RANK, CHORUS_WORLD_SIZE >= 2, "
                 "CHORUS_STORE, CHORUS_TRACE_DIR and CHORUS_TRACE_SIGNAL=USR1\n");
    return 2;
  }
  signal(SIGUSR1, onSignal);
  auto store = chorus::openStore(url, std::chrono::seconds(10));
  if (rank == 0) {
    int64_t n = store->add("chorus/progress/count", 1);
    store->set("chorus/progress/comm/" + std::to_string(n),
               bytes(json{{"communicator", kComm}, {"size", size}}.dump()));
  }
  const int64_t t0 = nowUs();
  const bool isStuck = rank == stuck;
  const int waitingOn = rank == 0 ? stuck : 0;
  const int64_t lastProgress = t0 + kStuckAt * 1000;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(lifetime);
  while (std::chrono::steady_clock::now() < end) {
    json record = {{"format", "chorus-progress/1"},
                   {"communicator", kComm},
                   {"rank", rank},
                   {"size", size},
                   {"host", "fake"},
                   {"pid", getpid()},
                   {"issued", isStuck ? kStuckAt : kStuckAt + 1},
                   {"completed", kStuckAt},
                   {"state", isStuck ? "idle" : "waiting"},
                   {"last_progress_us", lastProgress},
                   {"published_us", nowUs()}};
    record["current"] = isStuck ? json(nullptr)
                                : json{{"number", kStuckAt},
                                       {"collective", "allreduce"},
                                       {"waiting_on", waitingOn},
                                       {"since_us", lastProgress}};
    store->set("chorus/progress/" + std::string(kComm) + "/" + std::to_string(rank),
               bytes(record.dump()));
    if (dumpRequested) {
      dumpRequested = 0;
      json entries = json::array();
      for (int n = 0; n < kStuckAt; ++n) entries.push_back(entry(rank, size, n, true, -1, t0));
      if (!isStuck) entries.push_back(entry(rank, size, kStuckAt, false, waitingOn, t0));
      json dump = {{"format", "chorus-trace/1"},
                   {"communicator", kComm},
                   {"rank", rank},
                   {"size", size},
                   {"host", "fake"},
                   {"pid", getpid()},
                   {"reason", "signal"},
                   {"error", nullptr},
                   {"dumped_us", nowUs()},
                   {"capacity", 2000},
                   {"recorded", entries.size()},
                   {"entries", entries}};
      std::string path =
          std::string(dir) + "/chorus-trace-" + kComm + "-rank" + std::to_string(rank) + ".json";
      std::ofstream(path + ".tmp") << dump.dump(1) << "\n";
      std::rename((path + ".tmp").c_str(), path.c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}
