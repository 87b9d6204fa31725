// Turning Python arguments into what the C++ API takes: buffer-protocol objects into held
// (pointer, count, DataType) views, op names into ReduceOp, dtype names into DataType.
#pragma once

#include <chorus/types.hpp>

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace chorus::python {

// One exported buffer (PyObject_GetBuffer), released on destruction. The exporter keeps the
// memory alive and unmoved (a bytearray cannot resize) until then, so a Work holds these for the
// operations it runs. Destroy with the GIL held.
class HeldBuffer {
 public:
  HeldBuffer(pybind11::handle obj, const char* what, bool writable);
  ~HeldBuffer();
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;

  void* data() const { return view_.buf; }
  size_t bytes() const { return static_cast<size_t>(view_.len); }
  size_t itemSize() const { return static_cast<size_t>(view_.itemsize); }
  // The element type the format string names, if Chorus has it (float32/64, float16, int8,
  // uint8, int32, int64).
  std::optional<DataType> formatType() const { return formatType_; }
  std::string format() const { return view_.format ? view_.format : "B"; }
  const char* what() const { return what_; }

 private:
  Py_buffer view_{};
  std::optional<DataType> formatType_;
  const char* what_;
};

// What a collective sees of a buffer: where, how many elements, of which type.
struct Elements {
  std::shared_ptr<HeldBuffer> held;
  void* data = nullptr;
  size_t count = 0;               // elements of `type`
  DataType type = DataType::kU8;  // what the call passes to Chorus
  size_t itemBytes = 1;           // bytes of one element as the caller sees it
};

// How a buffer's elements are typed for one call.
enum class Typing {
  kReduce,  // arithmetic: the format (or dtype override) must name a Chorus type
  kBytes,   // data only moves: it travels as bytes (type kU8), whatever the format
};

// Exports obj (TypeError if it has no buffer protocol; ValueError if it is not C-contiguous, or
// read-only while `writable`) and types its elements: `dtype` (None, a name such as "bf16" or
// "float32", or an object whose .name is one, e.g. a numpy dtype) overrides the format.
// TypeError for a format arithmetic cannot use, ValueError when the bytes do not divide into
// elements of the override type.
Elements exportBuffer(pybind11::handle obj, const char* what, bool writable, Typing typing,
                      pybind11::handle dtype);

// "sum", "prod", "min", "max", "avg" (and the ReduceOp enum); ValueError/TypeError otherwise.
ReduceOp parseOp(pybind11::handle op);

// The Python-side name of a DataType ("float32", "bfloat16", ...).
const char* typeName(DataType type);

}  // namespace chorus::python
