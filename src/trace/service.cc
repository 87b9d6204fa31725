// The service thread, its registry and the signal handler.
#include "trace/service.h"

#include "trace/clock.h"
#include "trace/heartbeat.h"
#include "trace/json_out.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace chorus::trace {
namespace {

constexpr char kDumpByte = 'D';
constexpr char kWakeByte = 'W';

class Service {
 public:
  Service() {
    if (::pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) pipe_[0] = pipe_[1] = -1;
  }

  static Service& instance() {
    static Service* s = new Service;  // never destroyed: the detached thread may still run
    return *s;
  }

  void add(const std::shared_ptr<Subject>& subject) {
    std::lock_guard<std::mutex> lock(mu_);
    subjects_.push_back(subject);
    if (subject->settings.signal != 0) installSignal(subject->settings.signal);
    if (!running_) {
      running_ = true;
      std::thread([this] { loop(); }).detach();
    } else {
      poke(kWakeByte);  // a shorter period may now apply
    }
  }

  void remove(const Subject* subject) {
    std::lock_guard<std::mutex> lock(mu_);
    subjects_.erase(std::remove_if(subjects_.begin(), subjects_.end(),
                                   [&](const auto& s) { return s.get() == subject; }),
                    subjects_.end());
    poke(kWakeByte);
  }

  // From the signal handler: async-signal-safe.
  void poke(char byte) const noexcept {
    if (pipe_[1] >= 0) {
      [[maybe_unused]] ssize_t k = ::write(pipe_[1], &byte, 1);
    }
  }

 private:
  static void onSignal(int) {
    const int saved = errno;
    instance().poke(kDumpByte);
    errno = saved;
  }

  void installSignal(int signo) {
    if (signo == SIGUSR1 ? usr1_ : usr2_) return;
    (signo == SIGUSR1 ? usr1_ : usr2_) = true;
    struct sigaction sa {};
    sa.sa_handler = &Service::onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(signo, &sa, nullptr);
  }

  void loop() {
    for (;;) {
      std::vector<std::shared_ptr<Subject>> subjects;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (subjects_.empty()) {
          running_ = false;  // a later add() starts a new thread
          return;
        }
        subjects = subjects_;
      }
      const uint64_t now = wallMicros();
      uint64_t next = now + 1000000;  // look at the registry at least once a second
      for (auto& s : subjects) {
        if (!publishes(*s)) continue;
        if (now >= s->nextPublishUs) {
          publish(*s);
          checkHeartbeats(*s, now);
          s->nextPublishUs = now + static_cast<uint64_t>(publishPeriodSeconds(s->settings) * 1e6);
        }
        next = std::min(next, s->nextPublishUs);
      }
      const uint64_t after = wallMicros();
      pollfd p{pipe_[0], POLLIN, 0};
      const int ms = next > after ? static_cast<int>((next - after + 999) / 1000) : 0;
      if (::poll(&p, 1, ms) > 0) {
        char buf[64];
        bool dump = false;
        ssize_t k;
        while ((k = ::read(pipe_[0], buf, sizeof(buf))) > 0) {
          dump |= std::find(buf, buf + k, kDumpByte) != buf + k;
        }
        if (dump) dumpAll(subjects);
      }
    }
  }

  static bool publishes(const Subject& s) {
    return s.rootStore && s.recorder.enabled() && s.recorder.size() > 1 &&
           s.settings.progressSeconds > 0;
  }

  static void publish(Subject& s) {
    try {
      const std::string text = progressJson(s);
      s.rootStore->set("chorus/progress/" + s.id + "/" + std::to_string(s.recorder.rank()),
                       Store::Bytes(text.begin(), text.end()));
    } catch (...) {
      // A store that is gone or slow: dropped, tried again at the next period.
    }
  }

  static void dumpAll(const std::vector<std::shared_ptr<Subject>>& subjects) {
    for (auto& s : subjects) {
      if (!s->recorder.enabled() || s->settings.dir.empty()) continue;
      try {
        writeDump(*s, s->settings.dir, "signal", nullptr);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "chorus[%d]: %s\n", s->recorder.rank(), e.what());
      }
    }
  }

  int pipe_[2] = {-1, -1};
  std::mutex mu_;
  std::vector<std::shared_ptr<Subject>> subjects_;
  bool running_ = false;
  bool usr1_ = false, usr2_ = false;
};

}  // namespace

void watch(const std::shared_ptr<Subject>& subject) { Service::instance().add(subject); }
void unwatch(const Subject* subject) { Service::instance().remove(subject); }

}  // namespace chorus::trace
