#include "rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

extern char** environ;

namespace chorus::launcher {
namespace {

[[noreturn]] void throwErrno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Pipe whose ends are closed on exec: a rank inherits only the ends dup2'ed onto its 1 and 2.
void makePipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) throwErrno("pipe2");
}

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (const auto& s : strings) result.push_back(const_cast<char*>(s.c_str()));
  result.push_back(nullptr);
  return result;
}

// Runs in the child between fork and exec. The launcher has other threads (the store server),
// so only async-signal-safe calls are allowed here.
[[noreturn]] void execChild(pid_t launcher, char* const* argv, char* const* envp, int outFd,
                            int errFd, int errnoFd) {
  setpgid(0, 0);  // own group: a terminal's Ctrl-C reaches only the launcher, which forwards it
  // Die with the launcher if it is killed outright, instead of running on unsupervised.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(127);
  if (outFd >= 0 && dup2(outFd, STDOUT_FILENO) < 0) _exit(127);
  if (errFd >= 0 && dup2(errFd, STDERR_FILENO) < 0) _exit(127);
  // Undo the launcher's signal setup: ignored dispositions and the blocked mask survive exec.
  signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvpe(argv[0], argv, envp);
  int error = errno;
  (void)!write(errnoFd, &error, sizeof error);
  _exit(127);
}

}  // namespace

std::vector<std::string> buildEnvironment(const std::vector<std::string>& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view current(*entry);
    bool replaced = false;
    for (const auto& o : overrides) {
      auto name = std::string_view(o).substr(0, o.find('=') + 1);
      if (current.starts_with(name)) replaced = true;
    }
    if (!replaced) env.emplace_back(current);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

RankProcess spawnRank(int rank, const std::vector<std::string>& command,
                      const std::vector<std::string>& env, bool pipeOutput, int& execErrno) {
  // Everything the child needs is prepared before fork: it may not allocate afterwards.
  auto argv = pointers(command);
  auto envp = pointers(env);
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int errnoPipe[2];
  if (pipeOutput) {
    makePipe(out);
    makePipe(err);
  }
  makePipe(errnoPipe);  // reports a failed exec; closes unread when exec succeeds

  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) execChild(launcher, argv.data(), envp.data(), out[1], err[1], errnoPipe[1]);
  int forkErrno = errno;
  for (int fd : {out[1], err[1], errnoPipe[1]}) {
    if (fd >= 0) close(fd);
  }
  if (pid < 0) {
    for (int fd : {out[0], err[0], errnoPipe[0]}) {
      if (fd >= 0) close(fd);
    }
    errno = forkErrno;
    throwErrno("fork");
  }
  setpgid(pid, pid);  // also here, so the group exists before we might signal it

  execErrno = 0;
  ssize_t n;
  do {
    n = read(errnoPipe[0], &execErrno, sizeof execErrno);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof execErrno)) execErrno = 0;
  close(errnoPipe[0]);

  for (int fd : {out[0], err[0]}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return RankProcess{rank, pid, out[0], err[0]};
}

void signalRank(const RankProcess& process, int sig) {
  // The group may be gone while its leader is a zombie; fall back to the process itself.
  if (kill(-process.pid, sig) != 0) kill(process.pid, sig);
}

std::string describeExit(int waitStatus) {
  if (WIFEXITED(waitStatus)) return "exited with status " + std::to_string(WEXITSTATUS(waitStatus));
  if (WIFSIGNALED(waitStatus)) {
    int sig = WTERMSIG(waitStatus);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "unknown") + ")";
  }
  return "stopped with wait status " + std::to_string(waitStatus);
}

}  // namespace chorus::launcher
