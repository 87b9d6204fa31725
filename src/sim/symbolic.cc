#include "sim/symbolic.h"

#include "reduce/internal_types.h"

#include <cstring>

namespace chorus::sim {
namespace {

int g_divisor = 0;
SymFault g_fault = SymFault::kNone;
uint64_t g_faultCountdown = 0;

void symReduce(void* dst, const void* a, const void* b, size_t count) {
  auto* d = static_cast<SymElement*>(dst);
  const auto* x = static_cast<const SymElement*>(a);
  const auto* y = static_cast<const SymElement*>(b);
  SymFault fault = SymFault::kNone;
  if (g_fault != SymFault::kNone && count > 0 && --g_faultCountdown == 0) {
    fault = g_fault;
    g_fault = SymFault::kNone;
  }
  for (size_t i = 0; i < count; ++i) {
    const SymElement p = x[i];
    const SymElement q = fault == SymFault::kDouble ? x[i] : y[i];
    SymElement r{p.index, p.flags | q.flags, p.mask | q.mask};
    if (fault == SymFault::kDrop) r = p;
    if ((p.mask & q.mask) != 0 && fault != SymFault::kDrop) r.flags |= kSymDuplicate;
    if (p.index != q.index) r.flags |= kSymMisplaced;
    if (((p.flags | q.flags) & kSymDivided) != 0) r.flags |= kSymReducedAfterDivide;
    d[i] = r;
  }
}

void symDivide(void* buf, size_t count, int divisor) {
  auto* e = static_cast<SymElement*>(buf);
  for (size_t i = 0; i < count; ++i) {
    if (e[i].flags & kSymDivided) e[i].flags |= kSymDividedTwice;
    if (g_divisor != 0 && divisor != g_divisor) e[i].flags |= kSymWrongDivisor;
    e[i].flags |= kSymDivided;
  }
}

void symCopy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}

std::string rankList(uint64_t mask) {
  std::string s = "{";
  for (int r = 0; r < 64; ++r) {
    if (mask & (uint64_t{1} << r)) s += (s.size() > 1 ? ", " : "") + std::to_string(r);
  }
  return s + "}";
}

}  // namespace

void installSymbolicKernels() {
  reduce::InternalKernels k;
  k.reduce = &symReduce;
  k.divide = &symDivide;
  k.copy = &symCopy;
  reduce::setInternalKernels(reduce::kSymbolic, k);
}

void setSymbolicDivisor(int divisor) { g_divisor = divisor; }

void injectSymbolicFault(SymFault fault, uint64_t nth) {
  g_fault = nth == 0 ? SymFault::kNone : fault;
  g_faultCountdown = nth;
}

std::string describeSymbolic(const SymElement& got, const SymElement& want) {
  if (got.flags & kSymPoison) return "never written";
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (got.index != want.index) add("misplaced (holds element " + std::to_string(got.index) + ")");
  if (const uint64_t missing = want.mask & ~got.mask) add("missing ranks " + rankList(missing));
  if (const uint64_t extra = got.mask & ~want.mask) add("extra ranks " + rankList(extra));
  const uint32_t flags = got.flags ^ want.flags;
  if (got.flags & kSymDuplicate) add("a contribution counted twice");
  if (got.flags & kSymMisplaced) add("combined with another element");
  if (got.flags & kSymReducedAfterDivide) add("reduced after the average's division");
  if (got.flags & kSymDividedTwice) add("divided twice");
  if (got.flags & kSymWrongDivisor) add("divided by the wrong divisor");
  if ((flags & kSymDivided) && (want.flags & kSymDivided)) add("never divided (average)");
  if ((flags & kSymDivided) && !(want.flags & kSymDivided)) add("divided (not an average)");
  return s.empty() ? "as expected" : s;
}

}  // namespace chorus::sim
