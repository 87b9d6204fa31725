#include "sim/fault_handler.h"

#include "common/errno_text.h"

#include <chorus/error.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::sim {

namespace {

struct Range {
  uintptr_t begin = 0, end = 0;
};
constexpr int kMaxRanges = 64;
// Read by the signal handler: plain arrays, appended to before use.
Range g_untouchable[kMaxRanges];
int g_untouchableCount = 0;
Range g_stackRegions[kMaxRanges];
int g_stackRegionCount = 0;
volatile int g_currentRank = -1;
uint8_t* g_untouchableBase = nullptr;
size_t g_untouchableSize = 0;

void writeStr(const char* s) {
  ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void writeNum(long long v) {
  char buf[24];
  int i = sizeof(buf);
  bool neg = v < 0;
  unsigned long long u =
      neg ? static_cast<unsigned long long>(-v) : static_cast<unsigned long long>(v);
  buf[--i] = '\0';
  do {
    buf[--i] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (neg) buf[--i] = '-';
  writeStr(buf + i);
}

bool inRanges(const Range* ranges, int count, uintptr_t a) {
  for (int i = 0; i < count; ++i) {
    if (a >= ranges[i].begin && a < ranges[i].end) return true;
  }
  return false;
}

void onFault(int sig, siginfo_t* info, void*) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  if (inRanges(g_untouchable, g_untouchableCount, addr)) {
    writeStr("chorus sim: rank ");
    writeNum(g_currentRank);
    writeStr(
        " touched a payload in dry mode: some copy or reduction in the algorithms bypasses "
        "algo::copyBytes / reduce::reduceFn / reduce::divide\n");
  } else if (inRanges(g_stackRegions, g_stackRegionCount, addr)) {
    writeStr("chorus sim: rank ");
    writeNum(g_currentRank);
    writeStr(" overflowed its fiber stack (WorldConfig::stackBytes)\n");
  } else if (g_currentRank >= 0) {
    writeStr("chorus sim: fatal signal while rank ");
    writeNum(g_currentRank);
    writeStr(" ran\n");
  }
  signal(sig, SIG_DFL);  // returning re-runs the access, which now ends the process
}

void addRange(Range* ranges, int& count, const void* p, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < count; ++i) {
    if (ranges[i].begin == ranges[i].end) {  // a free entry
      ranges[i] = Range{b, b + bytes};
      return;
    }
  }
  if (count == kMaxRanges) return;
  ranges[count] = Range{b, b + bytes};
  ++count;
}

void removeRange(Range* ranges, int count, const void* p) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  for (int i = 0; i < count; ++i) {
    if (ranges[i].begin == b) ranges[i] = Range{};
  }
}

}  // namespace

void installFaultHandler() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  // The handler runs on its own stack: a fiber that overflowed has none left.
  static std::vector<uint8_t> altStack(64 * 1024);
  stack_t ss{};
  ss.ss_sp = altStack.data();
  ss.ss_size = altStack.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = &onFault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

// Process-wide: Scratch::Reserve is a plain function. Grows by reserving a new, larger range;
// old ones stay reserved so that stale addresses still fault.
uint8_t* reserveUntouchable(size_t bytes) {
  bytes = std::max<size_t>(bytes, kPage);
  if (bytes > g_untouchableSize) {
    size_t want = std::max(bytes, 2 * g_untouchableSize);
    want = (want + kPage - 1) / kPage * kPage;
    void* p = mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      throw Error(ErrorCode::kSystem, "chorus sim: cannot reserve " + std::to_string(want) +
                                          " bytes of address space: " + errnoText(errno));
    }
    g_untouchableBase = static_cast<uint8_t*>(p);
    g_untouchableSize = want;
    addRange(g_untouchable, g_untouchableCount, p, want);
  }
  return g_untouchableBase;
}

void addStackRegion(const void* p, size_t bytes) {
  addRange(g_stackRegions, g_stackRegionCount, p, bytes);
}

void removeStackRegion(const void* p) { removeRange(g_stackRegions, g_stackRegionCount, p); }

void setRunningRank(int rank) { g_currentRank = rank; }

}  // namespace chorus::sim
