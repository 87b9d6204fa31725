// Runs chorus-run on tests/multiproc/programs/launcher_probe.cc and checks the environment it
// gives the ranks, how it reports and stops failures, signal forwarding and tagged output.
#include "multiproc/mp_util.h"

#include <gtest/gtest.h>

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

using chorus::mp::Clock;
using namespace std::chrono_literals;

const std::string& kLauncher = chorus::mp::launcherPath();
const std::string kProbe = CHORUS_TEST_BIN_DIR "/launcher_probe";

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

using chorus::mp::Launch;
using chorus::mp::secondsSince;
using Result = chorus::mp::RunResult;

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
  std::set<std::string> ranks, stores, masters;
  for (const auto& line : outLines) {
    auto f = fields(line);
    ranks.insert(f["rank"]);
    stores.insert(f["store"]);
    masters.insert(f["master"]);
    // What torch.distributed's env:// reads, equal to Chorus's own variables.
    EXPECT_EQ(f["torch_rank"], f["rank"]) << line;
    EXPECT_EQ(f["torch_world"], "4") << line;
    EXPECT_EQ(f["torch_local_rank"], f["rank"]) << line;
    EXPECT_EQ(f["torch_local_world"], "4") << line;
    EXPECT_EQ(f["world"], "4") << line;
    EXPECT_EQ(f["local_rank"], f["rank"]) << line;
    EXPECT_EQ(f["local_size"], "4") << line;
    EXPECT_EQ(f["timeout"], "7") << line;
    EXPECT_EQ(f["args"], "--flag,x") << line;  // options after "--" belong to the program
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(stores.size(), 1u);
  EXPECT_EQ(stores.begin()->rfind("tcp://127.0.0.1:", 0), 0u) << *stores.begin();
  ASSERT_EQ(masters.size(), 1u);  // one MASTER_ADDR:MASTER_PORT for all, a port torch can bind
  const std::string master = *masters.begin();
  ASSERT_EQ(master.rfind("127.0.0.1:", 0), 0u) << master;
  int port = std::stoi(master.substr(std::string("127.0.0.1:").size()));
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_NE("tcp://" + master, *stores.begin());  // not the port of chorus-run's own store
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
