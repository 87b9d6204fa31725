// Runs chorus-run on tests/multiproc/programs/launcher_probe.cc and checks the environment it
// gives the ranks, how it reports and stops failures, signal forwarding and tagged output.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::string kLauncher = CHORUS_BIN_DIR "/chorus-run/chorus-run";
const std::string kProbe = CHORUS_TEST_BIN_DIR "/launcher_probe";

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Result {
  int exitCode = -1;  // exit status, or 128+N when killed by signal N
  std::string out;
  std::string err;
  double seconds = 0;  // from start to exit
};

// One run of chorus-run with its stdout and stderr captured. Every wait has a deadline: on
// overrun the launcher is SIGKILLed (its ranks die with it) and the test fails.
class Launch {
 public:
  explicit Launch(const std::vector<std::string>& args) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) std::abort();
    std::vector<std::string> argv = {kLauncher};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> ptrs;
    for (auto& a : argv) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    start_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      execv(kLauncher.c_str(), ptrs.data());
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

  const std::string& out() const { return text_[0]; }

  // Reads output until done(stdout) holds; false when limit passes first.
  bool waitForOutput(const std::function<bool(const std::string&)>& done,
                     Clock::duration limit = 10s) {
    auto deadline = Clock::now() + limit;
    while (!done(text_[0])) {
      if (Clock::now() >= deadline || (fds_[0] < 0 && fds_[1] < 0)) return false;
      pump(50);
    }
    return true;
  }

  void signal(int sig) { kill(pid_, sig); }

  // Waits for chorus-run to exit and collects all its output.
  Result finish(Clock::duration limit = 15s) {
    auto deadline = Clock::now() + limit;
    Result result;
    int status = 0;
    while (true) {
      pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) break;
      if (Clock::now() >= deadline) {
        ADD_FAILURE() << "chorus-run still running after the test's time limit; killing it";
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      pump(20);
    }
    result.seconds = secondsSince(start_);
    pid_ = -1;
    // Its ranks are gone with it, so the pipes reach end of file at once.
    auto drainDeadline = Clock::now() + 2s;
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
      usleep(timeoutMs * 1000);
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

Result runLauncher(const std::vector<std::string>& args) { return Launch(args).finish(); }

// "key=value key=value" fields of one line.
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> result;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos) result[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return result;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> result;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) result.push_back(line);
  return result;
}

// Both programs are separate build targets that multiproc_tests does not depend on.
class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& path : {kLauncher, kProbe}) {
      ASSERT_EQ(access(path.c_str(), X_OK), 0)
          << path << " is missing: build the chorus-run and launcher_probe targets";
    }
  }
};

TEST_F(LauncherTest, GivesEveryRankItsEnvironment) {
  auto r = runLauncher({"-n", "4", "--timeout", "7", "--", kProbe, "env", "--flag", "x"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto outLines = lines(r.out);
  ASSERT_EQ(outLines.size(), 4u) << r.out;
  std::set<std::string> ranks, stores;
  for (const auto& line : outLines) {
    auto f = fields(line);
    ranks.insert(f["rank"]);
    stores.insert(f["store"]);
    EXPECT_EQ(f["world"], "4") << line;
    EXPECT_EQ(f["local_rank"], f["rank"]) << line;
    EXPECT_EQ(f["local_size"], "4") << line;
    EXPECT_EQ(f["timeout"], "7") << line;
    EXPECT_EQ(f["args"], "--flag,x") << line;  // options after "--" belong to the program
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores.begin()->rfind("tcp://127.0.0.1:", 0), 0u) << *stores.begin();
}

TEST_F(LauncherTest, PassesAGivenStoreUrl) {
  auto r = runLauncher({"-n", "2", "--store", "file:///tmp/chorus-run-test", "--", kProbe, "env"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(count(r.out, "store=file:///tmp/chorus-run-test "), 2) << r.out;
}

TEST_F(LauncherTest, HostedStoreConnectsTheRanks) {
  auto r = runLauncher({"-n", "3", "--", kProbe, "store"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(count(r.out, "store ok"), 3) << r.out;
}

TEST_F(LauncherTest, WaitsForRanksThatFinishLater) {
  auto r = runLauncher({"-n", "3", "--", kProbe, "staggered"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_GE(r.seconds, 0.45);
  EXPECT_EQ(r.err, "");
}

TEST_F(LauncherTest, ReportsAFailingRankAndStopsTheOthers) {
  auto r = runLauncher({"-n", "3", "--", kProbe, "exit-on", "1", "3"});
  EXPECT_EQ(r.exitCode, 3);
  EXPECT_NE(r.err.find("chorus-run: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") exited with status 3; stopping the other 2 ranks"), std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 4.0);  // the sleeping ranks die on the first SIGTERM
}

TEST_F(LauncherTest, ReportsARankKilledBySignal) {
  auto r = runLauncher({"-n", "4", "--", kProbe, "kill-on", "2"});
  EXPECT_EQ(r.exitCode, 128 + SIGKILL);
  EXPECT_NE(r.err.find("chorus-run: rank 2 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("was killed by signal 9 (Killed); stopping the other 3 ranks"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 4.0);
}

TEST_F(LauncherTest, ProgramMayComeWithoutDashes) {
  // No mode: the probe exits 64, which chorus-run reports and returns.
  auto r = runLauncher({"-n", "2", kProbe});
  EXPECT_EQ(r.exitCode, 64);
  EXPECT_NE(r.err.find("exited with status 64"), std::string::npos) << r.err;
}

void expectForwarded(int sig, const std::string& name) {
  Launch launch({"-n", "2", "--tag-output", "--", kProbe, "trap-term"});
  ASSERT_TRUE(launch.waitForOutput([](const std::string& out) { return count(out, "ready") == 2; }))
      << launch.out();
  launch.signal(sig);
  auto r = launch.finish();
  EXPECT_EQ(r.exitCode, 128 + sig);
  EXPECT_NE(r.out.find("[0] got " + name + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] got " + name + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("received " + name + "; forwarding it to 2 ranks"), std::string::npos)
      << r.err;
}

TEST_F(LauncherTest, ForwardsSigterm) { expectForwarded(SIGTERM, "SIGTERM"); }
TEST_F(LauncherTest, ForwardsSigint) { expectForwarded(SIGINT, "SIGINT"); }

TEST_F(LauncherTest, KillsARankIgnoringSigtermAfterTheGracePeriod) {
  Launch launch({"-n", "2", "--grace", "1", "--", kProbe, "ignore-term-on", "1"});
  ASSERT_TRUE(launch.waitForOutput([](const std::string& out) { return count(out, "ready") == 2; }))
      << launch.out();
  auto signalled = Clock::now();
  launch.signal(SIGTERM);
  auto r = launch.finish();
  double stopSeconds = secondsSince(signalled);
  EXPECT_EQ(r.exitCode, 128 + SIGTERM);
  EXPECT_NE(r.err.find("rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("still running 1 s after SIGTERM; sending SIGKILL"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("rank 0 (pid "), std::string::npos) << r.err;  // it stopped in time
  EXPECT_GE(stopSeconds, 0.9);
  EXPECT_LT(stopSeconds, 4.0);
}

TEST_F(LauncherTest, TagsEachLineWithItsRank) {
  auto r = runLauncher({"-n", "2", "--tag-output", "--", kProbe, "print"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  for (const char* rank : {"[0] ", "[1] "}) {
    std::string p = rank;
    EXPECT_NE(r.out.find(p + "line one\n" + p + "line two\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(p + "unterminated\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find(p + "an error line\n"), std::string::npos) << r.err;
  }
  auto outLines = lines(r.out);
  EXPECT_EQ(outLines.size(), 6u) << r.out;
  for (const auto& line : outLines) EXPECT_EQ(line.rfind("[", 0), 0u) << line;
}

TEST_F(LauncherTest, ReportsAProgramThatCannotBeExecuted) {
  auto r = runLauncher({"-n", "2", "--", "/nonexistent/chorus-program"});
  EXPECT_EQ(r.exitCode, 127);
  EXPECT_NE(r.err.find("cannot execute '/nonexistent/chorus-program': No such file or directory"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("exited with status 127"), std::string::npos) << r.err;
}

TEST_F(LauncherTest, UsageErrorsExitWithTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"--", kProbe, "env"},
      {"-n", "0", "--", kProbe, "env"},
      {"-n", "x", "--", kProbe, "env"},
      {"-n", "2"},
      {"-n", "2", "--"},
      {"-n", "2", "--bogus", "--", kProbe, "env"},
      {"-n", "2", kProbe, "--", kProbe},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += " " + a;
    auto r = runLauncher(args);
    EXPECT_EQ(r.exitCode, 2) << "chorus-run" << joined << "\n" << r.err;
    EXPECT_NE(r.err.find("chorus-run: "), std::string::npos) << joined << "\n" << r.err;
    EXPECT_EQ(r.out, "") << joined;  // no rank was started
  }
}

TEST_F(LauncherTest, HelpExitsWithZero) {
  auto r = runLauncher({"--help"});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("--tag-output"), std::string::npos) << r.out;
}

}  // namespace
