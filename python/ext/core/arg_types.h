// Argument types that only name themselves in signatures: help(chorus.Communicator) shows
// "buf: Buffer", "op: str | ReduceOp = ReduceOp.SUM", "dtype: str | numpy.dtype | None" and
// "self: Communicator" rather than pybind11's "handle". Each but SelfArg accepts any object;
// buffer_args.h checks it and raises the clear TypeError or ValueError.
#pragma once

#include "py_communicator.h"

#include <pybind11/pybind11.h>

namespace chorus::python {

struct BufferArg {  // an object with the buffer protocol (numpy array, bytearray, memoryview)
  pybind11::handle obj;
};
struct OptionalBufferArg {  // the same, or None
  pybind11::handle obj;
};
struct ReduceOpArg {  // "sum", "prod", "min", "max", "avg" or a ReduceOp
  pybind11::handle obj;
};
struct DTypeArg {  // None, a type name ("bf16", "float32") or a numpy dtype
  pybind11::handle obj;
};
struct SelfArg {  // a chorus.Communicator, as the object (a Work keeps it alive)
  pybind11::handle obj;
};

}  // namespace chorus::python

namespace pybind11::detail {

// One caster per wrapper, differing in the name the signature shows and what it accepts.
#define CHORUS_NAMED_HANDLE_CASTER(Type, Name, Accepts)                              \
  template <>                                                                        \
  struct type_caster<chorus::python::Type> {                                         \
    PYBIND11_TYPE_CASTER(chorus::python::Type, const_name(Name));                    \
    bool load(handle src, bool) {                                                    \
      value.obj = src;                                                               \
      return static_cast<bool>(src) && (Accepts);                                    \
    }                                                                                \
    static handle cast(const chorus::python::Type& v, return_value_policy, handle) { \
      return v.obj.inc_ref();                                                        \
    }                                                                                \
  };

CHORUS_NAMED_HANDLE_CASTER(BufferArg, "Buffer", true)
CHORUS_NAMED_HANDLE_CASTER(OptionalBufferArg, "Buffer | None", true)
CHORUS_NAMED_HANDLE_CASTER(ReduceOpArg, "str | ReduceOp", true)
CHORUS_NAMED_HANDLE_CASTER(DTypeArg, "str | numpy.dtype | None", true)
CHORUS_NAMED_HANDLE_CASTER(SelfArg, "Communicator",
                           pybind11::isinstance<chorus::python::PyCommunicator>(src))

#undef CHORUS_NAMED_HANDLE_CASTER

}  // namespace pybind11::detail
