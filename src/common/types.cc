#include <chorus/error.hpp>
#include <chorus/types.hpp>

#include <string>

namespace chorus {

std::string_view toString(DataType t) {
  switch (t) {
    case DataType::kF32:
      return "f32";
    case DataType::kF64:
      return "f64";
    case DataType::kF16:
      return "f16";
    case DataType::kBF16:
      return "bf16";
    case DataType::kI8:
      return "i8";
    case DataType::kU8:
      return "u8";
    case DataType::kI32:
      return "i32";
    case DataType::kI64:
      return "i64";
  }
  return "unknown-dtype";
}

std::string_view toString(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown-op";
}

std::string_view toString(WireFormat w) {
  switch (w) {
    case WireFormat::kNative:
      return "native";
    case WireFormat::kBf16:
      return "bf16";
    case WireFormat::kFp16:
      return "fp16";
    case WireFormat::kInt8Block:
      return "int8";
  }
  return "unknown-wire";
}

WireFormat parseWireFormat(std::string_view name) {
  for (int i = 0; i < kNumWireFormats; ++i) {
    const auto w = static_cast<WireFormat>(i);
    if (name == toString(w)) return w;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown wire format '" + std::string(name) +
                                               "' (choices: native, bf16, fp16, int8)");
}

}  // namespace chorus
