// chorus-doctor --live: verdicts from progress records written into a store by the test
// (docs/trace-format.md, "Progress record").
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chorus/store.hpp>

#include <string>

#include "diagnose.h"
#include "doctor_util.h"
#include "trace.h"

namespace chorus::doctor {
namespace {

constexpr int64_t kSecond = 1000000;

Store::Bytes bytes(const std::string& s) { return Store::Bytes(s.begin(), s.end()); }

struct Record {
  int rank;
  int64_t issued;
  int64_t completed;
  std::string state;
  int waitingOn = -1;
  int64_t lastProgressAgoUs = 0;
  int64_t publishedAgoUs = 500000;
};

// Registers the communicator as rank 0 does, then sets each rank's record.
void publish(Store& store, const std::string& comm, int size, const std::vector<Record>& records,
             int64_t now) {
  int64_t n = store.add("chorus/progress/count", 1);
  store.set("chorus/progress/comm/" + std::to_string(n),
            bytes(nlohmann::json{{"communicator", comm}, {"size", size}}.dump()));
  for (const auto& r : records) {
    nlohmann::json j = {{"format", "chorus-progress/1"},
                        {"communicator", comm},
                        {"rank", r.rank},
                        {"size", size},
                        {"host", "vm"},
                        {"pid", 100 + r.rank},
                        {"issued", r.issued},
                        {"completed", r.completed},
                        {"state", r.state},
                        {"last_progress_us", now - r.lastProgressAgoUs},
                        {"published_us", now - r.publishedAgoUs}};
    if (r.state == "idle") {
      j["current"] = nullptr;
    } else {
      j["current"] = {{"number", r.completed},
                      {"collective", "allreduce"},
                      {"waiting_on", r.waitingOn},
                      {"since_us", now - r.lastProgressAgoUs}};
    }
    store.set("chorus/progress/" + comm + "/" + std::to_string(r.rank), bytes(j.dump()));
  }
}

// Rank 2 has not issued allreduce #9 for 12.3 s; in the ring 3 waits for 2, 0 for 3, 1 for 0.
std::vector<Record> stuckAtNine() {
  return {{0, 10, 9, "waiting", 3, 12000000},
          {1, 10, 9, "waiting", 0, 12000000},
          {2, 9, 9, "idle", -1, 12300000},
          {3, 10, 9, "waiting", 2, 12000000}};
}

std::vector<Finding> diagnose(Store& store, int64_t now) {
  auto records = readProgress(store, std::chrono::seconds(1));
  EXPECT_TRUE(records.problems.empty());
  return diagnoseLive(records, now, LiveOptions{});
}

TEST(DoctorLive, NamesTheRankThatHasNotIssuedTheCall) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  publish(*store, "3f2a9c01d4e5b6a7", 4, stuckAtNine(), now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "hang");
  EXPECT_EQ(findings[0].verdict,
            "rank 2 has not issued allreduce #9 for 12.3 s; ranks 0, 1, 3 wait in it for rank 2 "
            "(no progress for 12.0 s)");
  EXPECT_EQ(findings[0].details["culprits"], nlohmann::json::array({2}));
}

TEST(DoctorLive, AStaleRecordIsASuspect) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  // Everyone waits in #9; rank 1 stopped publishing 30 s ago while in it.
  publish(*store, "00000000000000aa", 3,
          {{0, 10, 9, "waiting", 1, 20 * kSecond},
           {1, 10, 9, "started", -1, 30 * kSecond, 30 * kSecond},
           {2, 10, 9, "waiting", 1, 20 * kSecond}},
          now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].verdict,
            "all ranks are in allreduce #9; ranks 0 and 2 wait for rank 1, which is running it and "
            "waits for no one; rank 1 stopped publishing 30.0 s ago (no progress for 20.0 s)");
  EXPECT_NE(findings[0].evidence[1].find("(stale: it stopped publishing)"), std::string::npos);
}

TEST(DoctorLive, AStaleRankInARingOfWaitersIsTheCulprit) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  // Rank 2 was cut off (a network partition) while in the ring's #9: its last record says it
  // waits for rank 1, as rank 3 waits for it; following that wait round the ring would blame
  // whichever rank closes the cycle (rank 1).
  publish(*store, "00000000000000ab", 4,
          {{0, 10, 9, "waiting", 3, 8 * kSecond},
           {1, 10, 9, "waiting", 0, 8 * kSecond},
           {2, 10, 9, "waiting", 1, 8 * kSecond, 8 * kSecond},
           {3, 10, 9, "waiting", 2, 8 * kSecond}},
          now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].details["culprits"], nlohmann::json::array({2}));
  EXPECT_EQ(findings[0].verdict,
            "all ranks are in allreduce #9; rank 2 waits for rank 1 by its last record, which is "
            "out of date; rank 3 waits for rank 2 (some waits form a cycle); rank 2 stopped "
            "publishing 8.0 s ago (no progress for 8.0 s)");
}

TEST(DoctorLive, AStaleWaiterOfAPeerThatCompletedIsTheCulprit) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  // Ranks 0-2 completed #9 and wait in #10; rank 3 stopped publishing while it waited for rank 2
  // in #9 (frozen, or cut off): not rank 2, which has completed the call.
  publish(*store, "00000000000000ac", 4,
          {{0, 11, 10, "waiting", 3, 6 * kSecond},
           {1, 11, 10, "waiting", 0, 6 * kSecond},
           {2, 11, 10, "waiting", 1, 6 * kSecond},
           {3, 10, 9, "waiting", 2, 6 * kSecond, 6 * kSecond}},
          now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].details["culprits"], nlohmann::json::array({3}));
}

TEST(DoctorLive, AStaleRankAmongRanksThatWaitForNoOneIsTheCulprit) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  // Everyone is in #9 and none waits (ranks 0 and 2 are blocked sending to rank 1, whose link is
  // down); rank 1 stopped publishing.
  publish(*store, "00000000000000af", 3,
          {{0, 10, 9, "started", -1, 6 * kSecond},
           {1, 10, 9, "started", -1, 7 * kSecond, 7 * kSecond},
           {2, 10, 9, "started", -1, 6 * kSecond}},
          now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].details["culprits"], nlohmann::json::array({1}));
  EXPECT_EQ(findings[0].verdict,
            "all ranks are in allreduce #9 and none waits for a peer; rank 1 stopped publishing "
            "7.0 s ago (no progress for 6.0 s)");
}

TEST(DoctorLive, ACommunicatorReplacedByAShrinkHasEnded) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  // The job's first communicator: every record stale since the membership change that replaced
  // it (its last picture looks like a hang); the new one, registered after it, trains.
  publish(*store, "00000000000000ad", 3,
          {{0, 10, 9, "waiting", 1, 40 * kSecond, 40 * kSecond},
           {1, 10, 9, "waiting", 2, 40 * kSecond, 40 * kSecond},
           {2, 9, 9, "idle", -1, 41 * kSecond, 41 * kSecond}},
          now);
  publish(*store, "00000000000000ae", 2, {{0, 7, 7, "idle"}, {1, 7, 7, "idle"}}, now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].kind, "healthy");
  EXPECT_EQ(findings[0].verdict.rfind("ended: no rank has published for 40.0 s", 0), 0u)
      << findings[0].verdict;
  EXPECT_EQ(mostSevere(findings).kind, "healthy");  // the job's verdict: no problem
  // Alone, the same records are a hang: nothing says the job went on.
  auto alone = makeHashStore();
  publish(*alone, "00000000000000ad", 3,
          {{0, 10, 9, "waiting", 1, 40 * kSecond, 40 * kSecond},
           {1, 10, 9, "waiting", 2, 40 * kSecond, 40 * kSecond},
           {2, 9, 9, "idle", -1, 41 * kSecond, 41 * kSecond}},
          now);
  EXPECT_EQ(diagnose(*alone, now)[0].kind, "hang");
}

TEST(DoctorLive, HealthyAndProgressingJobs) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  publish(*store, "00000000000000bb", 3,
          {{0, 12, 12, "idle"}, {1, 12, 12, "idle"}, {2, 12, 12, "idle"}}, now);
  // A job in the middle of a call that made progress 0.1 s ago is not hung.
  publish(*store, "00000000000000cc", 2,
          {{0, 5, 4, "waiting", 1, 100000}, {1, 5, 4, "started", -1, 100000}}, now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].verdict, "no problem found (3 ranks, 12 collectives completed, all idle)");
  EXPECT_EQ(findings[1].verdict,
            "no problem found (2 ranks, 4 collectives completed, last progress 0.1 s ago)");
}

TEST(DoctorLive, MissingRecordsAreStated) {
  auto store = makeHashStore();
  const int64_t now = nowUs();
  // Rank 1 never published; rank 0 waits for it.
  publish(*store, "00000000000000dd", 2, {{0, 3, 2, "waiting", 1, 10 * kSecond}}, now);
  auto findings = diagnose(*store, now);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].verdict,
            "rank 1 published no progress record; rank 0 waits in it for rank 1 (no progress for "
            "10.0 s)");
  EXPECT_EQ(findings[0].ranksMissing, std::vector<int>{1});
}

TEST(DoctorLive, ToolReadsAFileStore) {
  test::ScratchDir dir;
  auto store = makeFileStore(dir.path());
  publish(*store, "3f2a9c01d4e5b6a7", 4, stuckAtNine(), nowUs());
  auto r = test::runDoctor("--live --store file://" + dir.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.firstLine().rfind("verdict: rank 2 has not issued allreduce #9 for 12.", 0), 0u)
      << r.out;
  EXPECT_NE(r.firstLine().find("; ranks 0, 1, 3 wait in it for rank 2"), std::string::npos);
  auto j = nlohmann::json::parse(test::runDoctor("--live --json --store file://" + dir.path()).out);
  EXPECT_EQ(j["kind"], "hang");
  // An empty store: no records, said so, exit 2.
  test::ScratchDir empty;
  auto none = test::runDoctor("--live --store file://" + empty.path());
  EXPECT_EQ(none.status, 2);
  EXPECT_EQ(none.firstLine().rfind("verdict: no progress records", 0), 0u) << none.out;
}

}  // namespace
}  // namespace chorus::doctor
