// The C API: a thin layer over Communicator that turns exceptions into status codes.
#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

#include "core/c_api_support.h"
#include "core/c_enum.h"
#include "core/c_options.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

using namespace chorus::capi;

namespace {

chorus_status copyRanks(chorus_comm* comm, const char* what, int* ranks, int capacity, int* count,
                        std::vector<int> (chorus::Communicator::*get)() const) {
  return guarded(comm, [&] {
    if (count == nullptr || capacity < 0 || (ranks == nullptr && capacity > 0)) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          std::string(what) + ": count is null, or ranks is null with capacity " +
                              std::to_string(capacity));
    }
    const std::vector<int> all = (comm->comm.get()->*get)();
    for (size_t i = 0; i < all.size() && i < static_cast<size_t>(capacity); ++i) ranks[i] = all[i];
    *count = static_cast<int>(all.size());
  });
}

}  // namespace

extern "C" {

void chorus_get_version(int* major, int* minor, int* patch) {
  if (major) *major = CHORUS_VERSION_MAJOR;
  if (minor) *minor = CHORUS_VERSION_MINOR;
  if (patch) *patch = CHORUS_VERSION_PATCH;
}

chorus_status chorus_get_launch_info(chorus_launch_info* info) {
  try {
    if (info == nullptr || info->struct_size < sizeof(chorus_launch_info)) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_get_launch_info: info is null or its struct_size too small");
    }
    const chorus::LaunchInfo launch = chorus::launchInfoFromEnv();
    auto copy = [](char* field, size_t capacity, const std::string& text, const char* name) {
      if (text.size() >= capacity) {
        throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                            std::string("chorus_get_launch_info: the ") + name + " '" + text +
                                "' is longer than the field (" + std::to_string(capacity - 1) +
                                " characters)");
      }
      std::memcpy(field, text.c_str(), text.size() + 1);
    };
    chorus_launch_info out{};
    out.struct_size = sizeof(out);
    out.rank = launch.rank;
    out.world_size = launch.size;
    out.local_rank = launch.localRank;
    out.local_size = launch.localSize;
    copy(out.launcher, sizeof(out.launcher), launch.launcher, "launcher");
    copy(out.store, sizeof(out.store), launch.store, "store");
    copy(out.store_from, sizeof(out.store_from), launch.storeFrom, "store source");
    *info = out;
    return CHORUS_OK;
  } catch (const chorus::Error& e) {
    initError = e.what();
    return toStatus(e.code());
  }
}

chorus_status chorus_comm_init_with_options(const char* store_url, int rank, int world_size,
                                            const chorus_options* options, chorus_comm** comm) {
  return initWith(comm, [&] {
    if (store_url == nullptr) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_comm_init_with_options: store_url is null");
    }
    return chorus::Communicator::create(store_url, rank, world_size, chorus::optionsFromC(options));
  });
}

chorus_status chorus_comm_init_from_env_with_options(const chorus_options* options,
                                                     chorus_comm** comm) {
  return initWith(comm,
                  [&] { return chorus::Communicator::fromEnv(chorus::optionsFromC(options)); });
}

chorus_status chorus_comm_init_from_env_or_join(const chorus_options* options, chorus_comm** comm) {
  return initWith(
      comm, [&] { return chorus::Communicator::fromEnvOrJoin(chorus::optionsFromC(options)); });
}

chorus_status chorus_comm_init_from_env(chorus_comm** comm) {
  return initWith(comm, [] { return chorus::Communicator::fromEnv(); });
}

chorus_status chorus_comm_init(const char* store_url, int rank, int world_size,
                               chorus_comm** comm) {
  return initWith(comm, [&] {
    if (store_url == nullptr) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_comm_init: store_url is null");
    }
    return chorus::Communicator::create(store_url, rank, world_size);
  });
}

chorus_status chorus_comm_destroy(chorus_comm* comm) {
  delete comm;
  return CHORUS_OK;
}

int chorus_comm_rank(const chorus_comm* comm) { return comm ? comm->comm->rank() : -1; }
int chorus_comm_size(const chorus_comm* comm) { return comm ? comm->comm->size() : -1; }

chorus_status chorus_all_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_dtype dtype, chorus_op op) {
  return guarded(comm, [&] {
    comm->comm->allReduce(sendbuf, recvbuf, count, dt(dtype), rop(op), chorus::Run::kBlocking);
  });
}

chorus_status chorus_reduce_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                    size_t recvcount, chorus_dtype dtype, chorus_op op) {
  return guarded(comm, [&] {
    comm->comm->reduceScatter(sendbuf, recvbuf, recvcount, dt(dtype), rop(op),
                              chorus::Run::kBlocking);
  });
}

chorus_status chorus_all_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                size_t sendcount, chorus_dtype dtype) {
  return guarded(comm, [&] {
    comm->comm->allGather(sendbuf, recvbuf, sendcount, dt(dtype), chorus::Run::kBlocking);
  });
}

chorus_status chorus_broadcast(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype,
                               int root) {
  return guarded(
      comm, [&] { comm->comm->broadcast(buf, count, dt(dtype), root, chorus::Run::kBlocking); });
}

chorus_status chorus_barrier(chorus_comm* comm) {
  return guarded(comm, [&] { comm->comm->barrier(chorus::Run::kBlocking); });
}

chorus_status chorus_comm_split(chorus_comm* comm, int color, int key, chorus_comm** out) {
  if (out == nullptr) {
    initError = "chorus_comm_split: out pointer is null";
    if (comm) comm->setError(initError);
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  return guarded(comm, [&] {
    auto child = comm->comm->split(color, key);
    if (!child) return;
    auto c = std::make_unique<chorus_comm>();
    c->comm = std::move(child);
    *out = c.release();
  });
}

chorus_status chorus_comm_shrink(chorus_comm* comm, chorus_comm** out) {
  if (out == nullptr) {
    initError = "chorus_comm_shrink: out pointer is null";
    if (comm) comm->setError(initError);
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  return guarded(comm, [&] {
    auto c = std::make_unique<chorus_comm>();
    c->comm = comm->comm->shrink();
    *out = c.release();
  });
}

chorus_status chorus_comm_join(const char* store_url, const chorus_options* options,
                               chorus_comm** out) {
  return initWith(out, [&] {
    if (store_url == nullptr) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_comm_join: store_url is null");
    }
    return chorus::Communicator::join(std::string(store_url), chorus::optionsFromC(options));
  });
}

chorus_status chorus_comm_failed_ranks(chorus_comm* comm, int* ranks, int capacity, int* count) {
  return copyRanks(comm, "chorus_comm_failed_ranks", ranks, capacity, count,
                   &chorus::Communicator::failedRanks);
}

chorus_status chorus_comm_former_ranks(chorus_comm* comm, int* ranks, int capacity, int* count) {
  return copyRanks(comm, "chorus_comm_former_ranks", ranks, capacity, count,
                   &chorus::Communicator::formerRanks);
}

chorus_status chorus_comm_generation(chorus_comm* comm, uint64_t* generation) {
  return guarded(comm, [&] {
    if (generation == nullptr) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_comm_generation: generation is null");
    }
    *generation = comm->comm->generation();
  });
}

chorus_status chorus_comm_joiners_waiting(chorus_comm* comm, int* count) {
  return guarded(comm, [&] {
    if (count == nullptr) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_comm_joiners_waiting: count is null");
    }
    *count = comm->comm->joinersWaiting();
  });
}

// ---- Reduced-precision wire formats ----

namespace {
chorus::CallOptions callOptions(const chorus_collective_options* options) {
  chorus::CallOptions call;
  if (options == nullptr) return call;
  if (options->struct_size < sizeof(size_t)) {
    throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                        "chorus_collective_options: struct_size " +
                            std::to_string(options->struct_size) +
                            " is too small: set it to sizeof(chorus_collective_options)");
  }
  // Fields past the caller's struct_size are zero ("not set"); bytes past ours are ignored.
  chorus_collective_options given{};
  std::memcpy(&given, options, std::min(options->struct_size, sizeof(given)));
  const int v = chorus::rawEnum(given.wire);
  if (v < 0 || v >= chorus::kNumWireFormats) {
    throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                        "allreduce: unknown wire format " + std::to_string(v) +
                            " (choices: CHORUS_WIRE_NATIVE, _BF16, _FP16, _INT8)");
  }
  call.wire = static_cast<chorus::WireFormat>(v);
  return call;
}
}  // namespace

chorus_status chorus_all_reduce_with_options(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                             size_t count, chorus_dtype dtype, chorus_op op,
                                             const chorus_collective_options* options) {
  return guarded(comm, [&] {
    comm->comm->allReduce(sendbuf, recvbuf, count, dt(dtype), rop(op), callOptions(options),
                          chorus::Run::kBlocking);
  });
}

chorus_status chorus_iall_reduce_with_options(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                              size_t count, chorus_dtype dtype, chorus_op op,
                                              const chorus_collective_options* options,
                                              chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->allReduce(sendbuf, recvbuf, count, dt(dtype), rop(op), callOptions(options));
  });
}

chorus_status chorus_comm_bytes_sent(const chorus_comm* comm, uint64_t* out) {
  return guarded(const_cast<chorus_comm*>(comm), [&] {
    if (out == nullptr) {
      throw chorus::Error(chorus::ErrorCode::kInvalidArgument,
                          "chorus_comm_bytes_sent: out is null");
    }
    *out = comm->comm->bytesSent();
  });
}

chorus_status chorus_iall_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                 size_t count, chorus_dtype dtype, chorus_op op,
                                 chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->allReduce(sendbuf, recvbuf, count, dt(dtype), rop(op));
  });
}

chorus_status chorus_ireduce_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                     size_t recvcount, chorus_dtype dtype, chorus_op op,
                                     chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->reduceScatter(sendbuf, recvbuf, recvcount, dt(dtype), rop(op));
  });
}

chorus_status chorus_iall_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                 size_t sendcount, chorus_dtype dtype, chorus_request** request) {
  return startRequest(
      comm, request, [&] { return comm->comm->allGather(sendbuf, recvbuf, sendcount, dt(dtype)); });
}

chorus_status chorus_ibroadcast(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype,
                                int root, chorus_request** request) {
  return startRequest(comm, request,
                      [&] { return comm->comm->broadcast(buf, count, dt(dtype), root); });
}

chorus_status chorus_ibarrier(chorus_comm* comm, chorus_request** request) {
  return startRequest(comm, request, [&] { return comm->comm->barrier(); });
}

chorus_status chorus_request_wait(chorus_request* request) {
  if (request == nullptr) {
    initError = "chorus_request_wait: request is null";
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  std::unique_ptr<chorus_request> owned(request);
  return guarded(owned->comm, [&] { owned->work.wait(); });
}

chorus_status chorus_request_test(chorus_request* request, int* done) {
  if (request == nullptr || done == nullptr) {
    initError = "chorus_request_test: request or done is null";
    if (request) request->comm->setError(initError);
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  *done = request->work.isCompleted() ? 1 : 0;
  return CHORUS_OK;
}

chorus_status chorus_request_free(chorus_request* request) {
  if (request == nullptr) return CHORUS_OK;
  // The work's state is shared with the queue: a pending operation keeps running and finishes
  // it; dropping this handle frees only the handle.
  std::unique_ptr<chorus_request> owned(request);
  if (!owned->work.isCompleted()) return CHORUS_OK;
  return guarded(owned->comm, [&] { owned->work.wait(); });
}

chorus_status chorus_comm_abort(chorus_comm* comm) {
  return guarded(comm, [&] { comm->comm->abort(); });
}

chorus_status chorus_comm_dump_trace(chorus_comm* comm, const char* path) {
  return guarded(comm, [&] { comm->comm->dumpTrace(path ? path : ""); });
}

chorus_status chorus_comm_get_async_error(chorus_comm* comm, chorus_status* status) {
  if (status == nullptr) {
    initError = "chorus_comm_get_async_error: status is null";
    if (comm) comm->setError(initError);
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  *status = CHORUS_OK;
  if (comm == nullptr) {
    initError = "chorus_comm_get_async_error: communicator is null";
    return CHORUS_ERR_INVALID_ARGUMENT;
  }
  std::exception_ptr cause = comm->comm->abortCause();
  if (cause) *status = guarded(comm, [&] { std::rethrow_exception(cause); });
  return CHORUS_OK;
}

const char* chorus_last_error(const chorus_comm* comm) {
  if (comm == nullptr) return initError.c_str();
  // A copy per thread and communicator: the string stays valid on this thread while other threads
  // fail calls on comm. Keyed by address: a communicator made where a destroyed one was reuses
  // its slot, overwritten here before it is returned.
  thread_local std::unordered_map<const chorus_comm*, std::string> copies;
  std::string& copy = copies[comm];
  copy = comm->error();
  return copy.c_str();
}

const char* chorus_status_string(chorus_status status) {
  switch (status) {
    case CHORUS_OK:
      return "CHORUS_OK";
    case CHORUS_ERR_INVALID_ARGUMENT:
      return "CHORUS_ERR_INVALID_ARGUMENT";
    case CHORUS_ERR_TIMEOUT:
      return "CHORUS_ERR_TIMEOUT";
    case CHORUS_ERR_PEER_FAILURE:
      return "CHORUS_ERR_PEER_FAILURE";
    case CHORUS_ERR_MISMATCH:
      return "CHORUS_ERR_MISMATCH";
    case CHORUS_ERR_ABORTED:
      return "CHORUS_ERR_ABORTED";
    case CHORUS_ERR_SYSTEM:
      return "CHORUS_ERR_SYSTEM";
    case CHORUS_ERR_INTERNAL:
      return "CHORUS_ERR_INTERNAL";
  }
  return "CHORUS_ERR_UNKNOWN";
}

void* chorus_mem_alloc(chorus_comm* comm, size_t bytes) {
  void* p = nullptr;
  if (guarded(comm, [&] { p = comm->comm->allocate(bytes); }) != CHORUS_OK) return nullptr;
  return p;
}

chorus_status chorus_mem_free(chorus_comm* comm, void* ptr) {
  if (ptr == nullptr) return comm ? CHORUS_OK : guarded(comm, [] {});
  return guarded(comm, [&] { comm->comm->deallocate(ptr); });
}

}  // extern "C"

namespace chorus {
Communicator& communicatorOf(chorus_comm* comm) {
  if (comm == nullptr) throw Error(ErrorCode::kInvalidArgument, "communicatorOf: null handle");
  return *comm->comm;
}
}  // namespace chorus
