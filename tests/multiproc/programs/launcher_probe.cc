// Rank program for launcher_test: behaves as argv[1] says, so each test can make ranks succeed,
// fail, die or ignore signals.
//   env [args...]       print this rank's CHORUS_* and torch env:// variables and the
//                       arguments, exit 0
//   exit-on R CODE      rank R exits CODE; the others wait for a signal
//   kill-on R           rank R kills itself with SIGKILL; the others wait for a signal
//   ignore-term-on R    rank R ignores SIGTERM; all print "ready" and wait for a signal
//   trap-term           print "ready"; on SIGTERM/SIGINT print "got <signal>" and exit 0
//   print               print lines to stdout and stderr, the last one unterminated
//   staggered           rank 0 exits 0 at once, the others after 500 ms
//   store               meet the other ranks through CHORUS_STORE, print "store ok"
#include <chorus/store.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "<unset>";
}

// One write per line, so lines of different ranks sharing a pipe never mix.
void say(int fd, const std::string& line) {
  std::string s = line + "\n";
  (void)!write(fd, s.data(), s.size());
}

[[noreturn]] void waitForSignal() {
  while (true) pause();
}

void onTerm(int sig) {
  const char* msg = sig == SIGINT ? "got SIGINT\n" : "got SIGTERM\n";
  (void)!write(STDOUT_FILENO, msg, std::strlen(msg));
  _exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  alarm(30);  // never outlive a broken test by much
  std::string mode = argc > 1 ? argv[1] : "";
  int rank = std::atoi(env("CHORUS_RANK").c_str());
  int target = argc > 2 ? std::atoi(argv[2]) : -1;

  if (mode == "env") {
    std::string line =
        "rank=" + env("CHORUS_RANK") + " world=" + env("CHORUS_WORLD_SIZE") +
        " local_rank=" + env("CHORUS_LOCAL_RANK") + " local_size=" + env("CHORUS_LOCAL_SIZE") +
        " store=" + env("CHORUS_STORE") + " timeout=" + env("CHORUS_TIMEOUT") +
        " torch_rank=" + env("RANK") + " torch_world=" + env("WORLD_SIZE") +
        " torch_local_rank=" + env("LOCAL_RANK") + " torch_local_world=" + env("LOCAL_WORLD_SIZE") +
        " master=" + env("MASTER_ADDR") + ":" + env("MASTER_PORT") + " args=";
    for (int i = 2; i < argc; ++i) line += std::string(i > 2 ? "," : "") + argv[i];
    say(STDOUT_FILENO, line);
    return 0;
  }
  if (mode == "exit-on") {
    if (rank == target) return argc > 3 ? std::atoi(argv[3]) : 1;
    waitForSignal();
  }
  if (mode == "kill-on") {
    if (rank == target) raise(SIGKILL);
    waitForSignal();
  }
  if (mode == "ignore-term-on") {
    if (rank == target) signal(SIGTERM, SIG_IGN);
    say(STDOUT_FILENO, "ready");
    waitForSignal();
  }
  if (mode == "trap-term") {
    signal(SIGTERM, onTerm);
    signal(SIGINT, onTerm);
    say(STDOUT_FILENO, "ready");
    waitForSignal();
  }
  if (mode == "print") {
    std::printf("line one\nline two\n");
    std::fflush(stdout);
    std::fprintf(stderr, "an error line\n");
    std::printf("unterminated");
    return 0;
  }
  if (mode == "staggered") {
    if (rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return 0;
  }
  if (mode == "store") {
    auto store = chorus::openStore(env("CHORUS_STORE"), std::chrono::seconds(10));
    int size = std::atoi(env("CHORUS_WORLD_SIZE").c_str());
    store->set("probe/" + std::to_string(rank), {1});
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("probe/" + std::to_string(r));
    store->wait(keys, std::chrono::seconds(10));
    say(STDOUT_FILENO, "store ok " + std::to_string(store->add("probe/count", 1)));
    return 0;
  }
  say(STDERR_FILENO, "launcher_probe: unknown mode '" + mode + "'");
  return 64;
}
