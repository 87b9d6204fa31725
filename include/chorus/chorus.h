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
