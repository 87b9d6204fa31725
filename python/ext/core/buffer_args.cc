#include "buffer_args.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace py = pybind11;

namespace chorus::python {

namespace {

bool littleEndianHost() {
  const uint16_t probe = 1;
  return *reinterpret_cast<const uint8_t*>(&probe) == 1;
}

// struct-module format codes (with an optional byte-order prefix) of the types Chorus reduces.
std::optional<DataType> typeOfFormat(const char* format, Py_ssize_t itemsize) {
  std::string_view f = format ? format : "B";
  if (!f.empty() &&
      (f[0] == '@' || f[0] == '=' || (f[0] == '<' && littleEndianHost()) ||
       (f[0] == '>' && !littleEndianHost()) || (f[0] == '!' && !littleEndianHost()))) {
    f.remove_prefix(1);
  }
  if (f.size() != 1) return std::nullopt;
  switch (f[0]) {
    case 'f':
      return DataType::kF32;
    case 'd':
      return DataType::kF64;
    case 'e':
      return DataType::kF16;
    case 'b':
      return DataType::kI8;
    case 'B':
      return DataType::kU8;
    case 'h':
    case 'H':
      return std::nullopt;  // no 16-bit integers in Chorus
    case 'i':
    case 'l':
    case 'q':
    case 'n':
      if (itemsize == 4) return DataType::kI32;
      if (itemsize == 8) return DataType::kI64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

struct NamedType {
  std::string_view name;
  DataType type;
};
constexpr std::array<NamedType, 16> kTypeNames{{
    {"float32", DataType::kF32},
    {"f32", DataType::kF32},
    {"float64", DataType::kF64},
    {"f64", DataType::kF64},
    {"float16", DataType::kF16},
    {"f16", DataType::kF16},
    {"bfloat16", DataType::kBF16},
    {"bf16", DataType::kBF16},
    {"int8", DataType::kI8},
    {"i8", DataType::kI8},
    {"uint8", DataType::kU8},
    {"u8", DataType::kU8},
    {"int32", DataType::kI32},
    {"i32", DataType::kI32},
    {"int64", DataType::kI64},
    {"i64", DataType::kI64},
}};

DataType parseTypeName(py::handle dtype) {
  py::object name = py::reinterpret_borrow<py::object>(dtype);
  if (!py::isinstance<py::str>(name) && py::hasattr(name, "name")) name = name.attr("name");
  if (!py::isinstance<py::str>(name)) {
    throw py::type_error("dtype must be a name such as 'bf16' or 'float32', or a numpy dtype");
  }
  const auto text = name.cast<std::string>();
  for (const auto& entry : kTypeNames) {
    if (entry.name == text) return entry.type;
  }
  throw py::value_error("dtype '" + text +
                        "' is not one Chorus has: float32, float64, float16, bfloat16 (bf16), "
                        "int8, uint8, int32, int64");
}

// dtype= names the element type of a buffer that has none of its own: raw bytes (bytearray,
// bytes, memoryview of bytes) or bfloat16 bits in a 16-bit integer buffer. On a buffer that is
// already typed otherwise it would reinterpret the bits (float32 read as int32), so it must agree.
void checkOverride(const HeldBuffer& held, py::handle obj, DataType override) {
  const std::optional<DataType> own = held.formatType();
  if (own == override) return;
  const bool rawBytes = held.format() == "B" &&
                        (py::isinstance<py::bytearray>(obj) || py::isinstance<py::bytes>(obj) ||
                         py::isinstance<py::memoryview>(obj));
  const std::string f = held.format();
  const bool bf16Bits = override == DataType::kBF16 && held.itemSize() == 2 &&
                        f.find_first_of("Hh") != std::string::npos;
  if (rawBytes || bf16Bits) return;
  const std::string ownName = own ? typeName(*own) : "format '" + f + "'";
  throw py::type_error(std::string(held.what()) + ": dtype='" + typeName(override) +
                       "' differs from the buffer's own element type " + ownName +
                       " (Chorus would reinterpret its bits); pass a buffer of that type (e.g. "
                       "numpy's astype) or leave dtype out. dtype= types only raw bytes "
                       "(bytearray, bytes, memoryview) and bfloat16 bits held as uint16");
}

}  // namespace

HeldBuffer::HeldBuffer(py::handle obj, const char* what, bool writable) : what_(what) {
  if (!PyObject_CheckBuffer(obj.ptr())) {
    throw py::type_error(std::string(what) + ": an object of type " +
                         std::string(py::str(py::type::handle_of(obj).attr("__name__"))) +
                         " has no buffer protocol (pass a numpy array, bytearray or memoryview)");
  }
  // Strides and format, writable or not: the checks below give clearer errors than the
  // exporter's BufferError.
  if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
  if (!PyBuffer_IsContiguous(&view_, 'C')) {
    PyBuffer_Release(&view_);
    throw py::value_error(std::string(what) +
                          " is not C-contiguous (copy it first, e.g. numpy.ascontiguousarray)");
  }
  if (writable && view_.readonly) {
    PyBuffer_Release(&view_);
    throw py::value_error(std::string(what) + " is read-only, but the operation writes into it");
  }
  formatType_ = typeOfFormat(view_.format, view_.itemsize);
}

HeldBuffer::~HeldBuffer() { PyBuffer_Release(&view_); }

Elements exportBuffer(py::handle obj, const char* what, bool writable, Typing typing,
                      py::handle dtype) {
  Elements e;
  e.held = std::make_shared<HeldBuffer>(obj, what, writable);
  e.data = e.held->data();
  std::optional<DataType> type = e.held->formatType();
  if (!dtype.is_none()) {
    type = parseTypeName(dtype);
    checkOverride(*e.held, obj, *type);
  }
  if (type) {
    e.itemBytes = sizeOf(*type);
    if (e.held->bytes() % e.itemBytes != 0) {
      throw py::value_error(std::string(what) + ": " + std::to_string(e.held->bytes()) +
                            " bytes are not a whole number of " + typeName(*type) + " elements");
    }
  } else if (typing == Typing::kBytes) {
    e.itemBytes = std::max<size_t>(1, e.held->itemSize());
  } else {
    throw py::type_error(std::string(what) + ": buffer format '" + e.held->format() +
                         "' has no Chorus type to reduce (float32/64, float16, int8, uint8, "
                         "int32, int64; bfloat16 as uint16 with dtype='bf16')");
  }
  // Data that only moves travels as bytes: any format works, and the counts are the same on
  // every rank exactly when the byte sizes are.
  e.type = typing == Typing::kBytes ? DataType::kU8 : *type;
  e.count = e.held->bytes() / sizeOf(e.type);
  return e;
}

ReduceOp parseOp(py::handle op) {
  if (py::isinstance<ReduceOp>(op)) return op.cast<ReduceOp>();
  if (!py::isinstance<py::str>(op)) {
    throw py::type_error("op must be 'sum', 'prod', 'min', 'max', 'avg' or a chorus.ReduceOp");
  }
  const auto name = op.cast<std::string>();
  if (name == "sum") return ReduceOp::kSum;
  if (name == "prod") return ReduceOp::kProd;
  if (name == "min") return ReduceOp::kMin;
  if (name == "max") return ReduceOp::kMax;
  if (name == "avg") return ReduceOp::kAvg;
  // One name per op, as in C, C++ and chorus-bench. No "mean": numpy's mean of integers is a
  // float, while avg divides in the element type (int32 avg truncates).
  throw py::value_error(
      "op '" + name + "' is not one of 'sum', 'prod', 'min', 'max', 'avg'" +
      (name == "mean" ? " (the mean is 'avg', computed in the buffer's type)" : std::string()));
}

const char* typeName(DataType type) {
  switch (type) {
    case DataType::kF32:
      return "float32";
    case DataType::kF64:
      return "float64";
    case DataType::kF16:
      return "float16";
    case DataType::kBF16:
      return "bfloat16";
    case DataType::kI8:
      return "int8";
    case DataType::kU8:
      return "uint8";
    case DataType::kI32:
      return "int32";
    case DataType::kI64:
      return "int64";
  }
  return "unknown";
}

}  // namespace chorus::python
