#include "py_communicator.h"

#include "arg_types.h"
#include "buffer_args.h"
#include "py_work.h"

#include "../common/signal_wait.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace pybind11::literals;

namespace chorus::python {

namespace {

// The communicator, or ValueError once close() ran.
Communicator& commOf(py::handle self, const char* op) {
  auto& c = self.cast<PyCommunicator&>();
  if (!c.comm) {
    throw py::value_error(std::string(op) + ": this chorus.Communicator (rank " +
                          std::to_string(c.rank) + " of " + std::to_string(c.size) +
                          ") was closed");
  }
  return *c.comm;
}

// The caller's options (chorus.Options), else the environment's; `timeout` on top.
Options optionsWithTimeout(std::optional<double> timeoutSeconds,
                           const std::optional<Options>& given) {
  Options options = given ? *given : Options::fromEnv();
  if (timeoutSeconds) {
    if (!(*timeoutSeconds > 0)) throw py::value_error("timeout must be > 0 seconds");
    options.timeout = std::chrono::milliseconds(static_cast<int64_t>(*timeoutSeconds * 1000.0));
  }
  return options;
}

void checkRank(const Communicator& comm, int r, const char* what) {
  if (r < 0 || r >= comm.size()) {
    throw py::value_error(std::string(what) + " " + std::to_string(r) +
                          " is not a rank of this communicator (size " +
                          std::to_string(comm.size()) + ")");
  }
}

void checkPeer(const Communicator& comm, int peer) {
  checkRank(comm, peer, "peer");
  if (peer == comm.rank()) {
    throw py::value_error("peer " + std::to_string(peer) + " is this rank: send/recv need another");
  }
}

void checkBytes(const char* op, const Elements& buf, size_t expected, const std::string& why) {
  if (buf.held->bytes() != expected) {
    throw py::value_error(std::string(op) + ": " + buf.held->what() + " holds " +
                          std::to_string(buf.held->bytes()) + " bytes, expected " +
                          std::to_string(expected) + " (" + why + ")");
  }
}

void checkSameType(const char* op, const Elements& in, const Elements& out) {
  if (in.type != out.type) {
    throw py::type_error(std::string(op) + ": inbuf holds " + typeName(in.type) +
                         " but outbuf holds " + typeName(out.type));
  }
}

std::string times(const Communicator& comm, const char* what) {
  return std::to_string(comm.size()) + " x " + what;
}

// Runs one operation: blocking (GIL released, returns None) or in the background (returns a
// chorus.Work that keeps self and the buffers alive). issue(Run) starts the operation.
template <class Issue>
py::object launch(py::handle self, bool asyncOp, std::vector<std::shared_ptr<HeldBuffer>> held,
                  Issue issue) {
  if (!asyncOp) {
    // On Python's main thread Ctrl-C aborts the communicator, which ends the call at once, and
    // raises KeyboardInterrupt (python/ext/common/signal_wait.h).
    Communicator& comm = *self.cast<PyCommunicator&>().comm;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // one that came just before
    py::gil_scoped_release release;
    const python_signals::BlockingSection section([&comm] { comm.abort(); });
    try {
      issue(Run::kBlocking).wait();
    } catch (...) {
      python_signals::raiseIfSignalled();
      throw;
    }
    return py::none();
  }
  Work work = issue(Run::kInBackground);
  return py::cast(std::make_unique<PyWork>(
      std::move(work), py::reinterpret_borrow<py::object>(self), std::move(held)));
}

py::object allReduce(SelfArg selfArg, BufferArg bufArg, ReduceOpArg opArg, OptionalBufferArg outArg,
                     bool asyncOp, DTypeArg dtypeArg) {
  const py::handle self = selfArg.obj;
  const py::handle buf = bufArg.obj;
  const py::handle op = opArg.obj;
  const py::handle out = outArg.obj;
  const py::handle dtype = dtypeArg.obj;
  Communicator& comm = commOf(self, "all_reduce");
  const ReduceOp rop = parseOp(op);
  if (out.is_none()) {
    Elements io = exportBuffer(buf, "buf", true, Typing::kReduce, dtype);
    return launch(self, asyncOp, {io.held}, [&comm, io, rop](Run run) {
      return comm.allReduce(io.data, io.data, io.count, io.type, rop, run);
    });
  }
  Elements in = exportBuffer(buf, "buf", false, Typing::kReduce, dtype);
  Elements o = exportBuffer(out, "out", true, Typing::kReduce, dtype);
  checkSameType("all_reduce", in, o);
  checkBytes("all_reduce", o, in.held->bytes(), "the size of buf");
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o, rop](Run run) {
    return comm.allReduce(in.data, o.data, in.count, in.type, rop, run);
  });
}

py::object reduceScatter(SelfArg selfArg, BufferArg inbufArg, BufferArg outbufArg,
                         ReduceOpArg opArg, bool asyncOp, DTypeArg dtypeArg) {
  const py::handle self = selfArg.obj;
  const py::handle inbuf = inbufArg.obj;
  const py::handle outbuf = outbufArg.obj;
  const py::handle op = opArg.obj;
  const py::handle dtype = dtypeArg.obj;
  Communicator& comm = commOf(self, "reduce_scatter");
  const ReduceOp rop = parseOp(op);
  Elements in = exportBuffer(inbuf, "inbuf", false, Typing::kReduce, dtype);
  Elements o = exportBuffer(outbuf, "outbuf", true, Typing::kReduce, dtype);
  checkSameType("reduce_scatter", in, o);
  checkBytes("reduce_scatter", in, o.held->bytes() * static_cast<size_t>(comm.size()),
             times(comm, "outbuf"));
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o, rop](Run run) {
    return comm.reduceScatter(in.data, o.data, o.count, in.type, rop, run);
  });
}

py::object reduce(SelfArg selfArg, BufferArg inbufArg, OptionalBufferArg outbufArg, int root,
                  ReduceOpArg opArg, bool asyncOp, DTypeArg dtypeArg) {
  const py::handle self = selfArg.obj;
  const py::handle inbuf = inbufArg.obj;
  const py::handle outbuf = outbufArg.obj;
  const py::handle op = opArg.obj;
  const py::handle dtype = dtypeArg.obj;
  Communicator& comm = commOf(self, "reduce");
  checkRank(comm, root, "root");
  const ReduceOp rop = parseOp(op);
  const bool isRoot = comm.rank() == root;
  const bool inPlace = isRoot && outbuf.is_none();
  Elements in = exportBuffer(inbuf, "inbuf", inPlace, Typing::kReduce, dtype);
  if (!isRoot || inPlace) {
    // Only the root receives: elsewhere outbuf is not used; on the root None means in place.
    void* out = inPlace ? in.data : nullptr;
    return launch(self, asyncOp, {in.held}, [&comm, in, out, rop, root](Run run) {
      return comm.reduce(in.data, out, in.count, in.type, rop, root, run);
    });
  }
  Elements o = exportBuffer(outbuf, "outbuf", true, Typing::kReduce, dtype);
  checkSameType("reduce", in, o);
  checkBytes("reduce", o, in.held->bytes(), "the size of inbuf");
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o, rop, root](Run run) {
    return comm.reduce(in.data, o.data, in.count, in.type, rop, root, run);
  });
}

py::object allGather(SelfArg selfArg, BufferArg inbufArg, BufferArg outbufArg, bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle inbuf = inbufArg.obj;
  const py::handle outbuf = outbufArg.obj;
  Communicator& comm = commOf(self, "all_gather");
  Elements in = exportBuffer(inbuf, "inbuf", false, Typing::kBytes, py::none());
  Elements o = exportBuffer(outbuf, "outbuf", true, Typing::kBytes, py::none());
  checkBytes("all_gather", o, in.held->bytes() * static_cast<size_t>(comm.size()),
             times(comm, "inbuf"));
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o](Run run) {
    return comm.allGather(in.data, o.data, in.count, in.type, run);
  });
}

py::object broadcast(SelfArg selfArg, BufferArg bufArg, int root, bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle buf = bufArg.obj;
  Communicator& comm = commOf(self, "broadcast");
  checkRank(comm, root, "root");
  // Only non-roots write; the root's buffer may be read-only.
  Elements b = exportBuffer(buf, "buf", comm.rank() != root, Typing::kBytes, py::none());
  return launch(self, asyncOp, {b.held}, [&comm, b, root](Run run) {
    return comm.broadcast(b.data, b.count, b.type, root, run);
  });
}

py::object gather(SelfArg selfArg, BufferArg inbufArg, OptionalBufferArg outbufArg, int root,
                  bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle inbuf = inbufArg.obj;
  const py::handle outbuf = outbufArg.obj;
  Communicator& comm = commOf(self, "gather");
  checkRank(comm, root, "root");
  Elements in = exportBuffer(inbuf, "inbuf", false, Typing::kBytes, py::none());
  if (comm.rank() != root) {
    return launch(self, asyncOp, {in.held}, [&comm, in, root](Run run) {
      return comm.gather(in.data, nullptr, in.count, in.type, root, run);
    });
  }
  if (outbuf.is_none()) throw py::value_error("gather: the root needs an outbuf");
  Elements o = exportBuffer(outbuf, "outbuf", true, Typing::kBytes, py::none());
  checkBytes("gather", o, in.held->bytes() * static_cast<size_t>(comm.size()),
             times(comm, "inbuf"));
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o, root](Run run) {
    return comm.gather(in.data, o.data, in.count, in.type, root, run);
  });
}

py::object scatter(SelfArg selfArg, OptionalBufferArg inbufArg, BufferArg outbufArg, int root,
                   bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle inbuf = inbufArg.obj;
  const py::handle outbuf = outbufArg.obj;
  Communicator& comm = commOf(self, "scatter");
  checkRank(comm, root, "root");
  Elements o = exportBuffer(outbuf, "outbuf", true, Typing::kBytes, py::none());
  if (comm.rank() != root) {
    return launch(self, asyncOp, {o.held}, [&comm, o, root](Run run) {
      return comm.scatter(nullptr, o.data, o.count, o.type, root, run);
    });
  }
  if (inbuf.is_none()) throw py::value_error("scatter: the root needs an inbuf");
  Elements in = exportBuffer(inbuf, "inbuf", false, Typing::kBytes, py::none());
  checkBytes("scatter", in, o.held->bytes() * static_cast<size_t>(comm.size()),
             times(comm, "outbuf"));
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o, root](Run run) {
    return comm.scatter(in.data, o.data, o.count, o.type, root, run);
  });
}

py::object allToAll(SelfArg selfArg, BufferArg inbufArg, BufferArg outbufArg, bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle inbuf = inbufArg.obj;
  const py::handle outbuf = outbufArg.obj;
  Communicator& comm = commOf(self, "all_to_all");
  Elements in = exportBuffer(inbuf, "inbuf", false, Typing::kBytes, py::none());
  Elements o = exportBuffer(outbuf, "outbuf", true, Typing::kBytes, py::none());
  checkBytes("all_to_all", o, in.held->bytes(), "the size of inbuf");
  const auto n = static_cast<size_t>(comm.size());
  if ((in.held->bytes() / in.itemBytes) % n != 0) {
    throw py::value_error(
        "all_to_all: inbuf holds " + std::to_string(in.held->bytes() / in.itemBytes) +
        " elements, not a multiple of the communicator size " + std::to_string(n));
  }
  return launch(self, asyncOp, {in.held, o.held}, [&comm, in, o, n](Run run) {
    return comm.allToAll(in.data, o.data, in.count / n, in.type, run);
  });
}

py::object send(SelfArg selfArg, BufferArg bufArg, int peer, bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle buf = bufArg.obj;
  Communicator& comm = commOf(self, "send");
  checkPeer(comm, peer);
  Elements b = exportBuffer(buf, "buf", false, Typing::kBytes, py::none());
  return launch(self, asyncOp, {b.held}, [&comm, b, peer](Run run) {
    return comm.send(b.data, b.count, b.type, peer, run);
  });
}

py::object recv(SelfArg selfArg, BufferArg bufArg, int peer, bool asyncOp) {
  const py::handle self = selfArg.obj;
  const py::handle buf = bufArg.obj;
  Communicator& comm = commOf(self, "recv");
  checkPeer(comm, peer);
  Elements b = exportBuffer(buf, "buf", true, Typing::kBytes, py::none());
  return launch(self, asyncOp, {b.held}, [&comm, b, peer](Run run) {
    return comm.recv(b.data, b.count, b.type, peer, run);
  });
}

py::object barrier(SelfArg selfArg, bool asyncOp) {
  const py::handle self = selfArg.obj;
  Communicator& comm = commOf(self, "barrier");
  return launch(self, asyncOp, {}, [&comm](Run run) { return comm.barrier(run); });
}

py::object split(SelfArg selfArg, std::optional<int> color, int key) {
  const py::handle self = selfArg.obj;
  Communicator& comm = commOf(self, "split");
  std::unique_ptr<Communicator> part;
  {
    py::gil_scoped_release release;
    part = comm.split(color.value_or(kNoColor), key);
  }
  if (!part) return py::none();
  return py::cast(PyCommunicator{std::move(part)});
}

}  // namespace

void PyCommunicator::close() {
  if (!comm) return;
  std::unique_ptr<Communicator> closing = std::move(comm);
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    closing.reset();
  } else {
    closing.reset();
  }
}

void registerCommunicator(py::module_& m) {
  py::class_<PyCommunicator>(m, "Communicator", R"doc(
A group of ranks and the collectives they run together.

Every rank must issue the same collectives in the same order. Buffers are any object with
the buffer protocol (numpy arrays, bytearray, memoryview), C-contiguous; outputs must be
writable. Element types come from the buffer format: float32, float64, float16 ('e'),
int8, uint8, int32, int64. bfloat16 has no numpy format: pass raw uint16 buffers with
``dtype="bf16"`` to the reducing calls. ``dtype=`` only types buffers without a type of their
own (bytearray, bytes, memoryview; bfloat16 bits as uint16): on a buffer of another type it
raises TypeError rather than reinterpret the bits. Ops are "sum", "prod", "min", "max" and
"avg" (the mean, divided in the buffer's type: integers truncate). Collectives that only move data (broadcast,
all_gather, gather, scatter, all_to_all, send, recv) move bytes and take any format.

Every call blocks (the GIL released) unless ``async_op=True``: then it returns a
:class:`Work` at once, which keeps the buffers exported until the operation finished.
A failure (lost peer, timeout, mismatched calls or sizes across ranks) raises
:class:`Error` and aborts the communicator; wrong arguments on the calling rank raise
ValueError or TypeError before anything is sent. Ctrl-C in a blocking call or a wait raises
KeyboardInterrupt and aborts the communicator (the peers' calls fail at once naming this rank).
``close()``, or the end of a ``with`` block, closes it.

Chorus reads its settings from the CHORUS_* environment variables (CHORUS_TIMEOUT,
CHORUS_ALGO, CHORUS_TRANSPORT, ...), or from a chorus.Options passed as ``options=``.
)doc")
      .def(py::init([](const std::string& storeUrl, int rank, int size,
                       std::optional<double> timeout, const std::optional<Options>& given) {
             if (size < 1) throw py::value_error("size must be >= 1");
             if (rank < 0 || rank >= size) {
               throw py::value_error("rank " + std::to_string(rank) + " is not in [0, " +
                                     std::to_string(size) + ")");
             }
             Options options = optionsWithTimeout(timeout, given);
             py::gil_scoped_release release;
             return PyCommunicator{Communicator::create(storeUrl, rank, size, options)};
           }),
           "store_url"_a, "rank"_a, "size"_a, "timeout"_a = py::none(), py::kw_only(),
           "options"_a = py::none(),
           R"doc(Connects to every other rank through the store at ``store_url``
("tcp://host:port" or "file:///path"). ``timeout`` (seconds; default CHORUS_TIMEOUT or 300)
bounds every step of every later call. ``options`` (chorus.Options): the settings, instead of
the CHORUS_* variables'. Blocks until all ``size`` ranks joined.)doc")
      .def_static(
          "from_env",
          [](std::optional<double> timeout, const std::optional<Options>& given) {
            Options options = optionsWithTimeout(timeout, given);
            py::gil_scoped_release release;
            return PyCommunicator{Communicator::fromEnv(options)};
          },
          "timeout"_a = py::none(), py::kw_only(), "options"_a = py::none(),
          R"doc(Rank, size and store from CHORUS_RANK, CHORUS_WORLD_SIZE and CHORUS_STORE (set by
chorus-run), or from the variables of mpirun and srun. A program started on its own gets a
world of one. A process an elastic launcher started as a replacement for a lost rank
(CHORUS_JOIN=1) gets an error: this API cannot join a running job. ``timeout`` and ``options``
as for the constructor.)doc")
      .def_property_readonly(
          "options", [](SelfArg self) { return commOf(self.obj, "options").options(); },
          "A copy of the settings this communicator runs with (chorus.Options).")
      .def_property_readonly(
          "rank", [](const PyCommunicator& c) { return c.rank; }, "This rank, 0..size-1.")
      .def_property_readonly(
          "size", [](const PyCommunicator& c) { return c.size; }, "Number of ranks.")
      .def("all_reduce", &allReduce, "buf"_a, py::arg_v("op", ReduceOp::kSum, "ReduceOp.SUM"),
           "out"_a = py::none(), py::kw_only(), "async_op"_a = false, "dtype"_a = py::none(),
           R"doc(Reduces ``buf`` over all ranks with ``op`` ("sum", "prod", "min", "max", "avg"
or a ReduceOp): in place, or into ``out`` (same size and type) when given.)doc")
      .def("reduce_scatter", &reduceScatter, "inbuf"_a, "outbuf"_a,
           py::arg_v("op", ReduceOp::kSum, "ReduceOp.SUM"), py::kw_only(), "async_op"_a = false,
           "dtype"_a = py::none(),
           R"doc(``inbuf`` holds size blocks of len(outbuf) elements; this rank receives block
``rank`` of their reduction in ``outbuf``.)doc")
      .def("reduce", &reduce, "inbuf"_a, "outbuf"_a = py::none(), "root"_a = 0,
           py::arg_v("op", ReduceOp::kSum, "ReduceOp.SUM"), py::kw_only(), "async_op"_a = false,
           "dtype"_a = py::none(),
           R"doc(The root receives the reduction of every rank's ``inbuf`` in ``outbuf`` (same
size), or in ``inbuf`` itself when ``outbuf`` is None. ``outbuf`` is not used elsewhere.)doc")
      .def("all_gather", &allGather, "inbuf"_a, "outbuf"_a, py::kw_only(), "async_op"_a = false,
           R"doc(``outbuf`` (size times the bytes of ``inbuf``) receives every rank's ``inbuf``,
in rank order.)doc")
      .def("broadcast", &broadcast, "buf"_a, "root"_a = 0, py::kw_only(), "async_op"_a = false,
           "Copies the root's ``buf`` into ``buf`` on every other rank.")
      .def("gather", &gather, "inbuf"_a, "outbuf"_a = py::none(), "root"_a = 0, py::kw_only(),
           "async_op"_a = false,
           R"doc(The root's ``outbuf`` (size times the bytes of ``inbuf``) receives every rank's
``inbuf`` in rank order; ``outbuf`` is not used elsewhere (None is fine).)doc")
      .def("scatter", &scatter, "inbuf"_a, "outbuf"_a, "root"_a = 0, py::kw_only(),
           "async_op"_a = false,
           R"doc(Rank r receives block r of the root's ``inbuf`` (size blocks of the bytes of
``outbuf``) in ``outbuf``; ``inbuf`` is not used elsewhere (None is fine).)doc")
      .def("all_to_all", &allToAll, "inbuf"_a, "outbuf"_a, py::kw_only(), "async_op"_a = false,
           R"doc(``inbuf`` and ``outbuf`` hold size equal blocks: block r of ``inbuf`` goes to
rank r, block r of ``outbuf`` comes from rank r.)doc")
      .def("send", &send, "buf"_a, "peer"_a, py::kw_only(), "async_op"_a = false,
           R"doc(Sends ``buf`` to rank ``peer``, whose matching recv has the same size. Both place
the call at the same point among their collectives.)doc")
      .def("recv", &recv, "buf"_a, "peer"_a, py::kw_only(), "async_op"_a = false,
           "Receives into ``buf`` what rank ``peer`` sends (the same size).")
      .def("barrier", &barrier, py::kw_only(), "async_op"_a = false,
           "Returns once every rank has entered the barrier.")
      .def("split", &split, "color"_a, "key"_a = 0,
           R"doc(Collective: ranks passing the same ``color`` form a new Communicator, ranked by
(key, rank here). ``color`` None (or negative) joins none and returns None.)doc")
      .def(
          "abort", [](SelfArg self) { commOf(self.obj, "abort").abort(); },
          R"doc(Fails the operation in progress, every queued and every later one (code
'ABORTED'), and tells the peers, whose calls fail naming this rank. Callable from any thread.)doc")
      .def(
          "last_algorithm",
          [](SelfArg self) { return commOf(self.obj, "last_algorithm").lastAlgorithm(); },
          R"doc(The algorithm of the most recent collective ("ring", "rd", "rhd", ..., "none" for a
world of one), "" before the first.)doc")
      .def(
          "transport_to",
          [](SelfArg self, int peer) { return commOf(self.obj, "transport_to").transportTo(peer); },
          "peer"_a, "How data reaches rank ``peer``: 'shm', 'tcp' or 'self'.")
      .def("close", &PyCommunicator::close,
           R"doc(Closes the communicator: the peers are told and the connections freed; an operation
still queued fails (wait for the Works of ``async_op=True`` calls first). Later calls raise
ValueError; closing again does nothing. ``with chorus.Communicator(...) as comm:`` closes it at
the end of the block.)doc")
      .def(
          "__enter__", [](SelfArg self) { return py::reinterpret_borrow<py::object>(self.obj); },
          "Returns the communicator itself.")
      .def(
          "__exit__",
          [](PyCommunicator& c, const py::args&) {
            c.close();
            return false;
          },
          "Closes the communicator; an exception in the block goes on.")
      .def("__repr__", [](const PyCommunicator& c) {
        return "<chorus.Communicator rank " + std::to_string(c.rank) + " of " +
               std::to_string(c.size) + (c.comm ? ">" : ", closed>");
      });
}

}  // namespace chorus::python
