// Registered memory between processes: correct results with registered, unregistered and mixed
// buffers (the registered run maps the peers' segments: the in-place path ran), and nothing left
// in /dev/shm after the ranks are killed with SIGKILL (the segments are memfds: the kernel frees
// them with their last mapping; no name is ever created).
#include "multiproc/mp_util.h"

#include <dirent.h>

#include <set>
#include <string>

namespace chorus::mp {
namespace {

const std::string kWorker = CHORUS_TEST_BIN_DIR "/registered_worker";

RunResult runWorker(int n, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"-n", std::to_string(n), "--timeout", "20", "--tag-output", "--"};
  all.push_back(kWorker);
  all.insert(all.end(), args.begin(), args.end());
  return runLauncher(all, std::chrono::seconds(90));
}

std::string show(const RunResult& r) {
  return "exit " + std::to_string(r.exitCode) + "\n--- stdout ---\n" + r.out + "--- stderr ---\n" +
         r.err;
}

std::set<std::string> chorusShmEntries() {
  std::set<std::string> names;
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.find("chorus") != std::string::npos) names.insert(name);
  }
  ::closedir(d);
  return names;
}

TEST(RegisteredMemoryMp, CorrectWithRegisteredUnregisteredAndMixedBuffers) {
  const int n = 3;
  for (const char* how : {"registered", "unregistered", "mixed"}) {
    RunResult r = runWorker(n, {"check", how});
    ASSERT_EQ(r.exitCode, 0) << how << ": " << show(r);
    auto results = resultsOf(r.out, how);
    ASSERT_EQ(results.size(), static_cast<size_t>(n)) << show(r);
    for (auto& [rank, rec] : results) {
      EXPECT_EQ(rec["status"], "ok") << rank << " " << show(r);
      EXPECT_EQ(rec.number("wrong"), 0) << rank << " " << show(r);
      if (std::string(how) == "registered") {
        EXPECT_GT(rec.number("peer_segments"), 0) << "rank " << rank << " read no peer in place";
      } else if (std::string(how) == "unregistered") {
        EXPECT_EQ(rec.number("peer_segments"), 0) << rank << " " << show(r);
      }
    }
  }
}

TEST(RegisteredMemoryMp, NothingLeftInDevShmAfterKillNine) {
  const std::set<std::string> before = chorusShmEntries();
  RunResult r = runWorker(2, {"kill9"});
  EXPECT_EQ(records(r.out, "HELD").size(), 2u) << show(r);
  EXPECT_NE(r.exitCode, 0) << show(r);
  std::set<std::string> after = chorusShmEntries();
  for (const std::string& name : after) {
    EXPECT_TRUE(before.count(name)) << "/dev/shm/" << name << " appeared";
  }
}

}  // namespace
}  // namespace chorus::mp
