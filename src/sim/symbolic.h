// Symbolic elements (reduce::kSymbolic) for checking what the collective algorithms compute,
// independently of arithmetic: rank r's input element i is {i, 0, 1 << r}; a reduction ORs the
// masks and records in the flags anything that a correct algorithm never does (combining an
// element with a copy of a contribution it already holds, combining different elements, reducing
// after the average's division); division marks the element divided. At the end every element
// must be {its index, expected flags, the mask of the ranks that contribute to it}.
#pragma once

#include <cstdint>
#include <string>

namespace chorus::sim {

struct SymElement {
  uint32_t index;
  uint32_t flags;
  uint64_t mask;  // contributing ranks (world sizes up to 64)
};
static_assert(sizeof(SymElement) == 16);

enum SymFlag : uint32_t {
  kSymDuplicate = 1u << 0,           // a rank's contribution counted twice
  kSymMisplaced = 1u << 1,           // two different elements combined
  kSymReducedAfterDivide = 1u << 2,  // an average reduced after its division
  kSymDivided = 1u << 3,             // divided (expected once, for averages)
  kSymDividedTwice = 1u << 4,
  kSymWrongDivisor = 1u << 5,  // divided by something else than setSymbolicDivisor's value
  kSymPoison = 1u << 6,        // never written: the output's initial fill
};

// Installs the kernels of reduce::kSymbolic (idempotent).
void installSymbolicKernels();
// The divisor every division must use (the world size); 0 accepts any.
void setSymbolicDivisor(int divisor);

// Faults for testing the checker itself: the nth reduction call from now (1 = the next one)
// leaves out its second operand (kDrop) or combines its first operand with itself (kDouble).
enum class SymFault { kNone, kDrop, kDouble };
void injectSymbolicFault(SymFault fault, uint64_t nth);

inline SymElement symInput(uint32_t index, int rank) {
  return SymElement{index, 0, uint64_t{1} << rank};
}
inline SymElement symPoison() { return SymElement{0xFFFFFFFFu, kSymPoison, 0}; }
inline uint64_t symAllRanks(int n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }
inline bool operator==(const SymElement& a, const SymElement& b) {
  return a.index == b.index && a.flags == b.flags && a.mask == b.mask;
}

// "missing ranks {2, 5}; duplicate contribution; misplaced (holds element 7)".
std::string describeSymbolic(const SymElement& got, const SymElement& want);

}  // namespace chorus::sim
