// The C API of the collectives beyond the core five, and of point-to-point messages.
#include "core/c_api_support.h"

using namespace chorus::capi;

extern "C" {

// ---- Reduce, gather, scatter, the per-rank-count variants and all-to-all ----
// Blocking forms wait on the Work, which runs the call on the caller's thread when the
// communicator is idle.

chorus_status chorus_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                            chorus_dtype dtype, chorus_op op, int root) {
  return guarded(comm, [&] {
    comm->comm->reduce(sendbuf, recvbuf, count, dt(dtype), rop(op), root, chorus::Run::kBlocking);
  });
}

chorus_status chorus_ireduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                             chorus_dtype dtype, chorus_op op, int root, chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->reduce(sendbuf, recvbuf, count, dt(dtype), rop(op), root);
  });
}

chorus_status chorus_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                            chorus_dtype dtype, int root) {
  return guarded(comm, [&] {
    comm->comm->gather(sendbuf, recvbuf, sendcount, dt(dtype), root, chorus::Run::kBlocking);
  });
}

chorus_status chorus_igather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                             size_t sendcount, chorus_dtype dtype, int root,
                             chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->gather(sendbuf, recvbuf, sendcount, dt(dtype), root);
  });
}

chorus_status chorus_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                             size_t recvcount, chorus_dtype dtype, int root) {
  return guarded(comm, [&] {
    comm->comm->scatter(sendbuf, recvbuf, recvcount, dt(dtype), root, chorus::Run::kBlocking);
  });
}

chorus_status chorus_iscatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                              size_t recvcount, chorus_dtype dtype, int root,
                              chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->scatter(sendbuf, recvbuf, recvcount, dt(dtype), root);
  });
}

chorus_status chorus_all_gather_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                  const size_t* recvcounts, chorus_dtype dtype) {
  return guarded(comm, [&] {
    comm->comm->allGatherV(sendbuf, recvbuf, recvcounts, dt(dtype), chorus::Run::kBlocking);
  });
}

chorus_status chorus_iall_gather_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                   const size_t* recvcounts, chorus_dtype dtype,
                                   chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->allGatherV(sendbuf, recvbuf, recvcounts, dt(dtype));
  });
}

chorus_status chorus_reduce_scatter_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                      const size_t* recvcounts, chorus_dtype dtype, chorus_op op) {
  return guarded(comm, [&] {
    comm->comm->reduceScatterV(sendbuf, recvbuf, recvcounts, dt(dtype), rop(op),
                               chorus::Run::kBlocking);
  });
}

chorus_status chorus_ireduce_scatter_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                       const size_t* recvcounts, chorus_dtype dtype, chorus_op op,
                                       chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->reduceScatterV(sendbuf, recvbuf, recvcounts, dt(dtype), rop(op));
  });
}

chorus_status chorus_all_to_all(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_dtype dtype) {
  return guarded(comm, [&] {
    comm->comm->allToAll(sendbuf, recvbuf, count, dt(dtype), chorus::Run::kBlocking);
  });
}

chorus_status chorus_iall_to_all(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                 size_t count, chorus_dtype dtype, chorus_request** request) {
  return startRequest(comm, request,
                      [&] { return comm->comm->allToAll(sendbuf, recvbuf, count, dt(dtype)); });
}

chorus_status chorus_all_to_all_v(chorus_comm* comm, const void* sendbuf, const size_t* sendcounts,
                                  void* recvbuf, const size_t* recvcounts, chorus_dtype dtype) {
  return guarded(comm, [&] {
    comm->comm->allToAllV(sendbuf, sendcounts, recvbuf, recvcounts, dt(dtype),
                          chorus::Run::kBlocking);
  });
}

chorus_status chorus_iall_to_all_v(chorus_comm* comm, const void* sendbuf, const size_t* sendcounts,
                                   void* recvbuf, const size_t* recvcounts, chorus_dtype dtype,
                                   chorus_request** request) {
  return startRequest(comm, request, [&] {
    return comm->comm->allToAllV(sendbuf, sendcounts, recvbuf, recvcounts, dt(dtype));
  });
}

chorus_status chorus_send(chorus_comm* comm, const void* buf, size_t count, chorus_dtype dtype,
                          int peer) {
  return guarded(comm,
                 [&] { comm->comm->send(buf, count, dt(dtype), peer, chorus::Run::kBlocking); });
}

chorus_status chorus_isend(chorus_comm* comm, const void* buf, size_t count, chorus_dtype dtype,
                           int peer, chorus_request** request) {
  return startRequest(comm, request, [&] { return comm->comm->send(buf, count, dt(dtype), peer); });
}

chorus_status chorus_recv(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype,
                          int peer) {
  return guarded(comm,
                 [&] { comm->comm->recv(buf, count, dt(dtype), peer, chorus::Run::kBlocking); });
}

chorus_status chorus_irecv(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype, int peer,
                           chorus_request** request) {
  return startRequest(comm, request, [&] { return comm->comm->recv(buf, count, dt(dtype), peer); });
}

}  // extern "C"
