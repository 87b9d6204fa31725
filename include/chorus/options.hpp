// Communicator settings. Options::fromEnv() reads the CHORUS_* variables (docs/config.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace chorus {

struct Options {
  // CHORUS_TIMEOUT (seconds, default 300): the longest any rank waits for one step of a
  // collective (a message from a peer, a store key, a connection) before failing.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // CHORUS_IFNAME: interface whose IPv4 address this rank listens on. Empty: the address that
  // routes to the store host (loopback when the store is local).
  std::string ifname;
  // CHORUS_ALGO: "auto" (default), "ring", "rd" (recursive doubling) or "rhd" (recursive
  // halving-doubling) for all-reduce.
  std::string algorithm{"auto"};
  // CHORUS_SEGMENT_BYTES (default 512 KiB): pipelining unit of the ring algorithms.
  size_t segmentBytes{512 * 1024};
  // CHORUS_SMALL_BYTES (default 16 KiB): all-reduce at or below this size uses recursive doubling.
  size_t smallBytes{16 * 1024};
  // CHORUS_MEDIUM_BYTES (default 128 KiB): above smallBytes and up to this size, all-reduce over a
  // power-of-two group of 4 or more uses recursive halving-doubling; the ring above (and for
  // other group sizes).
  size_t mediumBytes{128 * 1024};
  // CHORUS_SOCKET_BUFFER (bytes, default 4 MiB): SO_SNDBUF/SO_RCVBUF of data connections.
  int socketBufferBytes{4 * 1024 * 1024};
  // CHORUS_SPIN_US (default -1 = automatic): microseconds a wait polls before sleeping.
  // Automatic: 50 while this host runs no more ranks than it has cores, else 200. With more
  // ranks than cores the poll always yields the core (sched_yield) between tries.
  int spinMicros{-1};
  // CHORUS_TRANSPORT: "auto" (default: shared memory to ranks on this host, TCP to the others),
  // "tcp" (TCP to every peer) or "shm" (shared memory to every peer; an error if one is on
  // another host).
  std::string transport{"auto"};
  // CHORUS_HOST_ID: which host this rank is on, for the transport choice and the hierarchical
  // algorithms. Empty (default): hostname + boot id + network namespace, so emulated hosts in
  // separate namespaces count as separate hosts. Ranks with equal ids must share a machine.
  std::string hostId;
  // CHORUS_SHM_RING_BYTES (default 1 MiB): capacity of each shared-memory ring (one per ordered
  // pair of ranks on a host).
  size_t shmRingBytes{1024 * 1024};
  // CHORUS_SHM_SINGLE_COPY_BYTES (default 0 = never): shared-memory messages of at least this
  // size are read by the receiver straight from the sender's buffer (process_vm_readv) where the
  // kernel allows it, instead of being copied through the ring. Off by default: measured here,
  // process_vm_readv moves 5.3 GB/s while the ring's two copies run in parallel on two cores at
  // about 14 GB/s each; it saves CPU time where cores are scarce.
  size_t shmSingleCopyBytes{0};

  // Defaults overridden by the CHORUS_* variables that are set; throws Error on a malformed value.
  static Options fromEnv();
};

}  // namespace chorus
