/* Chorus: collective communication for data-parallel training. C API (stable ABI; docs/api.md).
 *
 * Names: chorus_comm_* create, query, change or end a communicator; chorus_<collective> runs one
 * (chorus_i<collective> without blocking, returning a request; _with_options: the same with an
 * options struct); chorus_request_* wait for, test or free a request; chorus_mem_* handle
 * registered memory; chorus_get_*, chorus_last_error and chorus_status_string are process-wide.
 * Constants are CHORUS_<TYPE>_<VALUE> (CHORUS_DTYPE_F32, CHORUS_OP_SUM, CHORUS_WIRE_BF16), but
 * for the status codes CHORUS_OK and CHORUS_ERR_*. Options structs start with struct_size.
 * The names of version 0.1 (chorus_init, chorus_destroy, CHORUS_F32, ...) stay for one more
 * release, marked deprecated, at the end of this file. */
#ifndef CHORUS_CHORUS_H_
#define CHORUS_CHORUS_H_

#include <stddef.h>
#include <stdint.h>

#include <chorus/export.h>

/* Version of these headers; chorus_get_version gives the library's (they differ when a program
 * runs against another build of libchorus than it was compiled with). */
#define CHORUS_VERSION_MAJOR 0
#define CHORUS_VERSION_MINOR 2
#define CHORUS_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CHORUS_DEPRECATED(replacement) __attribute__((deprecated("use " replacement)))
#else
#define CHORUS_DEPRECATED(replacement)
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
  CHORUS_DTYPE_F32,
  CHORUS_DTYPE_F64,
  CHORUS_DTYPE_F16,
  CHORUS_DTYPE_BF16,
  CHORUS_DTYPE_I8,
  CHORUS_DTYPE_U8,
  CHORUS_DTYPE_I32,
  CHORUS_DTYPE_I64,
  /* Version 0.1's names. */
  CHORUS_F32 CHORUS_DEPRECATED("CHORUS_DTYPE_F32") = CHORUS_DTYPE_F32,
  CHORUS_F64 CHORUS_DEPRECATED("CHORUS_DTYPE_F64") = CHORUS_DTYPE_F64,
  CHORUS_F16 CHORUS_DEPRECATED("CHORUS_DTYPE_F16") = CHORUS_DTYPE_F16,
  CHORUS_BF16 CHORUS_DEPRECATED("CHORUS_DTYPE_BF16") = CHORUS_DTYPE_BF16,
  CHORUS_I8 CHORUS_DEPRECATED("CHORUS_DTYPE_I8") = CHORUS_DTYPE_I8,
  CHORUS_U8 CHORUS_DEPRECATED("CHORUS_DTYPE_U8") = CHORUS_DTYPE_U8,
  CHORUS_I32 CHORUS_DEPRECATED("CHORUS_DTYPE_I32") = CHORUS_DTYPE_I32,
  CHORUS_I64 CHORUS_DEPRECATED("CHORUS_DTYPE_I64") = CHORUS_DTYPE_I64
} chorus_dtype;

typedef enum {
  CHORUS_OP_SUM,
  CHORUS_OP_PROD,
  CHORUS_OP_MIN,
  CHORUS_OP_MAX,
  CHORUS_OP_AVG,
  /* Version 0.1's names. */
  CHORUS_SUM CHORUS_DEPRECATED("CHORUS_OP_SUM") = CHORUS_OP_SUM,
  CHORUS_PROD CHORUS_DEPRECATED("CHORUS_OP_PROD") = CHORUS_OP_PROD,
  CHORUS_MIN CHORUS_DEPRECATED("CHORUS_OP_MIN") = CHORUS_OP_MIN,
  CHORUS_MAX CHORUS_DEPRECATED("CHORUS_OP_MAX") = CHORUS_OP_MAX,
  CHORUS_AVG CHORUS_DEPRECATED("CHORUS_OP_AVG") = CHORUS_OP_AVG
} chorus_op;

/* Version of the library this program runs with. Any pointer may be NULL (that part is skipped). */
CHORUS_API void chorus_get_version(int* major, int* minor, int* patch);

/* Where this process sits in its job, as its launcher says (docs/config.md, "Launch variables"),
 * before any communicator exists: to pick a core or a device by local rank, or to log the launch.
 * struct_size must be sizeof(chorus_launch_info) of the caller's header. */
typedef struct chorus_launch_info {
  size_t struct_size;
  int rank;
  int world_size;
  int local_rank;      /* index among the ranks of this host; -1 when the launcher does not say */
  int local_size;      /* ranks on this host; -1 when the launcher does not say */
  char launcher[32];   /* "chorus", "torchrun", "Open MPI", "MPICH (Hydra)", "Slurm", "alone" */
  char store[256];     /* the store URL the ranks meet at ("" when alone) */
  char store_from[64]; /* "CHORUS_STORE", "Slurm job J step S", "MASTER_ADDR, MASTER_PORT + 1" */
} chorus_launch_info;
/* CHORUS_ERR_INVALID_ARGUMENT (chorus_last_error(NULL) says why) when a launch variable is missing
 * or malformed, info is NULL, struct_size is too small, or a text does not fit its field. */
CHORUS_API chorus_status chorus_get_launch_info(chorus_launch_info* info);

/* Creates a communicator from CHORUS_RANK / CHORUS_WORLD_SIZE / CHORUS_STORE, or from the
 * variables torchrun, Open MPI, MPICH's Hydra or Slurm put in the environment (the store address
 * derived under Slurm and torchrun). In a process an elastic launcher started as a replacement
 * (CHORUS_JOIN=1) it fails with CHORUS_ERR_INVALID_ARGUMENT: such a program calls
 * chorus_comm_init_from_env_or_join. */
CHORUS_API chorus_status chorus_comm_init_from_env(chorus_comm** comm);
/* store_url: "tcp://host:port" or "file:///path". */
CHORUS_API chorus_status chorus_comm_init(const char* store_url, int rank, int world_size,
                                          chorus_comm** comm);
/* Settings for chorus_comm_init_with_options. Every field left zero (or NULL) keeps the value of
 * the matching CHORUS_* variable when it is set, else the built-in default (docs/config.md), so
 *   chorus_options o = {sizeof(o)};  o.timeout_ms = 5000;
 * changes only the timeout. struct_size must be sizeof(chorus_options) of the header the caller
 * was compiled with: later versions only add fields at the end, and fields beyond struct_size
 * count as zero. Strings are copied; the struct may be freed after the call. */
typedef enum {
  CHORUS_TRANSPORT_DEFAULT = 0, /* CHORUS_TRANSPORT, else AUTO */
  CHORUS_TRANSPORT_AUTO,        /* shared memory to ranks on this host, TCP to the others */
  CHORUS_TRANSPORT_TCP,         /* TCP to every peer */
  CHORUS_TRANSPORT_SHM          /* shared memory to every peer (all on one host) */
} chorus_transport;
typedef enum {
  CHORUS_DEBUG_DEFAULT = 0, /* CHORUS_DEBUG, else OFF */
  CHORUS_DEBUG_OFF,
  CHORUS_DEBUG_RANK0, /* one line per collective on rank 0's stderr */
  CHORUS_DEBUG_ALL    /* the same on every rank */
} chorus_debug;
typedef enum {
  CHORUS_AUTH_DEFAULT = 0, /* CHORUS_AUTH, else AUTO */
  CHORUS_AUTH_AUTO,        /* authenticate when a key is set */
  CHORUS_AUTH_OFF,         /* never, even with a key */
  CHORUS_AUTH_REQUIRED     /* refuse to run without a key */
} chorus_auth_mode;
typedef struct chorus_options {
  size_t struct_size;
  long long timeout_ms;       /* longest wait for one step (a message, a store key) */
  const char* algorithm;      /* as CHORUS_ALGO: "auto", "ring", "allreduce=tree,broadcast=chain" */
  chorus_transport transport; /* see chorus_transport */
  chorus_debug debug;         /* see chorus_debug */
  size_t segment_bytes;       /* pipelining unit of the ring algorithms */
  const char* ifname;         /* network interface to listen on */
  const char* host_id;        /* which host this rank is on */
  const char* tuning_file;    /* cost-model constants (chorus-bench --calibrate) */
  int socket_buffer_bytes;    /* SO_SNDBUF/SO_RCVBUF of data connections; see below for the
                                 kernel's default */
  size_t shm_ring_bytes;      /* capacity of each shared-memory ring */
  /* Added in 0.2 (docs/config.md has each one's CHORUS_* variable and default): */
  size_t tcp_segment_bytes;     /* largest pipelining unit of rings across hosts, in [64, 1 GiB];
                                   CHORUS_TCP_SEGMENT_AS_SEGMENT: segment_bytes there too */
  int spin_us;                  /* microseconds a wait polls before sleeping, up to 1000000;
                                   CHORUS_SPIN_NONE: sleep at once */
  size_t shm_single_copy_bytes; /* shared-memory messages from this size are read in place by the
                                   peer; CHORUS_SHM_SINGLE_COPY_NEVER: never */
  /* Added in 0.3: the flight recorder, authentication and the TCP links (docs/config.md). */
  long long trace_entries; /* calls the recorder remembers, up to 2^24; CHORUS_TRACE_OFF: off */
  const char* trace_dir;   /* where a failed or timed-out call's dump goes */
  double progress_seconds; /* period of the progress records, up to 86400; CHORUS_PROGRESS_NEVER */
  chorus_auth_mode auth;   /* see chorus_auth_mode */
  const char* auth_key_file; /* the job key (mode 0600 or stricter) */
  int encrypt;               /* 1: encrypt the TCP connections between ranks; CHORUS_ENCRYPT_OFF */
  long long handshake_timeout_ms; /* a new connection's handshake, 1 .. 3600000 */
  size_t tcp_zerocopy_bytes;      /* MSG_ZEROCOPY sends from this size; CHORUS_TCP_ZEROCOPY_NEVER */
  int trace_signal;               /* CHORUS_TRACE_SIGNAL_USR1 or _USR2: dump on it; _NONE */
  int report;                     /* 1: straggler summary at destroy (rank 0); CHORUS_REPORT_OFF */
  long long trace_detail_us;      /* detail period, up to 60000000; CHORUS_TRACE_DETAIL_EVERY */
  int tcp_zerocopy_keep;          /* 1: keep MSG_ZEROCOPY where the kernel copies; _KEEP_OFF */
  /* The store rank 0 hosts when nothing serves the URL yet (what a client may send): */
  size_t store_max_key;             /* longest key, 1 .. 1048576 */
  size_t store_max_value;           /* largest value, up to 67108848; CHORUS_STORE_MAX_VALUE_ZERO */
  size_t store_max_connections;     /* open client connections, 1 .. 1048576 */
  long long store_frame_timeout_ms; /* a begun request's time to arrive, 1000 .. 86400000 */
  double heartbeat_seconds; /* a peer silent this long while a call waits is declared dead, up to
                               86400; CHORUS_HEARTBEAT_OFF */
} chorus_options;
/* chorus_options.socket_buffer_bytes: keep the kernel's socket buffer sizes (as
 * CHORUS_SOCKET_BUFFER=0; a zero field means "not set"). */
#define CHORUS_SOCKET_BUFFER_KERNEL_DEFAULT (-1)
/* The values of 0 for the fields below, where zero means "not set": */
#define CHORUS_TCP_SEGMENT_AS_SEGMENT ((size_t)-1) /* as CHORUS_TCP_SEGMENT_BYTES=0 */
#define CHORUS_SPIN_NONE (-1)                      /* as CHORUS_SPIN_US=0 */
#define CHORUS_SHM_SINGLE_COPY_NEVER ((size_t)-1)  /* as CHORUS_SHM_SINGLE_COPY_BYTES=0 */
#define CHORUS_TRACE_OFF (-1LL)                    /* as CHORUS_TRACE_ENTRIES=0 */
#define CHORUS_PROGRESS_NEVER (-1.0)               /* as CHORUS_PROGRESS_SECONDS=0 */
#define CHORUS_ENCRYPT_OFF (-1)                    /* as CHORUS_ENCRYPT=0 */
#define CHORUS_TCP_ZEROCOPY_NEVER ((size_t)-1)     /* as CHORUS_TCP_ZEROCOPY_BYTES=0 */
#define CHORUS_TRACE_SIGNAL_NONE (-1)              /* as CHORUS_TRACE_SIGNAL unset */
#define CHORUS_TRACE_SIGNAL_USR1 1                 /* as CHORUS_TRACE_SIGNAL=USR1 */
#define CHORUS_TRACE_SIGNAL_USR2 2                 /* as CHORUS_TRACE_SIGNAL=USR2 */
#define CHORUS_REPORT_OFF (-1)                     /* as CHORUS_REPORT=0 */
#define CHORUS_TRACE_DETAIL_EVERY (-1LL)           /* as CHORUS_TRACE_DETAIL_US=0 */
#define CHORUS_TCP_ZEROCOPY_KEEP_OFF (-1)          /* as CHORUS_TCP_ZEROCOPY_KEEP=0 */
#define CHORUS_STORE_MAX_VALUE_ZERO ((size_t)-1)   /* as CHORUS_STORE_MAX_VALUE=0 */
#define CHORUS_HEARTBEAT_OFF (-1.0)                /* as CHORUS_HEARTBEAT_SECONDS=0 */

/* chorus_comm_init with settings (options may be NULL: the environment and defaults). A bad
 * value (negative timeout, unknown enum or algorithm, struct_size too small) is
 * CHORUS_ERR_INVALID_ARGUMENT. */
CHORUS_API chorus_status chorus_comm_init_with_options(const char* store_url, int rank,
                                                       int world_size,
                                                       const chorus_options* options,
                                                       chorus_comm** comm);
/* chorus_comm_init_from_env with settings, as chorus_comm_init_with_options. */
CHORUS_API chorus_status chorus_comm_init_from_env_with_options(const chorus_options* options,
                                                                chorus_comm** comm);
/* For programs that survive a lost rank under an elastic launcher (chorus-run --elastic,
 * docs/elastic-launch.md): as chorus_comm_init_from_env_with_options, except in a process the
 * launcher started as a replacement (CHORUS_JOIN=1), which joins the running job instead, as
 * chorus_comm_join on the launch store (CHORUS_RANK is then only a hint for logs). */
CHORUS_API chorus_status chorus_comm_init_from_env_or_join(const chorus_options* options,
                                                           chorus_comm** comm);

/* Always returns promptly, also after a failure. Accepts NULL. */
CHORUS_API chorus_status chorus_comm_destroy(chorus_comm* comm);

/* -1 for NULL. */
CHORUS_API int chorus_comm_rank(const chorus_comm* comm);
CHORUS_API int chorus_comm_size(const chorus_comm* comm);

CHORUS_API chorus_status chorus_all_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                           size_t count, chorus_dtype dtype, chorus_op op);
CHORUS_API chorus_status chorus_reduce_scatter(chorus_comm* comm, const void* sendbuf,
                                               void* recvbuf, size_t recvcount, chorus_dtype dtype,
                                               chorus_op op);
CHORUS_API chorus_status chorus_all_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                           size_t sendcount, chorus_dtype dtype);
CHORUS_API chorus_status chorus_broadcast(chorus_comm* comm, void* buf, size_t count,
                                          chorus_dtype dtype, int root);
CHORUS_API chorus_status chorus_barrier(chorus_comm* comm);

/* Reduce, gather, scatter, the per-rank-count variants and all-to-all, blocking and (i-prefix)
 * non-blocking; requests as for chorus_iall_reduce below. Every rank calls them in the same order
 * as the other collectives; calls that differ (collective, count, counts, root) fail with
 * CHORUS_ERR_MISMATCH on the ranks involved. Buffers used only on the root may be NULL on other
 * ranks. In place (as MPI_IN_PLACE) means passing the same memory where noted below; any other
 * overlap of send and receive buffers is CHORUS_ERR_INVALID_ARGUMENT. Count arrays hold one
 * entry per rank and are copied by the call. Displacements are the prefix sums of the counts. */
struct chorus_request;
/* The root gets the reduction of every rank's sendbuf. In place on the root: sendbuf == recvbuf. */
CHORUS_API chorus_status chorus_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                       size_t count, chorus_dtype dtype, chorus_op op, int root);
CHORUS_API chorus_status chorus_ireduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                        size_t count, chorus_dtype dtype, chorus_op op, int root,
                                        struct chorus_request** request);
/* The root's recvbuf holds world_size * sendcount elements, block r from rank r. In place on the
 * root: sendbuf == recvbuf + root * sendcount. */
CHORUS_API chorus_status chorus_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                       size_t sendcount, chorus_dtype dtype, int root);
CHORUS_API chorus_status chorus_igather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                        size_t sendcount, chorus_dtype dtype, int root,
                                        struct chorus_request** request);
/* The root's sendbuf holds world_size * recvcount elements; rank r receives block r. In place on
 * the root: recvbuf == sendbuf + root * recvcount. */
CHORUS_API chorus_status chorus_scatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                        size_t recvcount, chorus_dtype dtype, int root);
CHORUS_API chorus_status chorus_iscatter(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                         size_t recvcount, chorus_dtype dtype, int root,
                                         struct chorus_request** request);
/* Rank r contributes recvcounts[r] elements (every rank passes the same recvcounts); recvbuf
 * receives them in rank order. In place: sendbuf == recvbuf + the counts of the ranks before. */
CHORUS_API chorus_status chorus_all_gather_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                             const size_t* recvcounts, chorus_dtype dtype);
CHORUS_API chorus_status chorus_iall_gather_v(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                              const size_t* recvcounts, chorus_dtype dtype,
                                              struct chorus_request** request);
/* A message to / from one other rank (peer). Only the two ranks take part, each at the same point
 * among its collectives; a pair's messages arrive in the order they were sent, and the receiver's
 * count must match (else CHORUS_ERR_MISMATCH). A send may return before the matching recv starts,
 * except for messages larger than the transport buffers, which wait for it: two ranks that
 * exchange large messages call send-then-recv on one and recv-then-send on the other. */
CHORUS_API chorus_status chorus_send(chorus_comm* comm, const void* buf, size_t count,
                                     chorus_dtype dtype, int peer);
CHORUS_API chorus_status chorus_isend(chorus_comm* comm, const void* buf, size_t count,
                                      chorus_dtype dtype, int peer,
                                      struct chorus_request** request);
CHORUS_API chorus_status chorus_recv(chorus_comm* comm, void* buf, size_t count, chorus_dtype dtype,
                                     int peer);
CHORUS_API chorus_status chorus_irecv(chorus_comm* comm, void* buf, size_t count,
                                      chorus_dtype dtype, int peer,
                                      struct chorus_request** request);
/* sendbuf holds blocks of recvcounts[0], recvcounts[1], ... elements (the same recvcounts on
 * every rank); rank r receives the reduction of block r. In place: recvbuf == sendbuf + the
 * counts of the ranks before. */
CHORUS_API chorus_status chorus_reduce_scatter_v(chorus_comm* comm, const void* sendbuf,
                                                 void* recvbuf, const size_t* recvcounts,
                                                 chorus_dtype dtype, chorus_op op);
CHORUS_API chorus_status chorus_ireduce_scatter_v(chorus_comm* comm, const void* sendbuf,
                                                  void* recvbuf, const size_t* recvcounts,
                                                  chorus_dtype dtype, chorus_op op,
                                                  struct chorus_request** request);
/* Block r (count elements) of sendbuf goes to rank r; block r of recvbuf comes from rank r. In
 * place: sendbuf == recvbuf. */
CHORUS_API chorus_status chorus_all_to_all(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                           size_t count, chorus_dtype dtype);
CHORUS_API chorus_status chorus_iall_to_all(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                            size_t count, chorus_dtype dtype,
                                            struct chorus_request** request);
/* sendcounts[r] elements to rank r, recvcounts[r] from it (rank q's recvcounts[r] must equal rank
 * r's sendcounts[q], else CHORUS_ERR_MISMATCH). No in-place form. */
CHORUS_API chorus_status chorus_all_to_all_v(chorus_comm* comm, const void* sendbuf,
                                             const size_t* sendcounts, void* recvbuf,
                                             const size_t* recvcounts, chorus_dtype dtype);
CHORUS_API chorus_status chorus_iall_to_all_v(chorus_comm* comm, const void* sendbuf,
                                              const size_t* sendcounts, void* recvbuf,
                                              const size_t* recvcounts, chorus_dtype dtype,
                                              struct chorus_request** request);

/* Color for chorus_comm_split (any negative value works): the rank joins no new communicator. */
#define CHORUS_NO_COLOR (-1)
/* Collective over comm (every rank calls it, in the same order as other collectives): ranks with
 * the same color form a new communicator, ranked by (key, rank in comm), returned in *out, which
 * the caller destroys with chorus_destroy. With a negative color *out is set to NULL. The new
 * communicator has comm's settings; comm stays valid. */
CHORUS_API chorus_status chorus_comm_split(chorus_comm* comm, int color, int key,
                                           chorus_comm** out);

/* Membership (docs/fault-tolerance.md). chorus_comm_shrink: collective among the live ranks of
 * comm, callable after a call on it failed (CHORUS_ERR_PEER_FAILURE, _TIMEOUT, _ABORTED) or when
 * nothing failed: they agree on one set of live ranks, admit the processes waiting in
 * chorus_comm_join, and get a new communicator in *out (survivors in their old order, newcomers
 * after them; destroy it with chorus_destroy). comm is aborted by the call but must still be
 * destroyed. A rank the others declared dead gets CHORUS_ERR_PEER_FAILURE ("... was declared dead
 * by the survivors ..."). Ends within comm's timeout. */
CHORUS_API chorus_status chorus_comm_shrink(chorus_comm* comm, chorus_comm** out);
/* A new process joins the job whose communicator was created on store_url (options may be NULL):
 * waits for its next membership change (a chorus_comm_shrink on the others) up to the timeout. */
CHORUS_API chorus_status chorus_comm_join(const char* store_url, const chorus_options* options,
                                          chorus_comm** out);
/* Ranks of comm known to have failed, ascending: up to capacity of them are written to ranks (may
 * be NULL when capacity is 0); *count receives how many there are in all. Never blocks. */
CHORUS_API chorus_status chorus_comm_failed_ranks(chorus_comm* comm, int* ranks, int capacity,
                                                  int* count);
/* 0 for a communicator from chorus_init*; one more with each shrink or join. */
CHORUS_API chorus_status chorus_comm_generation(chorus_comm* comm, uint64_t* generation);
/* For each rank of comm (world_size entries, up to capacity written): its rank in the
 * communicator comm was made from by a shrink or join, -1 for a newcomer. *count: world_size. */
CHORUS_API chorus_status chorus_comm_former_ranks(chorus_comm* comm, int* ranks, int capacity,
                                                  int* count);
/* Processes waiting in chorus_comm_join for the next membership change (reads the store; not
 * collective: ranks may see different values). */
CHORUS_API chorus_status chorus_comm_joiners_waiting(chorus_comm* comm, int* count);

/* Non-blocking variants. Each returns a request that must be passed exactly once to
 * chorus_request_wait or chorus_request_free, before its communicator is destroyed. Requests
 * complete in issue order. */
typedef struct chorus_request chorus_request; /* opaque */
CHORUS_API chorus_status chorus_iall_reduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                            size_t count, chorus_dtype dtype, chorus_op op,
                                            chorus_request** request);
CHORUS_API chorus_status chorus_ireduce_scatter(chorus_comm* comm, const void* sendbuf,
                                                void* recvbuf, size_t recvcount, chorus_dtype dtype,
                                                chorus_op op, chorus_request** request);
CHORUS_API chorus_status chorus_iall_gather(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                            size_t sendcount, chorus_dtype dtype,
                                            chorus_request** request);
CHORUS_API chorus_status chorus_ibroadcast(chorus_comm* comm, void* buf, size_t count,
                                           chorus_dtype dtype, int root, chorus_request** request);
/* Completes once every rank has called chorus_ibarrier or chorus_barrier at this point. */
CHORUS_API chorus_status chorus_ibarrier(chorus_comm* comm, chorus_request** request);
/* Waits for completion and frees the request. */
CHORUS_API chorus_status chorus_request_wait(chorus_request* request);
/* Sets *done to 1 when the request has completed (then chorus_request_wait returns at once). */
CHORUS_API chorus_status chorus_request_test(chorus_request* request, int* done);
/* Frees a request without waiting. Completed: returns the operation's status, as
 * chorus_request_wait would. Still pending: the operation goes on in the background (its buffers
 * must stay valid until it is done: a later chorus_request_wait or blocking call on the same
 * communicator returning means it is, as requests complete in issue order) and CHORUS_OK is
 * returned; if it fails, the communicator is aborted and chorus_comm_get_async_error reports it.
 * Accepts NULL. */
CHORUS_API chorus_status chorus_request_free(chorus_request* request);

/* Aborts comm, from any thread (also while another thread is inside a call on comm): pending and
 * later calls on it fail promptly with CHORUS_ERR_ABORTED, and the peers are told (their calls
 * fail with an error naming this rank). comm must still be destroyed with chorus_comm_destroy. */
CHORUS_API chorus_status chorus_comm_abort(chorus_comm* comm);
/* Sets *status to the failure that aborted comm (CHORUS_OK if none), also when it happened in
 * background work (a request not waited on yet, a peer's abort noticed by it) or through
 * chorus_comm_abort; chorus_last_error(comm) then holds its message. Never blocks. */
CHORUS_API chorus_status chorus_comm_get_async_error(chorus_comm* comm, chorus_status* status);

/* Writes this rank's flight-recorder dump (docs/trace-format.md) as
 * <path>/chorus-trace-<communicator>-rank<R>.json; path NULL or "": the directory in
 * CHORUS_TRACE_DIR. Reads the record without locks: callable from any thread, also while a call
 * on comm is stuck. CHORUS_ERR_INVALID_ARGUMENT when the recorder is off (CHORUS_TRACE_ENTRIES=0)
 * or no directory is known, CHORUS_ERR_SYSTEM when the file cannot be written. */
CHORUS_API chorus_status chorus_comm_dump_trace(chorus_comm* comm, const char* path);

/* Registered memory (docs/api/mainpage.md, "Registered memory"): a zero-filled, page-aligned buffer
 * of `bytes` in shared memory that the ranks of this host read in place. Collectives whose buffers
 * are registered on every rank of a one-host communicator skip the copies through the
 * shared-memory rings; other buffers, and mixes, take the usual path. The buffer belongs to the
 * process (any communicator may use it); free it before chorus_comm_destroy(comm), which otherwise
 * reports it on stderr. Returns NULL on failure (chorus_last_error(comm) says why). */
CHORUS_API void* chorus_mem_alloc(chorus_comm* comm, size_t bytes);
/* Frees a buffer from chorus_mem_alloc (NULL: nothing). CHORUS_ERR_INVALID_ARGUMENT when ptr is
 * not one, or while a request in flight uses it (nothing is freed then). */
CHORUS_API chorus_status chorus_mem_free(chorus_comm* comm, void* ptr);

/* Message of this communicator's last failure ("" if none), from any thread, also while another
 * thread is in a call on comm. The string is the calling thread's copy: valid until this thread
 * calls chorus_last_error(comm) again. With comm == NULL: the last failure on this thread that had
 * no communicator (chorus_comm_init*, a call with a null communicator or request). */
CHORUS_API const char* chorus_last_error(const chorus_comm* comm);
CHORUS_API const char* chorus_status_string(chorus_status status);

/* ---- Reduced-precision wire formats (docs/api.md) ----
 * An f32 all-reduce (sum or avg) may travel as bfloat16, float16 or int8 blocks (256 values, one
 * float scale each): reduction in f32, each value rounded once at each hop that sends it, the same
 * bits on every rank. Per call; every rank must pass the same format (CHORUS_ERR_MISMATCH).
 * Other dtypes or ops with a non-native format: CHORUS_ERR_INVALID_ARGUMENT. Same values as
 * chorus::WireFormat. */
typedef enum chorus_wire {
  CHORUS_WIRE_NATIVE = 0,
  CHORUS_WIRE_BF16 = 1,
  CHORUS_WIRE_FP16 = 2,
  CHORUS_WIRE_INT8 = 3
} chorus_wire;
/* Settings of one collective call: struct_size as for chorus_options (fields beyond it count as
 * zero), so  chorus_collective_options o = {sizeof(o), CHORUS_WIRE_BF16};  */
typedef struct chorus_collective_options {
  size_t struct_size;
  chorus_wire wire;
} chorus_collective_options;
/* chorus_all_reduce / chorus_iall_reduce with call options; options NULL: native. */
CHORUS_API chorus_status chorus_all_reduce_with_options(chorus_comm* comm, const void* sendbuf,
                                                        void* recvbuf, size_t count,
                                                        chorus_dtype dtype, chorus_op op,
                                                        const chorus_collective_options* options);
CHORUS_API chorus_status chorus_iall_reduce_with_options(chorus_comm* comm, const void* sendbuf,
                                                         void* recvbuf, size_t count,
                                                         chorus_dtype dtype, chorus_op op,
                                                         const chorus_collective_options* options,
                                                         chorus_request** request);
/* Payload bytes this rank has handed to its links since the communicator was made (all
 * collectives, all peers), as they travel (wire-format bytes). */
CHORUS_API chorus_status chorus_comm_bytes_sent(const chorus_comm* comm, uint64_t* out);

/* ---- Version 0.1's names, kept for one more release (deprecated) ----
 * Each does what its replacement does; chorus_init_from_env* also join the running job under
 * CHORUS_JOIN=1, as in 0.1 (chorus_comm_init_from_env_or_join now asks for that by name). */
CHORUS_DEPRECATED("chorus_comm_init")
CHORUS_API chorus_status chorus_init(const char* store_url, int rank, int world_size,
                                     chorus_comm** comm);
CHORUS_DEPRECATED("chorus_comm_init_from_env_or_join(NULL, comm)")
CHORUS_API chorus_status chorus_init_from_env(chorus_comm** comm);
CHORUS_DEPRECATED("chorus_comm_init_with_options")
CHORUS_API chorus_status chorus_init_with_options(const char* store_url, int rank, int world_size,
                                                  const chorus_options* options,
                                                  chorus_comm** comm);
CHORUS_DEPRECATED("chorus_comm_init_from_env_or_join")
CHORUS_API chorus_status chorus_init_from_env_with_options(const chorus_options* options,
                                                           chorus_comm** comm);
CHORUS_DEPRECATED("chorus_comm_destroy") CHORUS_API chorus_status chorus_destroy(chorus_comm* comm);
CHORUS_DEPRECATED("chorus_comm_rank") CHORUS_API int chorus_rank(const chorus_comm* comm);
CHORUS_DEPRECATED("chorus_comm_size") CHORUS_API int chorus_world_size(const chorus_comm* comm);
CHORUS_DEPRECATED("chorus_comm_abort") CHORUS_API chorus_status chorus_abort(chorus_comm* comm);
CHORUS_DEPRECATED("chorus_comm_dump_trace")
CHORUS_API chorus_status chorus_dump_trace(chorus_comm* comm, const char* path);
CHORUS_DEPRECATED("chorus_request_wait")
CHORUS_API chorus_status chorus_wait(chorus_request* request);
CHORUS_DEPRECATED("chorus_request_test")
CHORUS_API chorus_status chorus_test(chorus_request* request, int* done);
CHORUS_DEPRECATED("chorus_all_reduce")
CHORUS_API chorus_status chorus_allreduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                          size_t count, chorus_dtype dtype, chorus_op op);
CHORUS_DEPRECATED("chorus_iall_reduce")
CHORUS_API chorus_status chorus_iallreduce(chorus_comm* comm, const void* sendbuf, void* recvbuf,
                                           size_t count, chorus_dtype dtype, chorus_op op,
                                           chorus_request** request);
/* 0.1's call options, without struct_size. */
typedef struct chorus_call_options {
  chorus_wire wire;
} chorus_call_options CHORUS_DEPRECATED("chorus_collective_options");
CHORUS_DEPRECATED("chorus_all_reduce_with_options")
CHORUS_API chorus_status chorus_all_reduce_opts(chorus_comm* comm, const void* sendbuf,
                                                void* recvbuf, size_t count, chorus_dtype dtype,
                                                chorus_op op,
                                                const struct chorus_call_options* options);
CHORUS_DEPRECATED("chorus_iall_reduce_with_options")
CHORUS_API chorus_status chorus_iall_reduce_opts(chorus_comm* comm, const void* sendbuf,
                                                 void* recvbuf, size_t count, chorus_dtype dtype,
                                                 chorus_op op,
                                                 const struct chorus_call_options* options,
                                                 chorus_request** request);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CHORUS_CHORUS_H_ */
