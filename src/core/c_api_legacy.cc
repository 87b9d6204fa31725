// The C API's names of version 0.1, deprecated in chorus.h and kept for one more release: real
// exported functions, so that programs built against 0.1 link and run unchanged, and programs
// written for it still build (with a deprecation warning naming the replacement).
#include <chorus/chorus.h>
#include <chorus/chorus.hpp>

chorus_status chorus_init(const char* store_url, int rank, int world_size, chorus_comm** comm) {
  return chorus_comm_init(store_url, rank, world_size, comm);
}

// 0.1's from-environment calls joined the running job under CHORUS_JOIN=1; they still do.
chorus_status chorus_init_from_env(chorus_comm** comm) {
  return chorus_comm_init_from_env_or_join(nullptr, comm);
}

chorus_status chorus_init_with_options(const char* store_url, int rank, int world_size,
                                       const chorus_options* options, chorus_comm** comm) {
  return chorus_comm_init_with_options(store_url, rank, world_size, options, comm);
}

chorus_status chorus_init_from_env_with_options(const chorus_options* options, chorus_comm** comm) {
  return chorus_comm_init_from_env_or_join(options, comm);
}

chorus_status chorus_destroy(chorus_comm* comm) { return chorus_comm_destroy(comm); }
int chorus_rank(const chorus_comm* comm) { return chorus_comm_rank(comm); }
int chorus_world_size(const chorus_comm* comm) { return chorus_comm_size(comm); }
chorus_status chorus_abort(chorus_comm* comm) { return chorus_comm_abort(comm); }

chorus_status chorus_dump_trace(chorus_comm* comm, const char* path) {
  return chorus_comm_dump_trace(comm, path);
}

chorus_status chorus_wait(chorus_request* request) { return chorus_request_wait(request); }

chorus_status chorus_test(chorus_request* request, int* done) {
  return chorus_request_test(request, done);
}

chorus_status chorus_allreduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_dtype dtype, chorus_op op) {
  return chorus_all_reduce(comm, sendbuf, recvbuf, count, dtype, op);
}

chorus_status chorus_iallreduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_dtype dtype, chorus_op op, chorus_request** request) {
  return chorus_iall_reduce(comm, sendbuf, recvbuf, count, dtype, op, request);
}

namespace {
// 0.1's struct had no struct_size: its one field becomes the new struct's.
void fromOld(const struct chorus_call_options* old, chorus_collective_options* out) {
  *out = chorus_collective_options{sizeof(chorus_collective_options), old->wire};
}
}  // namespace

chorus_status chorus_all_reduce_opts(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                     size_t count, chorus_dtype dtype, chorus_op op,
                                     const struct chorus_call_options* options) {
  chorus_collective_options o{};
  if (options != nullptr) fromOld(options, &o);
  return chorus_all_reduce_with_options(comm, sendbuf, recvbuf, count, dtype, op,
                                        options ? &o : nullptr);
}

chorus_status chorus_iall_reduce_opts(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                      size_t count, chorus_dtype dtype, chorus_op op,
                                      const struct chorus_call_options* options,
                                      chorus_request** request) {
  chorus_collective_options o{};
  if (options != nullptr) fromOld(options, &o);
  return chorus_iall_reduce_with_options(comm, sendbuf, recvbuf, count, dtype, op,
                                         options ? &o : nullptr, request);
}
