// chorus-doctor DIR on hand-written dumps (tests/doctor/fixtures, docs/trace-format.md): the
// verdict line of each case, the exit status, --json and --timeline.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "diagnose.h"
#include "doctor_util.h"
#include "trace.h"

namespace chorus::doctor {
namespace {

using test::fixture;
using test::runDoctor;

struct Case {
  const char* folder;
  const char* kind;
  const char* verdict;
};

const Case kCases[] = {
    {"hang", "hang",
     "verdict: rank 2 never entered allreduce #9; ranks 0, 1, 3 wait in it for rank 2"},
    {"all_in", "hang",
     "verdict: all ranks are in allreduce #9; ranks 0 and 3 wait for rank 1, which waits for rank "
     "2, which is running it and waits for no one"},
    {"missing_dump", "hang",
     "verdict: rank 2 left no dump and its peers heard nothing from it in allreduce #5; ranks 0 "
     "and 1 wait in it for rank 2"},
    {"relayed_timeout", "hang",
     "verdict: rank 2 left no dump and its peers heard nothing from it in allreduce #5; ranks 0 "
     "and 1 wait in it for rank 2"},
    {"mismatch", "mismatch",
     "verdict: ranks disagree at #7: rank 0 calls allreduce(f32, sum, 1024), rank 1 calls "
     "broadcast(f32, 1024, root 0)"},
    {"mismatch_count", "mismatch",
     "verdict: ranks disagree at #7: rank 0 calls allreduce(f32, sum, 1024), rank 1 calls "
     "allreduce(f32, sum, 512)"},
    {"lost", "lost_rank",
     "verdict: rank 3 was lost after completing allreduce #41 (ranks 0, 1, 2 report it)"},
    {"healthy", "healthy", "verdict: no problem found (3 ranks, last completed allreduce #3)"},
};

TEST(DoctorDumps, VerdictOfEachCase) {
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.folder);
    auto r = runDoctor(fixture(c.folder));
    EXPECT_EQ(r.firstLine(), c.verdict);
    EXPECT_EQ(r.status, std::string(c.kind) == "healthy" ? 0 : 1);
    // The library gives the same verdict the tool prints.
    auto findings = diagnoseDumps(loadDumps(fixture(c.folder)).dumps);
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_EQ(findings[0].kind, c.kind);
    EXPECT_EQ("verdict: " + findings[0].verdict, c.verdict);
  }
}

// Calls whose per-peer traffic the ranks did not follow (docs/trace-format.md, "Detail"): the
// verdicts claim nothing that only the traffic could show, and keep what the calls' states show.
TEST(DoctorDumps, UndetailedCallsClaimNothingAboutTraffic) {
  auto undetailed = [](const char* folder) {
    auto dumps = loadDumps(fixture(folder)).dumps;
    for (auto& d : dumps) {
      for (auto& e : d.entries) {
        e.detailed = false;
        e.peers.clear();
      }
    }
    auto findings = diagnoseDumps(dumps);
    return findings.size() == 1 ? findings[0].verdict : std::string("(no single finding)");
  };
  EXPECT_EQ(undetailed("missing_dump"),
            "rank 2 left no dump and its peers wait for it in allreduce #5; ranks 0 and 1 wait "
            "in it for rank 2");
  // A finished all-reduce had every rank's data, followed or not.
  EXPECT_EQ(undetailed("lost"),
            "rank 3 was lost after completing allreduce #41 (ranks 0, 1, 2 "
            "report it)");
  EXPECT_EQ(undetailed("hang"),
            "rank 2 never entered allreduce #9; ranks 0, 1, 3 wait in it for rank 2");
}

TEST(DoctorDumps, MissingDumpsAreCounted) {
  auto r = runDoctor(fixture("lost"));
  EXPECT_NE(r.out.find("3 of 4 seen, nothing from rank 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no dump from rank 3 (3 of 4 ranks dumped)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the oldest 38 are no longer in its dump"), std::string::npos) << r.out;
}

TEST(DoctorDumps, JsonParsesAndNamesTheCulprit) {
  auto r = runDoctor("--json " + fixture("hang"));
  EXPECT_EQ(r.status, 1);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "rank 2 never entered allreduce #9; ranks 0, 1, 3 wait in it for rank 2");
  EXPECT_EQ(j["kind"], "hang");
  ASSERT_EQ(j["communicators"].size(), 1u);
  const auto& c = j["communicators"][0];
  EXPECT_EQ(c["communicator"], "3f2a9c01d4e5b6a7");
  EXPECT_EQ(c["details"]["culprits"], nlohmann::json::array({2}));
  EXPECT_EQ(c["details"]["call"], "allreduce #9");
  EXPECT_EQ(c["ranks_seen"], nlohmann::json::array({0, 1, 2, 3}));

  auto lost = nlohmann::json::parse(runDoctor("--json " + fixture("lost")).out);
  EXPECT_EQ(lost["communicators"][0]["ranks_missing"], nlohmann::json::array({3}));
  EXPECT_EQ(lost["communicators"][0]["details"]["lost"][0]["last_completed"], "allreduce #41");
}

TEST(DoctorDumps, TimelineHasOneTrackPerRank) {
  test::ScratchDir dir;
  const std::string out = dir.path() + "/timeline.json";
  auto r = runDoctor("--timeline " + out + " " + fixture("hang"));
  EXPECT_EQ(r.firstLine().rfind("verdict: rank 2 never entered", 0), 0u) << r.out;
  std::ifstream in(out);
  ASSERT_TRUE(in) << out;
  auto trace = nlohmann::json::parse(in);
  std::set<int> namedTracks;
  std::map<int, int> callsPerTrack;
  int waits = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e["ph"] == "M" && e["name"] == "thread_name") namedTracks.insert(e["tid"].get<int>());
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["ts"].get<int64_t>(), 0);
    EXPECT_GE(e["dur"].get<int64_t>(), 0);
    EXPECT_EQ(e["pid"], 1);
    if (e["cat"] == "call") {
      ++callsPerTrack[e["tid"].get<int>()];
      EXPECT_TRUE(e["args"].contains("algorithm"));
      EXPECT_TRUE(e["args"].contains("bytes"));
      EXPECT_TRUE(e["args"].contains("state"));
    }
    if (e["cat"] == "wait") ++waits;
    if (e["name"] == "wait for rank 2") {
      EXPECT_EQ(e["tid"], 3);  // rank 3 waits for rank 2
    }
  }
  EXPECT_EQ(namedTracks, (std::set<int>{0, 1, 2, 3}));
  // Ranks 0, 1, 3 recorded #0..#9, rank 2 #0..#8.
  EXPECT_EQ(callsPerTrack, (std::map<int, int>{{0, 10}, {1, 10}, {2, 9}, {3, 10}}));
  EXPECT_GE(waits, 3);  // at least the three waits in #9
}

TEST(DoctorDumps, UnreadableInput) {
  test::ScratchDir dir;
  EXPECT_EQ(runDoctor(dir.path()).status, 2);  // no dump at all
  EXPECT_EQ(runDoctor(dir.path() + "/absent").status, 2);
  EXPECT_EQ(runDoctor("").status, 2);  // neither a directory nor --live
  // A broken file among good ones is named, the others are still read.
  for (const auto& f : std::filesystem::directory_iterator(fixture("healthy"))) {
    std::filesystem::copy(f.path(), dir.path());
  }
  std::ofstream(dir.path() + "/chorus-trace-aaaabbbbccccdddd-rank9.json") << "{ not json";
  auto r = runDoctor(dir.path());
  EXPECT_EQ(r.firstLine(), "verdict: no problem found (3 ranks, last completed allreduce #3)");
  EXPECT_NE(r.out.find("not read:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank9.json"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace chorus::doctor
