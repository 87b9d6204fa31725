// Communicator settings. Options::fromEnv() reads the CHORUS_* variables (docs/config.md), in
// one place (src/common/options_env.cc) for the whole library.
#pragma once

#include <chorus/export.h>

#include <chorus/types.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace chorus {

class Store;

// The constants of the cost model behind the automatic algorithm choice (docs/algorithms.md,
// "Choosing an algorithm"): a message of b bytes over a link takes alpha + b * beta seconds, and
// reducing b bytes takes b * gamma. The built-in values come from the project's test machines;
// `chorus-bench --calibrate` measures them on the user's own machines and writes a file for
// CHORUS_TUNING_FILE.
struct LinkCost {
  double alpha;  // seconds per message, size aside (latency and per-message software cost)
  double beta;   // seconds per byte (inverse bandwidth)
};
struct CHORUS_API Tuning {
  LinkCost shm{2.0e-6, 0.12e-9};  // between ranks of one host, through shared memory
  LinkCost net{60.0e-6, 8.6e-9};  // through TCP (between hosts, or on one host when forced)
  // Seconds per byte reduced, by DataType (f16/bf16 convert through f32).
  std::array<double, kNumDataTypes> gamma{0.25e-9, 0.25e-9, 0.9e-9,  0.9e-9,
                                          0.25e-9, 0.25e-9, 0.25e-9, 0.25e-9};
  // Ring all-reduces of at least this many bytes over 3 or more ranks run as two rings in
  // opposite directions, each over half the buffer (0: never, the default). Calibration turns
  // it on from the size where it measured faster (docs/algorithms.md, "Ring details").
  // CHORUS_RING_BIDIR_BYTES overrides the file.
  double ringBidirectionalBytes = 0;

  // Reads a file written by writeFile (or by hand): "key value" lines, '#' comments; keys
  // shm.alpha_us, shm.beta_ns_per_byte, net.alpha_us, net.beta_ns_per_byte,
  // gamma_ns_per_byte.<dtype> and ring.bidirectional_bytes. Keys left out keep the built-in values.
  // Throws Error naming the file and line of anything it does not understand.
  static Tuning fromFile(const std::string& path);
  // Writes every value, with `comment` lines first. Throws Error when the file cannot be written.
  void writeFile(const std::string& path, const std::string& comment) const;
};

// How data travels between ranks (Options::transport, CHORUS_TRANSPORT).
enum class TransportKind {
  kAuto,  // "auto": shared memory to ranks on this host, TCP to the others
  kTcp,   // "tcp": TCP to every peer
  kShm,   // "shm": shared memory to every peer (an error if one is on another host)
};
// Which ranks print a line per collective (Options::debug, CHORUS_DEBUG).
enum class DebugLevel {
  kOff,    // "0" (or unset)
  kRank0,  // "1": rank 0 only
  kAll,    // "all": every rank
};
// The forms CHORUS_TRANSPORT and CHORUS_DEBUG take; parse* throw Error(kInvalidArgument) naming
// the accepted forms.
CHORUS_API std::string_view toString(TransportKind kind);
CHORUS_API std::string_view toString(DebugLevel level);
CHORUS_API TransportKind parseTransportKind(std::string_view text);
CHORUS_API DebugLevel parseDebugLevel(std::string_view text);

// The collectives whose algorithm Options::algorithm can force; names as in CHORUS_ALGO.
enum class Collective {
  kAllReduce,       // "allreduce"
  kReduceScatter,   // "reduce_scatter"
  kAllGather,       // "all_gather"
  kBroadcast,       // "broadcast"
  kBarrier,         // "barrier"
  kReduce,          // "reduce"
  kGather,          // "gather"
  kScatter,         // "scatter"
  kAllGatherV,      // "all_gather_v"
  kReduceScatterV,  // "reduce_scatter_v"
  kAllToAll,        // "all_to_all"
  kAllToAllV,       // "all_to_all_v"
  kSendRecv,        // "send_recv"
};
inline constexpr size_t kNumCollectives = 13;
// What may be forced for a collective (docs/config.md lists which collective has which).
enum class Algorithm {
  kAuto,               // "auto": the cost model chooses per call
  kRing,               // "ring"
  kRecursiveDoubling,  // "rd" (all-reduce)
  kHalvingDoubling,    // "rhd" (all-reduce)
  kDoubleTree,         // "tree" (all-reduce)
  kOneShot,            // "oneshot" (all-reduce)
  kTwoShot,            // "twoshot" (all-reduce)
  kHierarchical,       // "hier" (all-reduce over several hosts with several ranks on some)
  kHalving,            // "halving" (reduce-scatter, power-of-two sizes)
  kDoubling,           // "doubling" (all-gather, power-of-two sizes)
  kChain,              // "chain" (broadcast)
  kBinomial,           // "binomial" (broadcast, reduce)
  kScatterAllGather,   // "scatter_allgather" (broadcast)
  kDissemination,      // "dissemination" (barrier)
  kRingGather,         // "ring_gather" (reduce)
  kDirect,             // "direct" (gather, scatter, send_recv)
  kPairwise,           // "pairwise" (all-to-all)
};
// One choice per collective (Options::algorithm, CHORUS_ALGO); kAuto for all by default.
struct AlgorithmSetting {
  std::array<Algorithm, kNumCollectives> forced{};

  Algorithm& operator[](Collective c) { return forced[static_cast<size_t>(c)]; }
  Algorithm operator[](Collective c) const { return forced[static_cast<size_t>(c)]; }
  bool operator==(const AlgorithmSetting&) const = default;
};
CHORUS_API std::string_view toString(Collective collective);
CHORUS_API std::string_view toString(Algorithm algorithm);
// The CHORUS_ALGO form: "auto" when nothing is forced, the bare name when only the all-reduce's
// is, else "collective=name" entries in the order of Collective ("allreduce=tree,broadcast=chain").
CHORUS_API std::string toString(const AlgorithmSetting& setting);
// Reads "auto", an all-reduce algorithm name, or a comma-separated list of "collective=name"
// (a later entry for the same collective wins; "reduce_scatter" may be spelt "reducescatter").
// Throws Error(kInvalidArgument) naming the text and the choices for an unknown collective, an
// unknown name, or a name the collective does not have.
CHORUS_API AlgorithmSetting parseAlgorithmSetting(std::string_view text);

// The flight recorder, its dumps and progress records (docs/trace-format.md): Options::trace.
struct CHORUS_API TraceOptions {
  // CHORUS_TRACE_ENTRIES: calls each communicator remembers (rounded up to a power of two);
  // 0: the recorder is off, and so are dumps and progress records.
  size_t entries = 2048;
  // CHORUS_TRACE_DIR: where a rank writes its dump when a call fails or times out; empty: none.
  std::string dir;
  // CHORUS_TRACE_SIGNAL (USR1, USR2): this signal number makes the process dump every
  // communicator to `dir`; 0: none.
  int signal = 0;
  // CHORUS_PROGRESS_SECONDS: how often a rank publishes its progress record; 0: never.
  double progressSeconds = 1;
  // CHORUS_HEARTBEAT_SECONDS: a rank waiting in a call declares a peer dead (kPeerFailure, and
  // shrink() counts it as dead) when that peer's progress record is older than this: a process
  // that is stopped (SIGSTOP), frozen or unreachable, as opposed to one that is slow. Records
  // are then published at least four times per period. 0 (default): off. Needs the records
  // (entries and progressSeconds above 0); hosts' clocks must agree well within it.
  double heartbeatSeconds = 0;
  // CHORUS_REPORT=1: rank 0 prints the straggler summary when a communicator is destroyed.
  bool report = false;
  // CHORUS_TRACE_DETAIL_US: a small blocking call is followed in detail (per-peer traffic and
  // arrivals) at most once per this many microseconds; 0: every call.
  double detailMicros = 20;

  // The defaults overridden by the variables; throws Error naming a malformed one.
  static TraceOptions fromEnv();
};

// Whether TCP connections authenticate (docs/security.md): Options::auth, and the store's.
enum class AuthMode {
  kAuto,      // "auto": authenticate when a key is set (the default)
  kOff,       // "off": never, even with a key
  kRequired,  // "required": refuse to run without a key
};
struct CHORUS_API AuthOptions {
  AuthMode mode = AuthMode::kAuto;  // CHORUS_AUTH
  // CHORUS_AUTH_KEY_FILE: the job key (a file of this user, mode 0600 or stricter, 16 to 4096
  // bytes), loaded when a connection or server needs it; empty: no key.
  std::string keyFile;
  // CHORUS_HANDSHAKE_TIMEOUT (seconds, 1 .. 3600): how long a new connection may take to
  // authenticate (and, at a rank's listener, to say hello) before it is dropped.
  std::chrono::milliseconds handshakeTimeout{std::chrono::seconds(10)};
  // CHORUS_ENCRYPT=1: TCP connections between ranks carry AES-256-GCM records; needs a key.
  bool encrypt = false;
  // CHORUS_ETCD_CA, CHORUS_ETCD_CERT, CHORUS_ETCD_KEY: for an etcds:// store, the CA that signs
  // the members' certificates (empty: the system's) and this client's certificate and key
  // (docs/etcd-store.md). etcd authenticates with these, not with the job key.
  std::string etcdCaFile, etcdCertFile, etcdKeyFile;

  // The defaults overridden by the variables; throws Error naming a malformed one (the key file
  // itself is checked when it is loaded).
  static AuthOptions fromEnv();
};

// Settings of the TCP links: Options::tcp.
struct CHORUS_API TcpOptions {
  // CHORUS_TCP_ZEROCOPY_BYTES (0 .. 1 TiB): messages of at least this size are sent with
  // MSG_ZEROCOPY; 0: never.
  size_t zeroCopyBytes = 0;
  // CHORUS_TCP_ZEROCOPY_KEEP=1: keep MSG_ZEROCOPY on where the kernel reports copying.
  bool zeroCopyKeep = false;

  static TcpOptions fromEnv();
};

// What a TCP store server accepts from its clients (TcpStoreServer; Options::storeLimits for the
// store rank 0 hosts).
struct CHORUS_API StoreLimits {
  size_t maxKeyBytes = 4096;  // CHORUS_STORE_MAX_KEY (1 .. 1 MiB)
  // CHORUS_STORE_MAX_VALUE (0 .. 64 MiB less a request's 16-byte header, the default).
  size_t maxValueBytes = (64u << 20) - 16;
  size_t maxConnections = 1024;  // CHORUS_STORE_MAX_CONNECTIONS (1 .. 1048576)
  // CHORUS_STORE_FRAME_TIMEOUT (seconds, 1 .. 86400): how long a request may take to arrive
  // once begun, and, without a key, a new connection's first request.
  std::chrono::milliseconds frameTimeout{std::chrono::seconds(60)};

  static StoreLimits fromEnv();
};

struct CHORUS_API Options {
  // CHORUS_TIMEOUT (seconds, default 300): the longest any rank waits for one step of a
  // collective (a message from a peer, a store key, a connection) before failing.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // CHORUS_IFNAME: interface whose IPv4 address this rank listens on. Empty: the address that
  // routes to the store host (loopback when the store is local).
  std::string ifname;
  // CHORUS_ALGO (parseAlgorithmSetting): what each collective runs; all kAuto (the cost model
  // chooses) by default. A forced choice a collective does not have fails creation; one it
  // cannot run on the group (hier on one host, halving on 3 ranks) fails that call. Every rank
  // must force the same, or the ranks report mismatched calls.
  AlgorithmSetting algorithm;
  // CHORUS_SEGMENT_BYTES (default 512 KiB): pipelining unit of the ring algorithms.
  size_t segmentBytes{512 * 1024};
  // CHORUS_TCP_SEGMENT_BYTES (default 2 MiB; 0: segmentBytes everywhere): a ring across hosts
  // cuts each block into about four segments, between segmentBytes and this size: fewer, larger
  // messages cost the kernel and the waits less per byte once a block is large enough to keep
  // four in flight. Rings within one host keep segmentBytes. Every rank must use the same value.
  size_t tcpSegmentBytes{2 * 1024 * 1024};
  // CHORUS_TUNING_FILE: cost-model constants for the automatic choice (see Tuning). Every rank
  // must use the same values, or the ranks report mismatched calls.
  Tuning tuning;
  // The file `tuning` was read from (empty: built-in values).
  std::string tuningFile;
  // CHORUS_DEBUG: "1" (kRank0) prints one line per collective on rank 0's stderr (the algorithm
  // chosen and the cost model's prediction for every candidate), "all" (kAll) on every rank.
  DebugLevel debug{DebugLevel::kOff};
  // CHORUS_SOCKET_BUFFER (bytes, default 4 MiB): SO_SNDBUF/SO_RCVBUF of data connections.
  int socketBufferBytes{4 * 1024 * 1024};
  // CHORUS_SPIN_US (default -1 = automatic): microseconds a wait polls before sleeping.
  // Automatic: 1000 while this host runs no more ranks than it has cores, else 200. With more
  // ranks than cores the poll always yields the core (sched_yield) between tries.
  int spinMicros{-1};
  // CHORUS_TRANSPORT: "auto" (default: shared memory to ranks on this host, TCP to the others),
  // "tcp" (TCP to every peer) or "shm" (shared memory to every peer; an error if one is on
  // another host).
  TransportKind transport{TransportKind::kAuto};
  // CHORUS_HOST_ID: which host this rank is on, for the transport choice and the hierarchical
  // algorithms. Empty (default): hostname + boot id + network namespace, so emulated hosts in
  // separate namespaces count as separate hosts. Ranks with equal ids must share a machine.
  std::string hostId;
  // CHORUS_SHM_RING_BYTES (default 1 MiB): capacity of each shared-memory ring (one per ordered
  // pair of ranks on a host).
  size_t shmRingBytes{1024 * 1024};
  // CHORUS_SHM_SINGLE_COPY_BYTES (default 0 = never): shared-memory messages of at least this
  // size are read by the receiver straight from the sender's buffer (process_vm_readv) where the
  // kernel allows it, instead of being copied through the ring. Off by default: one such read
  // was slower than the ring's two copies, which run in parallel on two cores (docs/design.md,
  // "Shared memory within a host"); it saves CPU time where cores are scarce.
  size_t shmSingleCopyBytes{0};
  // Where the progress records go (docs/trace-format.md, read by chorus-run --hang-seconds and
  // chorus-doctor --live). Null (default): the store the ranks meet at. For a binding whose
  // ranks meet through another library's store while a launcher watches its own (the torch
  // backend under chorus-run publishes to CHORUS_STORE). Set in code only; every rank alike.
  std::shared_ptr<Store> progressStore;
  // The flight recorder (CHORUS_TRACE_*, CHORUS_PROGRESS_SECONDS, CHORUS_REPORT).
  TraceOptions trace;
  // Authentication and encryption of the TCP connections and the store client (CHORUS_AUTH*,
  // CHORUS_HANDSHAKE_TIMEOUT, CHORUS_ENCRYPT); also the store rank 0 hosts.
  AuthOptions auth;
  // The TCP links (CHORUS_TCP_ZEROCOPY_*).
  TcpOptions tcp;
  // The store rank 0 hosts when nothing serves the URL yet (CHORUS_STORE_MAX_*).
  StoreLimits storeLimits;

  // Defaults overridden by the CHORUS_* variables that are set; throws Error on a malformed value.
  static Options fromEnv();
};

}  // namespace chorus
