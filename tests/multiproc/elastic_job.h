// An elastic job of membership_worker processes (tests/multiproc/programs/membership_worker.cc)
// started directly, without a launcher, around a TCP store served by the test: one rank is killed
// with SIGKILL, optionally a replacement joins, and the outputs tell when the new membership
// completed its first all-reduce. Used by membership_mp_test.cc (checks and the measurement).
#pragma once

#include <chorus/store.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace chorus::mp {

inline long long monoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct ElasticRun {
  bool ok = false;              // every process alive at the end exited 0, within the limit
  std::string problem;          // why not
  std::vector<long long> sums;  // every SUM value printed
  int changedSize = -1;         // size of the new membership (from a CHANGE line)
  double recoveryMs = -1;       // kill -> last FIRST line of the new membership
  double changedMs = -1;        // kill -> last CHANGE line (shrink()/join() returned everywhere)
  double readyMs = -1;    // spawn of the ranks -> all READY (start-up and create(), for scale)
  double startupMs = -1;  // replacement: spawn -> its START line
  std::string outputs;    // everything the processes printed, for failure messages
};

class ElasticJob {
 public:
  // storeUrl: the job's store; empty: a TCP store served by the test.
  ElasticJob(std::string worker, std::string dir, int ranks, size_t count, int after,
             std::string storeUrl = "")
      : worker_(std::move(worker)),
        dir_(std::move(dir)),
        url_(std::move(storeUrl)),
        ranks_(ranks),
        count_(count),
        after_(after),
        server_("127.0.0.1", 0) {
    if (url_.empty()) url_ = "tcp://127.0.0.1:" + std::to_string(server_.port());
  }
  // Called just before the victim is killed (another fault at the same moment).
  void alsoAtTheKill(std::function<void()> fault) { alsoAtTheKill_ = std::move(fault); }
  ~ElasticJob() {
    for (auto& p : procs_) {
      if (p.pid > 0) {
        kill(p.pid, SIGKILL);
        waitpid(p.pid, nullptr, 0);
      }
    }
  }

  // Starts the ranks, kills `victim` once all run, starts a replacement if asked, and waits for
  // every process (at most `limit`).
  ElasticRun run(int victim, bool replace, std::chrono::seconds limit) {
    ElasticRun r;
    auto store = openStore(url_, std::chrono::seconds(5));
    const long long spawnedAll = monoNs();
    for (int i = 0; i < ranks_; ++i) start(i, false);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (countLines("READY") < ranks_) {
      if (std::chrono::steady_clock::now() > deadline) return fail(r, "ranks never got ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    r.readyMs = static_cast<double>(monoNs() - spawnedAll) / 1e6;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // well into the all-reduces
    // As an elastic launcher does, the replacement is announced before it starts.
    if (replace) store->add("chorus/elastic/expected_joiners", 1);
    if (alsoAtTheKill_) alsoAtTheKill_();
    const long long killedAt = monoNs();
    kill(procs_[static_cast<size_t>(victim)].pid, SIGKILL);
    waitpid(procs_[static_cast<size_t>(victim)].pid, nullptr, 0);
    procs_[static_cast<size_t>(victim)].pid = -1;
    long long spawnedAt = 0;
    if (replace) {
      spawnedAt = monoNs();
      start(victim, true);
    }
    for (auto& p : procs_) {
      if (p.pid <= 0) continue;
      int status = 0;
      while (waitpid(p.pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) return fail(r, "a rank overran");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      p.pid = -1;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return fail(r, "a rank exited with status " + std::to_string(status));
      }
    }
    long long lastFirst = 0, lastChange = 0;
    for (size_t i = 0; i < procs_.size(); ++i) {
      if (i == static_cast<size_t>(victim) && !procs_[i].replacement) continue;
      for (const auto& line : lines(procs_[i].out)) {
        auto f = fields(line);
        if (line.rfind("FIRST ", 0) == 0) lastFirst = std::max(lastFirst, std::stoll(f["mono"]));
        if (line.rfind("SUM ", 0) == 0) r.sums.push_back(std::stoll(f["value"]));
        if (line.rfind("CHANGE ", 0) == 0) {
          r.changedSize = std::stoi(f["size"]);
          lastChange = std::max(lastChange, std::stoll(f["mono"]));
        }
        if (line.rfind("START ", 0) == 0 && procs_[i].replacement) {
          r.startupMs = static_cast<double>(std::stoll(f["mono"]) - spawnedAt) / 1e6;
        }
      }
    }
    r.recoveryMs = static_cast<double>(lastFirst - killedAt) / 1e6;
    r.changedMs = static_cast<double>(lastChange - killedAt) / 1e6;
    r.outputs = allOutputs();
    r.ok = lastFirst > 0;
    if (!r.ok) r.problem = "no FIRST line";
    return r;
  }

 private:
  struct Proc {
    pid_t pid = -1;
    std::string out;
    bool replacement = false;
  };

  void start(int rank, bool replacement) {
    Proc p;
    p.out = dir_ + "/rank" + std::to_string(rank) + (replacement ? "-replacement" : "") + ".out";
    p.replacement = replacement;
    const std::string countArg = std::to_string(count_), afterArg = std::to_string(after_);
    p.pid = fork();
    if (p.pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = open(p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      setenv("CHORUS_RANK", std::to_string(rank).c_str(), 1);
      setenv("CHORUS_WORLD_SIZE", std::to_string(ranks_).c_str(), 1);
      setenv("CHORUS_STORE", url_.c_str(), 1);
      setenv("CHORUS_TIMEOUT", "20", 1);
      if (replacement) setenv("CHORUS_JOIN", "1", 1);
      execl(worker_.c_str(), worker_.c_str(), countArg.c_str(), afterArg.c_str(),
            static_cast<char*>(nullptr));
      _exit(126);
    }
    if (replacement) {
      procs_.push_back(p);
    } else {
      procs_.insert(procs_.begin() + rank, p);
    }
  }

  static std::vector<std::string> lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  static std::map<std::string, std::string> fields(const std::string& line) {
    std::map<std::string, std::string> out;
    std::istringstream in(line);
    for (std::string w; in >> w;) {
      auto eq = w.find('=');
      if (eq != std::string::npos) out[w.substr(0, eq)] = w.substr(eq + 1);
    }
    return out;
  }
  int countLines(const std::string& head) const {
    int n = 0;
    for (const auto& p : procs_) {
      for (const auto& l : lines(p.out)) n += l.rfind(head, 0) == 0;
    }
    return n;
  }
  std::string allOutputs() const {
    std::string all;
    for (const auto& p : procs_) {
      all += "--- " + p.out + "\n";
      for (const auto& l : lines(p.out)) all += l + "\n";
    }
    return all;
  }
  ElasticRun& fail(ElasticRun& r, const std::string& why) {
    r.problem = why;
    r.outputs = allOutputs();
    return r;
  }

  std::string worker_, dir_, url_;
  int ranks_;
  size_t count_;
  int after_;
  TcpStoreServer server_;
  std::function<void()> alsoAtTheKill_;
  std::vector<Proc> procs_;
};

}  // namespace chorus::mp
