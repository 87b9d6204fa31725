// Real multi-process runs through chorus-run of tests/multiproc/programs/mp_worker.cc (the C
// API): correct results on every rank, a rank killed mid-operation, a rank that leaves early,
// mismatched calls, invalid arguments and garbage on the ranks' ports and on the store.
#include "multiproc/mp_util.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

namespace chorus::mp {
namespace {

using namespace std::chrono_literals;

const std::string kWorker = CHORUS_TEST_BIN_DIR "/mp_worker";
constexpr int kTimeoutSeconds = 5;  // CHORUS_TIMEOUT of every run

// chorus-run -n N --timeout 5 --tag-output --grace 20 -- mp_worker ARGS..., killed at limit. The
// workers ignore SIGTERM, so they still report after chorus-run saw another rank fail.
RunResult runWorker(int n, const std::vector<std::string>& args,
                    Clock::duration limit = std::chrono::seconds(30)) {
  std::vector<std::string> all = {
      "-n",           std::to_string(n), "--timeout", std::to_string(kTimeoutSeconds),
      "--tag-output", "--grace",         "20",        "--",
      kWorker};
  all.insert(all.end(), args.begin(), args.end());
  return runLauncher(all, limit);
}

std::string show(const RunResult& r) {
  return "exit " + std::to_string(r.exitCode) + " after " + std::to_string(r.seconds) +
         " s\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message names the failed peer as "rank K (ip:port)", directly or inside a
// "rank X failed: ..." chain (a rank's own rank appears as "(rank R)" without an address).
bool namesPeer(const std::string& msg, int peer) {
  return std::regex_search(
      msg, std::regex("rank " + std::to_string(peer) + R"( \(\d+\.\d+\.\d+\.\d+:\d+\))"));
}

// "allreduce #12 (rank 3): ...": the operation, its sequence number and the reporting rank.
bool startsWithOp(const std::string& msg, const std::string& op, int rank) {
  return std::regex_search(
      msg, std::regex("^" + op + R"( #\d+ \(rank )" + std::to_string(rank) + R"(\): )"));
}

class MultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& path : {launcherPath(), kWorker}) {
      ASSERT_EQ(access(path.c_str(), X_OK), 0)
          << path << " is missing: build the chorus-run and mp_worker targets";
    }
  }
};

// ---- correct results ----

class CorrectTest : public MultiProcessTest, public ::testing::WithParamInterface<int> {};

TEST_P(CorrectTest, EveryCollectiveIsBitExactOnEveryRank) {
  const int n = GetParam();
  auto r = runWorker(n, {"correct"}, 60s);
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 0) << show(r);
  auto results = resultsOf(r.out, "correct");
  ASSERT_EQ(results.size(), static_cast<size_t>(n)) << show(r);
  std::set<std::string> hashes;
  for (const auto& [rank, rec] : results) {
    EXPECT_EQ(rec["status"], "CHORUS_OK") << rec.line;
    EXPECT_EQ(rec["wrong"], "0") << rec.line;
    EXPECT_EQ(rec["identical"], "1") << rec.line;
    EXPECT_GT(rec.number("checks"), 200) << rec.line;
    hashes.insert(rec["hash"]);
  }
  EXPECT_EQ(hashes.size(), 1u) << show(r);
  EXPECT_FALSE(contains(r.out, "WRONG ")) << show(r);
  EXPECT_FALSE(contains(r.out, "FATAL ")) << show(r);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CorrectTest, ::testing::Values(1, 2, 3, 5),
                         [](const auto& p) { return "n" + std::to_string(p.param); });

// ---- peer failures ----

// The survivors' second call is refused with the first failure as its cause, and
// chorus_comm_destroy returns promptly.
void expectAbortedAfter(const RunResult& r, int rank, const std::string& firstMsg) {
  auto next = resultsOf(r.out, "next");
  ASSERT_TRUE(next.count(rank)) << "rank " << rank << "\n" << show(r);
  EXPECT_EQ(next.at(rank)["status"], "CHORUS_ERR_ABORTED") << next.at(rank).line;
  EXPECT_TRUE(startsWithOp(next.at(rank).msg, "allreduce", rank)) << next.at(rank).line;
  EXPECT_TRUE(contains(next.at(rank).msg, "communicator was aborted earlier: " + firstMsg))
      << next.at(rank).line;
  auto destroyed = resultsOf(r.out, "destroy");
  ASSERT_TRUE(destroyed.count(rank)) << "rank " << rank << "\n" << show(r);
  EXPECT_LT(destroyed.at(rank).number("destroy_ms"), 2000) << destroyed.at(rank).line;
}

std::set<std::string> sharedMemoryFiles() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

// Over TCP, and over shared memory (the default between ranks of one host): a SIGKILLed rank
// cannot say goodbye, yet every other rank fails promptly, and nothing is left in /dev/shm.
class KillTest : public MultiProcessTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(KillTest, RankKilledMidAllReduceFailsEveryOtherRankPromptly) {
  const int n = 4, victim = 2;
  const auto shmBefore = sharedMemoryFiles();
  setenv("CHORUS_TRANSPORT", GetParam(), 1);
  auto r = runWorker(n, {"kill", std::to_string(victim), "16", "300"}, 40s);
  unsetenv("CHORUS_TRANSPORT");
  EXPECT_EQ(sharedMemoryFiles(), shmBefore) << "files left in /dev/shm";
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << show(r);
  EXPECT_TRUE(contains(r.err, "chorus-run: rank 2 (pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, "was killed by signal 9")) << r.err;

  auto kills = records(r.out, "KILL");
  ASSERT_EQ(kills.size(), 1u) << show(r);
  const long long killedAt = kills[0].number("mono_ms");
  auto first = resultsOf(r.out, "first");
  EXPECT_EQ(first.count(victim), 0u) << show(r);
  for (int rank = 0; rank < n; ++rank) {
    if (rank == victim) continue;
    ASSERT_TRUE(first.count(rank)) << "no result from rank " << rank << "\n" << show(r);
    const Record& rec = first.at(rank);
    EXPECT_TRUE(rec["status"] == "CHORUS_ERR_PEER_FAILURE" || rec["status"] == "CHORUS_ERR_TIMEOUT")
        << rec.line;
    EXPECT_TRUE(startsWithOp(rec.msg, "allreduce", rank)) << rec.line;
    EXPECT_TRUE(namesPeer(rec.msg, victim)) << "the message must name the killed rank:\n"
                                            << show(r);
    const long long detectMs = rec.number("detect_mono_ms") - killedAt;
    EXPECT_GE(detectMs, 0) << rec.line;
    // The kernel closes a dead process's sockets: no rank needs to wait for its timeout.
    EXPECT_LE(detectMs, 3000) << rec.line;
    expectAbortedAfter(r, rank, rec.msg);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, KillTest, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// The same for reduce, all-to-all and all-gather-v, over shared memory: ranks that do not talk
// to the killed one directly learn it from those that do.
class KillOtherCollectiveTest : public MultiProcessTest,
                                public ::testing::WithParamInterface<const char*> {};

TEST_P(KillOtherCollectiveTest, RankKilledMidCallFailsEveryOtherRankPromptly) {
  const int n = 4, victim = 2;
  const std::string op = GetParam();
  auto r = runWorker(n, {"kill", std::to_string(victim), "16", "300", "1000", op}, 40s);
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 128 + SIGKILL) << show(r);
  auto kills = records(r.out, "KILL");
  ASSERT_EQ(kills.size(), 1u) << show(r);
  const long long killedAt = kills[0].number("mono_ms");
  auto first = resultsOf(r.out, "first");
  for (int rank = 0; rank < n; ++rank) {
    if (rank == victim) continue;
    ASSERT_TRUE(first.count(rank)) << "no result from rank " << rank << "\n" << show(r);
    const Record& rec = first.at(rank);
    EXPECT_EQ(rec["status"], "CHORUS_ERR_PEER_FAILURE") << rec.line;
    EXPECT_TRUE(startsWithOp(rec.msg, op, rank)) << rec.line;
    EXPECT_TRUE(namesPeer(rec.msg, victim)) << "the message must name the killed rank:\n"
                                            << show(r);
    EXPECT_LE(rec.number("detect_mono_ms") - killedAt, 3000) << rec.line;
    expectAbortedAfter(r, rank, rec.msg);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, KillOtherCollectiveTest,
                         ::testing::Values("reduce", "all_to_all", "all_gather_v"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

TEST_F(MultiProcessTest, RankThatLeavesEarlyFailsTheOthersPromptly) {
  const int n = 4, leaver = 2;
  auto r = runWorker(n, {"exit-early", std::to_string(leaver)});
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 1) << show(r);
  auto left = resultsOf(r.out, "leave");
  ASSERT_TRUE(left.count(leaver)) << show(r);
  EXPECT_EQ(left.at(leaver)["status"], "CHORUS_OK");
  EXPECT_LT(left.at(leaver).number("destroy_ms"), 2000) << left.at(leaver).line;
  auto first = resultsOf(r.out, "first");
  for (int rank = 0; rank < n; ++rank) {
    if (rank == leaver) continue;
    ASSERT_TRUE(first.count(rank)) << "no result from rank " << rank << "\n" << show(r);
    const Record& rec = first.at(rank);
    EXPECT_EQ(rec["status"], "CHORUS_ERR_PEER_FAILURE") << rec.line;
    EXPECT_TRUE(startsWithOp(rec.msg, "allreduce", rank)) << rec.line;
    EXPECT_TRUE(namesPeer(rec.msg, leaver)) << "the message must name the rank that left:\n"
                                            << show(r);
    // Well before CHORUS_TIMEOUT: the close is noticed, not waited out.
    const long long detectMs =
        rec.number("detect_mono_ms") - left.at(leaver).number("left_mono_ms");
    EXPECT_GE(detectMs, 0) << rec.line;
    EXPECT_LT(detectMs, 3000) << rec.line;
    expectAbortedAfter(r, rank, rec.msg);
  }
}

// ---- mismatched calls ----

struct MismatchCase {
  std::string kind;          // mp_worker mode mismatch-<kind>
  std::string who;           // "one" (rank 1) or "odd" (every odd rank)
  std::string mine, theirs;  // how the two calls are described
};

void PrintTo(const MismatchCase& c, std::ostream* os) { *os << c.kind << "/" << c.who; }

class MismatchTest : public MultiProcessTest, public ::testing::WithParamInterface<MismatchCase> {};

TEST_P(MismatchTest, EveryRankGetsMismatchNamingBothCallsThenAborted) {
  const auto& p = GetParam();
  const int n = 4;
  auto r = runWorker(n, {"mismatch-" + p.kind, p.who});
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 1) << show(r);
  EXPECT_TRUE(records(r.out, "FATAL").empty()) << show(r);
  auto first = resultsOf(r.out, "first");
  ASSERT_EQ(first.size(), static_cast<size_t>(n)) << show(r);
  auto next = resultsOf(r.out, "next");
  for (const auto& [rank, rec] : first) {
    if (rec["status"] != "CHORUS_ERR_MISMATCH") {
      ADD_FAILURE() << "rank " << rank << " did not get CHORUS_ERR_MISMATCH:\n"
                    << rec.line << "\nits next call:\n"
                    << next[rank].line;
      continue;
    }
    // The call this rank made is sequence number 2 (after a barrier and an all-reduce).
    EXPECT_TRUE(std::regex_search(rec.msg, std::regex(R"(^(allreduce|broadcast) #2 \(rank )" +
                                                      std::to_string(rank) + R"(\): )")))
        << rec.line;
    EXPECT_TRUE(contains(rec.msg, "mismatched collectives")) << rec.line;
    EXPECT_TRUE(contains(rec.msg, p.mine)) << rec.line;
    EXPECT_TRUE(contains(rec.msg, p.theirs)) << rec.line;
    ASSERT_TRUE(next.count(rank)) << show(r);
    EXPECT_EQ(next.at(rank)["status"], "CHORUS_ERR_ABORTED") << next.at(rank).line;
    EXPECT_TRUE(contains(next.at(rank).msg, "communicator was aborted earlier: " + rec.msg))
        << next.at(rank).line;
  }
}

std::vector<MismatchCase> mismatchCases() {
  std::vector<MismatchCase> cases;
  for (const std::string who : {"one", "odd"}) {
    cases.push_back(
        {"count", who, "allreduce(count=1000, f32, sum", "allreduce(count=1001, f32, sum"});
    cases.push_back(
        {"op", who, "allreduce(count=1000, f32, sum", "allreduce(count=1000, f32, max"});
    cases.push_back(
        {"dtype", who, "allreduce(count=1000, f32, max", "allreduce(count=1000, i32, max"});
    cases.push_back(
        {"collective", who, "allreduce(count=1000, f32, sum", "broadcast(count=1000, f32, root=0"});
    cases.push_back(
        {"root", who, "broadcast(count=1000, f32, root=0", "broadcast(count=1000, f32, root=1"});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Calls, MismatchTest, ::testing::ValuesIn(mismatchCases()),
                         [](const auto& p) { return p.param.kind + "_" + p.param.who; });

// ---- invalid arguments ----

TEST_F(MultiProcessTest, InvalidArgumentsAreRejectedAndStartNothing) {
  const int n = 3;
  auto r = runWorker(n, {"invalid"});
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 0) << show(r);
  // Calls without a communicator (or request) have nowhere to leave a message.
  const std::set<std::string> noComm = {"null-comm", "wait-null", "test-null"};
  std::map<int, int> perRank;
  for (const auto& rec : records(r.out, "RESULT")) {
    const std::string c = rec["case"];
    if (c == "valid") continue;
    ++perRank[rec.rank()];
    EXPECT_EQ(rec["status"], "CHORUS_ERR_INVALID_ARGUMENT") << rec.line;
    if (noComm.count(c)) continue;
    EXPECT_FALSE(rec.msg.empty()) << rec.line;
    // The message names the collective ("iallreduce-..." reports "allreduce: ...").
    std::string op = c.substr(0, c.find('-'));
    if (op[0] == 'i') op = op.substr(1);
    if (c != "iallreduce-null-request") {
      EXPECT_EQ(rec.msg.rfind(op + ": ", 0), 0u) << rec.line;
    }
  }
  // Rank 0 made every invalid call twice.
  ASSERT_EQ(perRank.size(), static_cast<size_t>(n)) << show(r);
  EXPECT_GT(perRank[1], 15) << show(r);
  EXPECT_EQ(perRank[0], 2 * perRank[1]) << show(r);
  EXPECT_EQ(perRank[2], perRank[1]) << show(r);
  auto valid = resultsOf(r.out, "valid");
  ASSERT_EQ(valid.size(), static_cast<size_t>(n)) << show(r);
  for (const auto& [rank, rec] : valid) {
    EXPECT_EQ(rec["status"], "CHORUS_OK") << rec.line;
    EXPECT_EQ(rec["right"], "1") << rec.line;
  }
}

// ---- garbage on the wire ----

TEST_F(MultiProcessTest, GarbageConnectionsAreDroppedAndTheJobCarriesOn) {
  const int n = 3;
  auto r = runWorker(n, {"garbage"});
  ASSERT_FALSE(r.overran);
  EXPECT_EQ(r.exitCode, 0) << show(r);
  auto collectives = resultsOf(r.out, "collectives");
  auto second = resultsOf(r.out, "second-communicator");
  ASSERT_EQ(collectives.size(), static_cast<size_t>(n)) << show(r);
  ASSERT_EQ(second.size(), static_cast<size_t>(n)) << show(r);
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_EQ(collectives[rank]["status"], "CHORUS_OK") << collectives[rank].line;
    EXPECT_EQ(collectives[rank]["right"], "1") << collectives[rank].line;
    // A new communicator needs the store (which got garbage too) and fresh connections.
    EXPECT_EQ(second[rank]["status"], "CHORUS_OK") << second[rank].line;
  }
  auto attacks = records(r.out, "ATTACK");
  ASSERT_EQ(attacks.size(), 1u) << show(r);
  EXPECT_GT(attacks[0].number("connections"), 50) << attacks[0].line;
  EXPECT_GE(attacks[0].number("rounds"), 1) << attacks[0].line;
}

}  // namespace
}  // namespace chorus::mp
