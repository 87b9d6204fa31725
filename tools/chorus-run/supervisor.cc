#include "supervisor.h"

#include <algorithm>
#include <thread>

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace chorus::launcher {
namespace {

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

// A rank that prints without pause must not starve the others or the signal handling, so the
// poll loop reads a little from each stream per wakeup. A pipe holds at most a few MiB: that
// many reads empty it once its writer has exited (descendants still writing are cut off).
constexpr size_t kReadBytes = 64 * 1024;
constexpr int kReadsPerWakeup = 4;
constexpr int kReadsToEmpty = 256;

sigset_t handledSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int sig : kForwardedSignals) sigaddset(&set, sig);
  return set;
}

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string ranksWord(int n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

// One write per message, so that it never splits a line of tagged output.
void report(const std::string& message) {
  writeAll(STDERR_FILENO, "chorus-run: " + message + "\n");
}

}  // namespace

void Supervisor::setUpSignals() {
  sigset_t set = handledSignals();
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    throw std::system_error(errno, std::generic_category(), "sigprocmask");
  }
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the launcher and orphan the ranks
}

Supervisor::Supervisor(bool tagOutput, double graceSeconds)
    : tagOutput_(tagOutput),
      grace_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(graceSeconds))) {
  sigset_t set = handledSignals();
  signalFd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signalFd_ < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
}

Supervisor::~Supervisor() {
  for (auto& stream : streams_) closeStream(stream);
  if (signalFd_ >= 0) close(signalFd_);
}

void Supervisor::add(const RankProcess& process) {
  ranks_.push_back(Rank{process});
  ++live_;
  std::string prefix = "[" + std::to_string(process.rank) + "] ";
  if (process.outFd >= 0)
    streams_.push_back({process.rank, process.outFd, {STDOUT_FILENO, prefix}});
  if (process.errFd >= 0)
    streams_.push_back({process.rank, process.errFd, {STDERR_FILENO, prefix}});
}

void Supervisor::abort(int exitCode) {
  setExitCode(exitCode);
  if (live_ > 0 && !stopping_) {
    report("stopping the " + ranksWord(live_) + " already started");
    beginStop(SIGTERM);
  }
}

int Supervisor::run() {
  std::vector<pollfd> fds;
  std::vector<Stream*> polled;
  for (runDeferred(); live_ > 0; runDeferred()) {
    fds.assign(1, pollfd{signalFd_, POLLIN, 0});
    polled.clear();
    for (auto& stream : streams_) {
      if (stream.fd < 0) continue;
      fds.push_back(pollfd{stream.fd, POLLIN, 0});
      polled.push_back(&stream);
    }
    int timeoutMs = -1;
    if (stopping_ && !killed_) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(killAt_ - Clock::now());
      timeoutMs = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    if (tick_) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(nextTick_ - Clock::now());
      int tickMs = static_cast<int>(std::max<int64_t>(0, left.count()));
      timeoutMs = timeoutMs < 0 ? tickMs : std::min(timeoutMs, tickMs);
    }
    if (poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (fds[0].revents != 0) handleSignals();
    for (size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 1].revents != 0 && polled[i]->fd >= 0) drain(*polled[i], kReadsPerWakeup);
    }
    if (stopping_ && !killed_ && Clock::now() >= killAt_) killRemaining();
    if (tick_ && live_ > 0 && Clock::now() >= nextTick_) {
      tick_();
      nextTick_ = Clock::now() + tickPeriod_;
    }
  }
  // Whatever the ranks wrote last; a descendant still holding a pipe is not waited for.
  for (auto& stream : streams_) {
    if (stream.fd >= 0) drain(stream, kReadsToEmpty);
    stream.tagger.flush();
    closeStream(stream);
  }
  return exitCode_ < 0 ? 0 : exitCode_;
}

void Supervisor::setTick(std::chrono::milliseconds period, std::function<void()> tick) {
  tickPeriod_ = period;
  tick_ = std::move(tick);
  nextTick_ = Clock::now() + period;
}

void Supervisor::signalAll(int sig) {
  for (auto& rank : ranks_) {
    if (rank.alive) kill(rank.process.pid, sig);
  }
}

const RankProcess* Supervisor::liveProcess(int rank) const {
  for (const auto& r : ranks_) {
    if (r.alive && r.process.rank == rank) return &r.process;
  }
  return nullptr;
}

std::vector<RankProcess> Supervisor::liveProcesses() const {
  std::vector<RankProcess> out;
  for (const auto& r : ranks_) {
    if (r.alive) out.push_back(r.process);
  }
  return out;
}

void Supervisor::stopAll(int exitCode, const std::string& why) {
  if (stopping_) return;
  // Also when no rank is left (the last one just failed): the job still failed.
  setExitCode(exitCode);
  if (live_ == 0) {
    report(why);
    return;
  }
  report(why + "; stopping the " + ranksWord(live_));
  beginStop(SIGTERM);
}

void Supervisor::handleSignals() {
  signalfd_siginfo info;
  while (read(signalFd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (info.ssi_signo == SIGCHLD) {
      reapChildren();  // SIGCHLDs coalesce: reap everything that has exited
    } else {
      onLauncherSignal(static_cast<int>(info.ssi_signo));
    }
  }
}

void Supervisor::reapChildren() {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (auto& rank : ranks_) {
      if (rank.process.pid != pid || !rank.alive) continue;
      rank.alive = false;
      --live_;
      // Relay its last output before any message about how it ended.
      for (auto& stream : streams_) {
        if (stream.rank == rank.process.rank && stream.fd >= 0) drain(stream, kReadsToEmpty);
      }
      onRankExit(rank, status);
      break;  // the rank is found; onRankExit may have queued a replacement
    }
  }
}

void Supervisor::runDeferred() {
  // Each start runs once, in order; none while the job is stopping (its ranks would be stopped).
  while (!deferred_.empty()) {
    auto start = std::move(deferred_.front());
    deferred_.erase(deferred_.begin());
    if (!stopping_) start();
  }
}

void Supervisor::onRankExit(Rank& rank, int waitStatus) {
  if (WIFEXITED(waitStatus) && WEXITSTATUS(waitStatus) == 0) {
    ++succeeded_;
    return;  // others may still run
  }
  if (stopping_) return;  // expected: we are stopping it
  if (failureHandler_) {
    failureHandler_(rank.process, waitStatus);
    return;
  }
  std::vector<std::pair<const Rank*, int>> failed{{&rank, waitStatus}};
  // A rank that exits with an error is often reacting to another that died a moment earlier
  // (its peers see the sockets close before we see the death): give such a death a moment to be
  // reaped, so the report names the cause, not the first survivor that gave up.
  if (!WIFSIGNALED(waitStatus)) collectExits(failed, std::chrono::milliseconds(300));
  auto cause = std::find_if(failed.begin(), failed.end(),
                            [](const auto& f) { return WIFSIGNALED(f.second); });
  if (cause == failed.end()) cause = failed.begin();
  std::iter_swap(failed.begin(), cause);
  const int causeStatus = failed.front().second;
  setExitCode(WIFEXITED(causeStatus) ? WEXITSTATUS(causeStatus) : 128 + WTERMSIG(causeStatus));
  if (explainFailure_ && !WIFSIGNALED(causeStatus)) {
    const std::string verdict = explainFailure_();
    if (!verdict.empty()) report("verdict: " + verdict);
  }
  for (size_t i = 0; i < failed.size(); ++i) {
    const RankProcess& p = failed[i].first->process;
    std::string message = "rank " + std::to_string(p.rank) + " (pid " + std::to_string(p.pid) +
                          ") " + describeExit(failed[i].second);
    if (i + 1 == failed.size() && live_ > 0) message += "; stopping the other " + ranksWord(live_);
    report(message);
  }
  if (live_ > 0) beginStop(SIGTERM);
}

void Supervisor::collectExits(std::vector<std::pair<const Rank*, int>>& failed,
                              std::chrono::milliseconds window) {
  auto until = Clock::now() + window;
  while (live_ > 0 && Clock::now() < until) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    for (auto& r : ranks_) {
      if (r.process.pid != pid || !r.alive) continue;
      r.alive = false;
      --live_;
      for (auto& stream : streams_) {
        if (stream.rank == r.process.rank && stream.fd >= 0) drain(stream, kReadsToEmpty);
      }
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        ++succeeded_;
      } else {
        failed.emplace_back(&r, status);
      }
    }
  }
}

void Supervisor::onLauncherSignal(int sig) {
  if (!stopping_) {
    setExitCode(128 + sig);
    report("received " + signalName(sig) + "; forwarding it to " + ranksWord(live_));
    beginStop(sig);
  } else if (!killed_) {
    // A second Ctrl-C: the user does not want to wait for the grace period.
    report("received " + signalName(sig) + " while stopping; killing the remaining " +
           ranksWord(live_));
    killRemaining();
  }
}

void Supervisor::beginStop(int sig) {
  stopping_ = true;
  stopSignal_ = sig;
  killAt_ = Clock::now() + grace_;
  for (auto& rank : ranks_) {
    if (!rank.alive) continue;
    signalRank(rank.process, sig);
    signalRank(rank.process, SIGCONT);  // a stopped rank (e.g. SIGTTIN) must see it too
  }
}

void Supervisor::killRemaining() {
  killed_ = true;
  char grace[32];
  std::snprintf(grace, sizeof grace, "%g s", std::chrono::duration<double>(grace_).count());
  for (auto& rank : ranks_) {
    if (!rank.alive) continue;
    report("rank " + std::to_string(rank.process.rank) + " (pid " +
           std::to_string(rank.process.pid) + ") still running " + grace + " after " +
           signalName(stopSignal_) + "; sending SIGKILL");
    signalRank(rank.process, SIGKILL);
  }
}

void Supervisor::drain(Stream& stream, int maxReads) {
  char buffer[kReadBytes];
  for (int reads = 0; reads < maxReads;) {
    ssize_t n = read(stream.fd, buffer, sizeof buffer);
    if (n > 0) {
      ++reads;
      stream.tagger.write(std::string_view(buffer, static_cast<size_t>(n)));
      if (stream.tagger.broken()) {
        // Nobody reads this output any more: closing the pipe gives the rank the SIGPIPE it
        // would get writing there directly (as in "chorus-run ... | head").
        closeStream(stream);
        return;
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n == 0 || errno != EAGAIN) {
        stream.tagger.flush();  // end of stream: its unfinished last line goes out now
        closeStream(stream);
      }
      return;
    }
  }
}

void Supervisor::closeStream(Stream& stream) {
  if (stream.fd >= 0) close(stream.fd);
  stream.fd = -1;
}

void Supervisor::setExitCode(int code) {
  if (exitCode_ < 0) exitCode_ = code;
}

}  // namespace chorus::launcher
