// Waits that Ctrl-C can interrupt (a rank blocked in a collective). Python runs its signal
// handlers only on its main thread and only when C code returns to it or calls
// PyErr_CheckSignals, so a blocked wait on that thread must return by itself:
//
// - BlockingSection, around a wait without a limit (which may run the operation right on this
//   thread, the fast path): SIGINT, while Python's handler for it is the default one (which
//   raises KeyboardInterrupt), makes a watcher thread run the section's abort (the communicator
//   aborts; the wait fails at once; the peers fail at once naming this rank). The caller then
//   calls raiseIfSignalled(), which runs the handlers and throws their exception.
// - waitInterruptibly, for a wait with a limit (which never runs the operation itself): slices
//   of kSignalSlice with the GIL released, the handlers run between them; when one raises, the
//   abort runs and its exception is thrown.
//
// The exception goes to Python as pybind11::error_already_set (KeyboardInterrupt). Header-only:
// both extension modules (chorus._core and chorus._torch, each with its own pybind11) include it
// and call rememberMainThread() when imported.
#pragma once

#include <pybind11/pybind11.h>

#include <Python.h>
#include <pythread.h>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace chorus::python_signals {

// Ctrl-C is answered within about this in a wait with a limit (plus the abort).
inline constexpr std::chrono::milliseconds kSignalSlice{100};

namespace detail {

inline std::atomic<unsigned long> mainThread{0};  // PyThread_get_thread_ident of Python's main

inline bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// The section in progress on the main thread and the SIGINT handler chained in front of
// Python's. Never destroyed: the watcher thread and the handler may outlive everything else.
struct Interrupts {
  std::mutex mu;
  uint64_t section = 0;  // guarded by mu: the id of the section in progress, 0 for none
  uint64_t nextSection = 0;
  std::function<void()> abort;   // guarded by mu
  int pipe[2] = {-1, -1};        // the handler writes a byte, the watcher reads it
  struct sigaction previous {};  // what the handler chains to (Python's)
  bool watching = false;         // guarded by mu: the watcher thread runs
  pid_t owner = 0;  // the process whose watcher reads the pipe (a fork's child must not write)
};

inline Interrupts& interrupts() {
  static Interrupts* in = new Interrupts;
  return *in;
}

inline void onSigint(int signo, siginfo_t* info, void* context) {
  Interrupts& in = interrupts();
  const int saved = errno;
  const struct sigaction& prev = in.previous;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(signo, info, context);
  } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(signo);
  }
  if (::getpid() == in.owner) {
    const char byte = 'I';
    [[maybe_unused]] ssize_t n = ::write(in.pipe[1], &byte, 1);
  }
  errno = saved;
}

// True when Python's handler for SIGINT is its default one, which raises KeyboardInterrupt.
// Takes the GIL (never called with a lock held).
inline bool pythonRaisesOnSigint() {
  if (!Py_IsInitialized() || finalizing()) return false;
  const PyGILState_STATE gil = PyGILState_Ensure();
  bool raises = false;
  if (PyObject* mod = PyImport_ImportModule("signal")) {
    PyObject* handler = PyObject_CallMethod(mod, "getsignal", "i", SIGINT);
    PyObject* dflt = PyObject_GetAttrString(mod, "default_int_handler");
    raises = handler && dflt && handler == dflt;
    Py_XDECREF(handler);
    Py_XDECREF(dflt);
    Py_DECREF(mod);
  }
  PyErr_Clear();
  PyGILState_Release(gil);
  return raises;
}

inline void watch() {
  Interrupts& in = interrupts();
  for (;;) {
    char buf[16];
    const ssize_t n = ::read(in.pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    uint64_t section;
    {
      std::lock_guard<std::mutex> lock(in.mu);
      section = in.section;
    }
    if (section == 0 || !pythonRaisesOnSigint()) continue;
    // Under the lock: the section (and what its abort refers to) cannot end meanwhile.
    std::lock_guard<std::mutex> lock(in.mu);
    if (in.section == section && in.abort) {
      try {
        in.abort();
      } catch (...) {
        // The wait ends anyway at its deadline; nothing better to do from here.
      }
    }
  }
}

// Puts onSigint in front of the current SIGINT handler (again after Python's signal.signal
// replaced it) and starts the watcher; false when there is no Python handler to chain to.
inline bool chainSigint() {
  Interrupts& in = interrupts();
  struct sigaction current {};
  if (::sigaction(SIGINT, nullptr, &current) != 0) return false;
  const bool ours = (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == &onSigint;
  if (!ours && !(current.sa_flags & SA_SIGINFO) &&
      (current.sa_handler == SIG_DFL || current.sa_handler == SIG_IGN)) {
    return false;
  }
  std::lock_guard<std::mutex> lock(in.mu);
  if (!in.watching || in.owner != ::getpid()) {  // a fork's child has no watcher thread
    if (in.watching) {
      ::close(in.pipe[0]);
      ::close(in.pipe[1]);
      in.watching = false;
    }
    if (::pipe2(in.pipe, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    // The reader blocks; the handler's writes never do (a full pipe already says enough).
    ::fcntl(in.pipe[0], F_SETFL, ::fcntl(in.pipe[0], F_GETFL) & ~O_NONBLOCK);
    in.owner = ::getpid();
    std::thread(watch).detach();
    in.watching = true;
  }
  if (ours) return true;
  in.previous = current;
  struct sigaction handler {};
  handler.sa_sigaction = &onSigint;
  handler.sa_mask = current.sa_mask;
  handler.sa_flags = current.sa_flags | SA_SIGINFO;
  return ::sigaction(SIGINT, &handler, nullptr) == 0;
}

}  // namespace detail

// Records Python's main thread; call with the GIL held (at module import).
inline void rememberMainThread() {
  namespace py = pybind11;
  try {
    detail::mainThread =
        py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  } catch (py::error_already_set&) {
    // No threading module (an interpreter being torn down): waits stay uninterruptible.
  }
}

// True where Python's signal handlers would run: this is Python's main thread, and the
// interpreter is up and not finalizing.
inline bool handlesSignals() {
  if (detail::mainThread == 0 || PyThread_get_thread_ident() != detail::mainThread) return false;
  return Py_IsInitialized() && !detail::finalizing();
}

// While alive, on Python's main thread (elsewhere it does nothing), SIGINT with Python's default
// handler runs abort() on the watcher thread. abort must not take the GIL, and must make the
// wait inside the section end promptly (Communicator::abort).
class BlockingSection {
 public:
  explicit BlockingSection(std::function<void()> abort) {
    if (!handlesSignals() || !detail::chainSigint()) return;
    detail::Interrupts& in = detail::interrupts();
    std::lock_guard<std::mutex> lock(in.mu);
    id_ = ++in.nextSection;
    in.section = id_;
    in.abort = std::move(abort);
  }
  ~BlockingSection() {
    if (id_ == 0) return;
    detail::Interrupts& in = detail::interrupts();
    std::lock_guard<std::mutex> lock(in.mu);
    if (in.section == id_) {
      in.section = 0;
      in.abort = nullptr;
    }
  }
  BlockingSection(const BlockingSection&) = delete;
  BlockingSection& operator=(const BlockingSection&) = delete;

 private:
  uint64_t id_ = 0;
};

// The Python exception a signal handler just raised, taken out of the interpreter (with the GIL)
// so that it can be rethrown after the GIL is released.
inline std::exception_ptr pendingPythonError() {
  try {
    throw pybind11::error_already_set();
  } catch (...) {
    return std::current_exception();
  }
}

// On Python's main thread: runs the pending signal handlers (taking the GIL if this thread does
// not hold it) and throws the exception one raised. Call where a wait failed: an abort by a
// BlockingSection is then reported as the KeyboardInterrupt that caused it.
inline void raiseIfSignalled() {
  if (!handlesSignals()) return;
  const PyGILState_STATE gil = PyGILState_Ensure();
  if (PyErr_CheckSignals() == 0) {
    PyGILState_Release(gil);
    return;
  }
  const std::exception_ptr raised = pendingPythonError();
  PyGILState_Release(gil);
  std::rethrow_exception(raised);
}

// waitFor(ms): waits at most ms for the operation; true once it has finished (it throws the
// operation's failure). total: the whole wait's limit (> 0). Returns true once finished, false
// when total passed first. Callable with or without the GIL; on a thread that does not handle
// signals it is one wait of total.
inline bool waitInterruptibly(const std::function<bool(std::chrono::milliseconds)>& waitFor,
                              std::chrono::milliseconds total,
                              const std::function<void()>& onSignal) {
  using Clock = std::chrono::steady_clock;
  if (!handlesSignals()) return waitFor(total);
  // The GIL goes while waiting: held by the caller (this module's own calls), it is released
  // here; released by the caller (torch's bindings), it is taken only to run the handlers.
  PyThreadState* saved = PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  const auto restore = [&saved] {
    if (saved) PyEval_RestoreThread(std::exchange(saved, nullptr));
  };
  const auto start = Clock::now();
  for (;;) {
    const auto left =
        total - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (left.count() <= 0) {
      restore();
      return false;
    }
    bool done = false;
    try {
      done = waitFor(std::min(kSignalSlice, left));
    } catch (...) {
      restore();
      throw;
    }
    if (done) {
      restore();
      return true;
    }
    const PyGILState_STATE gil = PyGILState_Ensure();
    if (PyErr_CheckSignals() == 0) {
      PyGILState_Release(gil);
      continue;
    }
    // A handler raised: abort without the GIL (the worker may need it to drop a tensor), then
    // throw the handler's exception.
    const std::exception_ptr raised = pendingPythonError();
    PyGILState_Release(gil);
    try {
      onSignal();
    } catch (...) {
      // The handler's exception is what the caller must see.
    }
    restore();
    std::rethrow_exception(raised);
  }
}

}  // namespace chorus::python_signals
