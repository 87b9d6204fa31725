#include "bench_values.h"

#include <algorithm>
#include <cstring>

namespace chorus::bench {

double filled(size_t i, int from) {
  return static_cast<double>((i + static_cast<size_t>(from)) % 3) + 1;
}

void fillInput(uint8_t* p, size_t count, DataType t, int rank) {
  for (size_t i = 0; i < count; ++i, p += sizeOf(t)) {
    const int v = static_cast<int>(filled(i, rank));
    switch (t) {
      case DataType::kF32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::kF64: {
        double d = v;
        std::memcpy(p, &d, 8);
        break;
      }
      case DataType::kF16: {
        _Float16 h = static_cast<_Float16>(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBF16: {
        float f = static_cast<float>(v);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        uint16_t b = static_cast<uint16_t>(u >> 16);  // exact for small integers
        std::memcpy(p, &b, 2);
        break;
      }
      case DataType::kI8:
      case DataType::kU8:
        *p = static_cast<uint8_t>(v);
        break;
      case DataType::kI32: {
        int32_t x = v;
        std::memcpy(p, &x, 4);
        break;
      }
      case DataType::kI64: {
        int64_t x = v;
        std::memcpy(p, &x, 8);
        break;
      }
    }
  }
}

double valueAt(const uint8_t* p, DataType t) {
  switch (t) {
    case DataType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DataType::kF64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DataType::kF16: {
      _Float16 h;
      std::memcpy(&h, p, 2);
      return static_cast<double>(h);
    }
    case DataType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      uint32_t u = static_cast<uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DataType::kI8:
      return static_cast<int8_t>(*p);
    case DataType::kU8:
      return *p;
    case DataType::kI32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kI64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
  }
  return 0;
}

double expectedReduced(size_t i, int n, ReduceOp op) {
  double acc = op == ReduceOp::kProd
                   ? 1
                   : (op == ReduceOp::kMin ? 1e300 : (op == ReduceOp::kMax ? -1e300 : 0));
  for (int r = 0; r < n; ++r) {
    const double v = filled(i, r);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, v);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, v);
        break;
    }
  }
  return acc;
}

bool isInteger(DataType t) {
  return t == DataType::kI8 || t == DataType::kU8 || t == DataType::kI32 || t == DataType::kI64;
}

}  // namespace chorus::bench
