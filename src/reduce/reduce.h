// Reduction kernels: (dtype, op) -> vectorised function, chosen once for the running CPU.
#pragma once

#include <chorus/types.hpp>

#include <cstddef>
#include <string_view>

namespace chorus::reduce {

// dst[i] = a[i] op b[i] for i < count. dst may be the same pointer as a or b (never a partial
// overlap). kAvg reduces as kSum (see divide). Integer sum and product wrap (two's complement);
// fp16/bf16 are converted to float, combined, and rounded to nearest-even once per call.
// min/max return NaN when either operand is NaN.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// Never null for valid (type, op).
ReduceFn reduceFn(DataType type, ReduceOp op);

// buf[i] = buf[i] / divisor: the final step of kAvg. Integers truncate toward zero.
// Throws chorus::Error (kInvalidArgument) for divisor 0 or an invalid type.
void divide(void* buf, size_t count, DataType type, int divisor);

// Instruction set the kernels were chosen for: "avx512", "avx2" or "scalar".
std::string_view isaName();

// Testing and benchmarking: make reduceFn/divide/isaName use the kernels for `isa` ("scalar",
// "avx2" or "avx512"; "" or "auto" goes back to the best one for this CPU), process-wide.
// Returns false, changing nothing, if the name is unknown or this CPU cannot run that ISA.
bool setIsaForTesting(std::string_view isa);

// Conversions used by kernels and tests (round to nearest even; NaN stays NaN).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

}  // namespace chorus::reduce
