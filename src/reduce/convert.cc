// Public scalar fp16 / bf16 conversions (same code as the scalar kernels use).
#include "reduce/half.h"
#include "reduce/reduce.h"

namespace chorus::reduce {

float halfToFloat(uint16_t h) { return halfToFloatImpl(h); }
uint16_t floatToHalf(float f) { return floatToHalfImpl(f); }
float bfloat16ToFloat(uint16_t b) { return bfloat16ToFloatImpl(b); }
uint16_t floatToBfloat16(float f) { return floatToBfloat16Impl(f); }

}  // namespace chorus::reduce
