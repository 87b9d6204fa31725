/* Chorus: collective communication for data-parallel training. C API (stable ABI). */
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct chorus_comm chorus_comm; /* opaque */

typedef enum {
  CHORUS_OK = 0,
  CHORUS_ERR_INVALID_ARGUMENT,
  CHORUS_ERR_TIMEOUT,
  CHORUS_ERR_PEER_FAILURE,
  CHORUS_ERR_MISMATCH,
  CHORUS_ERR_ABORTED,
  CHORUS_ERR_SYSTEM,
  CHORUS_ERR_INTERNAL
} chorus_status;

typedef enum {
  CHORUS_F32,
  CHORUS_F64,
  CHORUS_F16,
  CHORUS_BF16,
  CHORUS_I8,
  CHORUS_U8,
  CHORUS_I32,
  CHORUS_I64
} chorus_dtype;

typedef enum { CHORUS_SUM, CHORUS_PROD, CHORUS_MIN, CHORUS_MAX, CHORUS_AVG } chorus_op;

/* Creates a communicator from CHORUS_RANK / CHORUS_WORLD_SIZE / CHORUS_STORE, or from the rank and
 * size that Open MPI, MPICH (PMI) or Slurm put in the environment. */
chorus_status chorus_init_from_env(chorus_comm** comm);
/* store_url: "tcp://host:port" or "file:///path". */
chorus_status chorus_init(const char* store_url, int rank, int world_size, chorus_comm** comm);
/* Always returns promptly, also after a failure. Accepts NULL. */
chorus_status chorus_destroy(chorus_comm* comm);

int chorus_rank(const chorus_comm* comm);
int chorus_world_size(const chorus_comm* comm);

chorus_status chorus_allreduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_dtype dtype, chorus_op op);
chorus_status chorus_reduce_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                    size_t recvcount, chorus_dtype dtype, chorus_op op);
chorus_status chorus_all_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                size_t sendcount, chorus_dtype dtype);
chorus_status chorus_broadcast(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype,
                               int root);
chorus_status chorus_barrier(chorus_comm* comm);

/* Reduce, gather, scatter, the per-rank-count variants and all-to-all, blocking and (i-prefix)
 * non-blocking; requests as for chorus_iallreduce below. Every rank calls them in the same order
 * as the other collectives; calls that differ (collective, count, counts, root) fail with
 * CHORUS_ERR_MISMATCH on the ranks involved. Buffers used only on the root may be NULL on other
 * ranks. In place (as MPI_IN_PLACE) means passing the same memory where noted below; any other
 * overlap of send and receive buffers is CHORUS_ERR_INVALID_ARGUMENT. Count arrays hold one
 * entry per rank and are copied by the call. Displacements are the prefix sums of the counts. */
struct chorus_request;
/* The root gets the reduction of every rank's sendbuf. In place on the root: sendbuf == recvbuf. */
chorus_status chorus_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                            chorus_dtype dtype, chorus_op op, int root);
chorus_status chorus_ireduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                             chorus_dtype dtype, chorus_op op, int root,
                             struct chorus_request** request);
/* The root's recvbuf holds world_size * sendcount elements, block r from rank r. In place on the
 * root: sendbuf == recvbuf + root * sendcount. */
chorus_status chorus_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t sendcount,
                            chorus_dtype dtype, int root);
chorus_status chorus_igather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                             size_t sendcount, chorus_dtype dtype, int root,
                             struct chorus_request** request);
/* The root's sendbuf holds world_size * recvcount elements; rank r receives block r. In place on
 * the root: recvbuf == sendbuf + root * recvcount. */
chorus_status chorus_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                             size_t recvcount, chorus_dtype dtype, int root);
chorus_status chorus_iscatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                              size_t recvcount, chorus_dtype dtype, int root,
                              struct chorus_request** request);
/* Rank r contributes recvcounts[r] elements (every rank passes the same recvcounts); recvbuf
 * receives them in rank order. In place: sendbuf == recvbuf + the counts of the ranks before. */
chorus_status chorus_all_gather_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                  const size_t* recvcounts, chorus_dtype dtype);
chorus_status chorus_iall_gather_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                   const size_t* recvcounts, chorus_dtype dtype,
                                   struct chorus_request** request);
/* A message to / from one other rank (peer). Only the two ranks take part, each at the same point
 * among its collectives; a pair's messages arrive in the order they were sent, and the receiver's
 * count must match (else CHORUS_ERR_MISMATCH). A send may return before the matching recv starts,
 * except for messages larger than the transport buffers, which wait for it: two ranks that
 * exchange large messages call send-then-recv on one and recv-then-send on the other. */
chorus_status chorus_send(chorus_comm* comm, const void* buf, size_t count, chorus_dtype dtype,
                          int peer);
chorus_status chorus_isend(chorus_comm* comm, const void* buf, size_t count, chorus_dtype dtype,
                           int peer, struct chorus_request** request);
chorus_status chorus_recv(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype, int peer);
chorus_status chorus_irecv(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype, int peer,
                           struct chorus_request** request);
/* sendbuf holds blocks of recvcounts[0], recvcounts[1], ... elements (the same recvcounts on
 * every rank); rank r receives the reduction of block r. In place: recvbuf == sendbuf + the
 * counts of the ranks before. */
chorus_status chorus_reduce_scatter_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                      const size_t* recvcounts, chorus_dtype dtype, chorus_op op);
chorus_status chorus_ireduce_scatter_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                       const size_t* recvcounts, chorus_dtype dtype, chorus_op op,
                                       struct chorus_request** request);
/* Block r (count elements) of sendbuf goes to rank r; block r of recvbuf comes from rank r. In
 * place: sendbuf == recvbuf. */
chorus_status chorus_all_to_all(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_dtype dtype);
chorus_status chorus_iall_to_all(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                 size_t count, chorus_dtype dtype, struct chorus_request** request);
/* sendcounts[r] elements to rank r, recvcounts[r] from it (rank q's recvcounts[r] must equal rank
 * r's sendcounts[q], else CHORUS_ERR_MISMATCH). No in-place form. */
chorus_status chorus_all_to_all_v(chorus_comm* comm, const void* sendbuf, const size_t* sendcounts,
                                  void* recvbuf, const size_t* recvcounts, chorus_dtype dtype);
chorus_status chorus_iall_to_all_v(chorus_comm* comm, const void* sendbuf, const size_t* sendcounts,
                                   void* recvbuf, const size_t* recvcounts, chorus_dtype dtype,
                                   struct chorus_request** request);

/* Color for chorus_comm_split (any negative value works): the rank joins no new communicator. */
#define CHORUS_NO_COLOR (-1)
/* Collective over comm (every rank calls it, in the same order as other collectives): ranks with
 * the same color form a new communicator, ranked by (key, rank in comm), returned in *out, which
 * the caller destroys with chorus_destroy. With a negative color *out is set to NULL. The new
 * communicator has comm's settings; comm stays valid. */
chorus_status chorus_comm_split(chorus_comm* comm, int color, int key, chorus_comm** out);

/* Non-blocking variants. Each returns a request that must be passed to chorus_wait (or, once
 * chorus_test reported completion, to chorus_request_free). Requests complete in issue order. */
typedef struct chorus_request chorus_request; /* opaque */
chorus_status chorus_iallreduce(chorus_comm* comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_dtype dtype, chorus_op op, chorus_request** request);
chorus_status chorus_ireduce_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                     size_t recvcount, chorus_dtype dtype, chorus_op op,
                                     chorus_request** request);
chorus_status chorus_iall_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                 size_t sendcount, chorus_dtype dtype, chorus_request** request);
chorus_status chorus_ibroadcast(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype,
                                int root, chorus_request** request);
/* Waits for completion and frees the request. */
chorus_status chorus_wait(chorus_request* request);
/* Sets *done to 1 when the request has completed (then chorus_wait returns at once). */
chorus_status chorus_test(chorus_request* request, int* done);

/* Message of this communicator's last failure ("" if none). Valid until the next call on comm.
 * With comm == NULL: the last failure on this thread that had no communicator (chorus_init*,
 * a call with a null communicator or request). */
const char* chorus_last_error(const chorus_comm* comm);
const char* chorus_status_string(chorus_status status);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHORUS_CHORUS_H_ */
