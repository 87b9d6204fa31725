// Helpers for the multi-process tests (header-only: only *_test.cc files are compiled into
// multiproc_tests). Launch runs chorus-run with its output captured and a hard deadline;
// parseResults reads the "RESULT rank=R case=C status=S ... msg=..." lines of mp_worker.
#pragma once

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace chorus::mp {

using Clock = std::chrono::steady_clock;

inline const std::string& launcherPath() {
  static const std::string path = CHORUS_BIN_DIR "/chorus-run/chorus-run";
  return path;
}

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct RunResult {
  int exitCode = -1;  // exit status, or 128+N when killed by signal N
  std::string out;
  std::string err;
  double seconds = 0;    // from start to exit
  bool overran = false;  // killed at the deadline
};

// One run of chorus-run with stdout and stderr captured. Every wait has a deadline: on overrun
// chorus-run is SIGKILLed (its ranks die with it: PR_SET_PDEATHSIG) and the test fails.
class Launch {
 public:
  explicit Launch(const std::vector<std::string>& args) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) std::abort();
    std::vector<std::string> argv = {launcherPath()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> ptrs;
    for (auto& a : argv) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    start_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      execv(launcherPath().c_str(), ptrs.data());
      _exit(126);
    }
    close(out[1]);
    close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
  }

  ~Launch() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }

  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  const std::string& out() const { return text_[0]; }

  // Reads output until done(stdout) holds; false when limit passes first.
  bool waitForOutput(const std::function<bool(const std::string&)>& done,
                     Clock::duration limit = std::chrono::seconds(10)) {
    auto deadline = Clock::now() + limit;
    while (!done(text_[0])) {
      if (Clock::now() >= deadline || (fds_[0] < 0 && fds_[1] < 0)) return false;
      pump(50);
    }
    return true;
  }

  void signal(int sig) { kill(pid_, sig); }

  // Waits for chorus-run to exit and collects all its output.
  RunResult finish(Clock::duration limit = std::chrono::seconds(15)) {
    auto deadline = Clock::now() + limit;
    RunResult result;
    int status = 0;
    while (true) {
      pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) break;
      if (Clock::now() >= deadline) {
        ADD_FAILURE() << "chorus-run still running after the test's hard limit of "
                      << std::chrono::duration<double>(limit).count()
                      << " s; killing it. Output so far:\n"
                      << text_[0] << "\n--- stderr ---\n"
                      << text_[1];
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        result.overran = true;
        break;
      }
      pump(20);
    }
    result.seconds = secondsSince(start_);
    pid_ = -1;
    auto drainDeadline = Clock::now() + std::chrono::seconds(2);
    while ((fds_[0] >= 0 || fds_[1] >= 0) && Clock::now() < drainDeadline) pump(50);
    result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    result.out = text_[0];
    result.err = text_[1];
    return result;
  }

 private:
  void pump(int timeoutMs) {
    pollfd p[2];
    nfds_t n = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds_[i] < 0) continue;
      p[n] = pollfd{fds_[i], POLLIN, 0};
      which[n++] = i;
    }
    if (n == 0) {
      usleep(static_cast<useconds_t>(timeoutMs) * 1000);
      return;
    }
    if (poll(p, n, timeoutMs) <= 0) return;
    for (nfds_t k = 0; k < n; ++k) {
      if (p[k].revents == 0) continue;
      char buffer[4096];
      ssize_t got = read(p[k].fd, buffer, sizeof buffer);
      if (got > 0) {
        text_[which[k]].append(buffer, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds_[which[k]]);
        fds_[which[k]] = -1;
      }
    }
  }

  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string text_[2];
  Clock::time_point start_;
};

inline RunResult runLauncher(const std::vector<std::string>& args, Clock::duration limit) {
  return Launch(args).finish(limit);
}

inline std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) result.push_back(line);
  return result;
}

// A line without the "[rank] " prefix of --tag-output.
inline std::string untagged(const std::string& line) {
  if (!line.empty() && line[0] == '[') {
    auto close = line.find("] ");
    if (close != std::string::npos) return line.substr(close + 2);
  }
  return line;
}

// "WORD key=value key=value ... msg=free text": the fields, and msg as the rest of the line.
struct Record {
  std::map<std::string, std::string> fields;
  std::string msg;
  std::string line;

  std::string operator[](const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? "" : it->second;
  }
  int rank() const { return std::atoi((*this)["rank"].c_str()); }
  long long number(const std::string& key) const { return std::atoll((*this)[key].c_str()); }
};

inline Record parseRecord(const std::string& line) {
  Record r;
  r.line = line;
  std::string head = line;
  auto m = line.find(" msg=");
  if (m != std::string::npos) {
    head = line.substr(0, m);
    r.msg = line.substr(m + 5);
  }
  std::istringstream in(head);
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos) r.fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return r;
}

// Every line of out that starts with word (after the tag), parsed.
inline std::vector<Record> records(const std::string& out, const std::string& word) {
  std::vector<Record> result;
  for (const auto& raw : splitLines(out)) {
    std::string line = untagged(raw);
    if (line.rfind(word + " ", 0) == 0) result.push_back(parseRecord(line));
  }
  return result;
}

// The RESULT lines of one case, by rank.
inline std::map<int, Record> resultsOf(const std::string& out, const std::string& caseName) {
  std::map<int, Record> result;
  for (auto& r : records(out, "RESULT")) {
    if (r["case"] == caseName) result[r.rank()] = r;
  }
  return result;
}

}  // namespace chorus::mp
