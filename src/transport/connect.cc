#include "transport/connect.h"

#include "auth/settings.h"
#include "common/errno_text.h"
#include "transport/core_share.h"
#include "transport/creation_log.h"
#include "transport/peer_transport.h"
#include "transport/shm/setup.h"
#include "transport/tcp/dial.h"
#include "transport/tcp/endpoint.h"

#include <chorus/error.hpp>

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

namespace chorus::transport {
namespace {

JobId newJobId() {
  JobId id{};
  if (getrandom(id.data(), id.size(), 0) != static_cast<ssize_t>(id.size())) {
    throw Error(ErrorCode::kSystem, "getrandom: " + errnoText(errno));
  }
  return id;
}

// The published record of a rank: "ip:port placement host-id". The placement (core_share.h:
// boot id, CPU set, CPU quota) tells which peers compete for this rank's cores, also when they
// live in other network namespaces or containers; the host id (Options::hostId) which ones share
// memory and count as one host.
struct PeerRecord {
  std::string address;
  std::string placement;
  std::string host;
};

// Host name + boot id: with the network namespace, the default host id.
std::string thisMachineId() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string id = name;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof(boot), f)) id += std::string("/") + boot;
    std::fclose(f);
  }
  id.erase(std::remove_if(id.begin(), id.end(), [](char c) { return c == ' ' || c == '\n'; }),
           id.end());
  return id;
}

// Emulated hosts are network namespaces of one machine: tell them apart.
std::string thisHostId(const Options& options, const std::string& machine) {
  if (!options.hostId.empty()) return options.hostId;
  struct stat st {};
  std::string id = machine;
  if (::stat("/proc/self/ns/net", &st) == 0) id += "/net:" + std::to_string(st.st_ino);
  return id;
}

PeerRecord parseRecord(const Store::Bytes& v) {
  std::string s(v.begin(), v.end());
  PeerRecord r;
  auto a = s.find(' ');
  r.address = s.substr(0, a);
  if (a == std::string::npos) return r;
  auto b = s.find(' ', a + 1);
  r.placement = s.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
  if (b != std::string::npos) r.host = s.substr(b + 1);
  return r;
}

std::string ranksText(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

// The records of ranks [first, last) into records[], and with `job` the job id rank 0 posted:
// one store request where the store reads many keys at once (with N ranks, N (N - 1) round
// trips to one server otherwise). A timeout names the ranks that never published.
void readRecords(Store& store, int rank, int first, int last, std::vector<PeerRecord>& records,
                 JobId* job, const Deadline& deadline) {
  std::vector<std::string> keys;
  for (int p = first; p < last; ++p) keys.push_back("addr/" + std::to_string(p));
  if (job) keys.push_back("job");
  if (keys.empty()) return;
  std::vector<Store::Bytes> values;
  try {
    values = store.getMany(keys, std::chrono::milliseconds(deadline.remainingMs()));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kTimeout) throw;
    std::vector<int> missing;
    for (int p = first; p < last; ++p) {
      if (!store.check({"addr/" + std::to_string(p)})) missing.push_back(p);
    }
    std::string who;
    if (!missing.empty()) {
      who = (missing.size() == 1 ? "rank " : "ranks ") + ranksText(missing) + " to publish " +
            (missing.size() == 1 ? "its address" : "their addresses");
    }
    if (job && !store.check({"job"})) {
      who += std::string(who.empty() ? "" : " and ") + "rank 0 to publish the job id";
    }
    if (who.empty()) throw;
    throw Error(ErrorCode::kTimeout, "rank " + std::to_string(rank) + ": timed out waiting for " +
                                         who + " (" + e.what() + ")");
  }
  for (int p = first; p < last; ++p) {
    records[static_cast<size_t>(p)] = parseRecord(values[static_cast<size_t>(p - first)]);
  }
  if (job) {
    const Store::Bytes& v = values.back();
    if (v.size() != job->size()) throw Error(ErrorCode::kInternal, "bad job id in the store");
    std::memcpy(job->data(), v.data(), job->size());
  }
}

// Ranks that outnumber the cores they share must yield while they poll, or they steal the core
// the awaited peer needs.
PeerTransport::Spin spinFor(const Options& options, int rank, const CorePlacement& self,
                            const std::vector<CorePlacement>& peers) {
  PeerTransport::Spin s;
  s.yield = ranksOutnumberCores(self, peers, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  // Measured on the emulated cluster (small all-reduces, fresh processes each run). With a core
  // per rank, a spin shorter than a sleeping peer's wake-up is bistable: once one side sleeps,
  // every reply comes late enough for the other to sleep too, and a run stayed at 160 us per
  // exchange instead of 18 (1 run in 4 at 50 us; none in 4 at 1000 us). With more ranks than
  // cores, 200 us with yielding did best at 4 and 8 ranks on 2 cores (0 and 1000 were slower).
  s.duration = std::chrono::microseconds(options.spinMicros >= 0 ? options.spinMicros
                                         : s.yield               ? 200
                                                                 : 1000);
  if (options.debug == DebugLevel::kAll || (options.debug == DebugLevel::kRank0 && rank == 0)) {
    std::fprintf(stderr, "chorus[%d]: waits poll for %lld us%s (placement %s)\n", rank,
                 static_cast<long long>(s.duration.count()),
                 s.yield ? ", yielding the core between polls: ranks outnumber the cores they share"
                         : " without yielding: no more ranks than cores",
                 encodePlacement(self).c_str());
  }
  return s;
}

// Ranks on several hosts talk over a network that others may reach: say once per process that
// nothing keeps strangers out (CHORUS_AUTH=off silences it).
void warnIfUnauthenticated(const std::vector<std::string>& hosts) {
  static std::atomic<bool> warned{false};
  const bool spansHosts =
      std::any_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h != hosts[0]; });
  if (!spansHosts || warned.exchange(true)) return;
  std::fprintf(stderr,
               "chorus: warning: this job's ranks span hosts and are not authenticated: anyone "
               "who reaches their ports or the store can join or disturb it. Give every rank "
               "the same private key file with CHORUS_AUTH_KEY_FILE (chorus-run does it "
               "itself), or set CHORUS_AUTH=off to silence this warning\n");
}

}  // namespace

std::unique_ptr<Transport> connect(Store& store, int rank, int size, const Options& options,
                                   const std::string& routeHost) {
  Deadline deadline = Deadline::after(options.timeout);
  CreationLog log(options, rank);
  const auth::AuthSettings auth = auth::authSettingsFrom(options.auth);
  auth.requireKeyIfAsked("creating a communicator (rank " + std::to_string(rank) + ")");
  const auth::JobKey* key = auth.key ? &*auth.key : nullptr;
  std::string ip = tcp::chooseListenAddress(options.ifname, routeHost);
  int port = 0;
  const bool zeroCopy = options.tcp.zeroCopyBytes > 0;
  Fd listener = tcp::listenOn(ip, options.socketBufferBytes, zeroCopy, &port);
  log.mark("listen");
  const std::string host = thisHostId(options, thisMachineId());
  const CorePlacement placement = thisPlacement();
  const std::string placementWord = encodePlacement(placement);
  if (host.find(' ') != std::string::npos) {
    throw Error(ErrorCode::kInvalidArgument, "host id '" + host + "' contains a space");
  }
  std::string self = net::hostPort(ip, port) + " " + placementWord + " " + host;
  store.set("addr/" + std::to_string(rank), Store::Bytes(self.begin(), self.end()));
  // The lower ranks' records (to dial them) and the job id now; the higher ranks' once they
  // have connected, so that rank 0 accepts at once.
  std::vector<PeerRecord> records(static_cast<size_t>(size));
  JobId job{};
  if (rank == 0) {
    job = newJobId();
    store.set("job", Store::Bytes(job.begin(), job.end()));
  }
  readRecords(store, rank, 0, rank, records, rank == 0 ? nullptr : &job, deadline);
  log.mark("records of lower ranks");
  auto recordOf = [&](int peer) -> const PeerRecord& { return records[static_cast<size_t>(peer)]; };

  // Each rank dials the lower ranks, then accepts the higher ones. (Accepting on a thread of its
  // own while dialing saved nothing measurable with 64 ranks on 2 cores, for more CPU time.)
  std::vector<tcp::Connection> conns;
  for (int peer = 0; peer < rank; ++peer) {
    conns.push_back(tcp::dialLower(recordOf(peer).address, rank, size, peer, job, key, auth.encrypt,
                                   options.socketBufferBytes, zeroCopy, deadline));
  }
  log.mark("dialled lower ranks");
  std::vector<tcp::Connection> higher = tcp::acceptHigher(
      listener.get(), rank, size, job, key, auth.encrypt, auth.handshakeTime, deadline);
  log.mark("accepted higher ranks");
  readRecords(store, rank, rank + 1, size, records, nullptr, deadline);
  for (auto& c : higher) {
    c.address = recordOf(c.peer).address;
    conns.push_back(std::move(c));
  }
  std::vector<std::string> hosts(static_cast<size_t>(size));
  hosts[static_cast<size_t>(rank)] = host;
  for (auto& c : conns) {
    c.zeroCopy = {options.tcp.zeroCopyBytes, options.tcp.zeroCopyKeep};
    c.host = recordOf(c.peer).placement;
    hosts[static_cast<size_t>(c.peer)] = recordOf(c.peer).host;
  }
  if (rank == 0 && !key && auth.mode == auth::AuthMode::kAuto) warnIfUnauthenticated(hosts);
  std::vector<CorePlacement> peers;
  for (const auto& c : conns) peers.push_back(decodePlacement(c.host));
  auto spin = spinFor(options, rank, placement, peers);
  log.mark("records of higher ranks, placements");
  // The shared-memory handshake runs on the connections before the transport owns them.
  std::vector<int> fds(static_cast<size_t>(size), -1);
  for (const auto& c : conns) fds[static_cast<size_t>(c.peer)] = c.fd.get();
  shm::SharedSetup shared = shm::setUp(rank, hosts, fds, job, options, deadline);
  log.mark("shared memory");
  auto tx =
      std::make_unique<PeerTransport>(rank, size, std::move(listener), std::move(conns), spin);
  tx->setHosts(std::move(hosts));
  uint64_t id = 0;
  for (size_t i = 0; i < 8; ++i) id = (id << 8) | job[i];
  tx->setCommunicatorId(id);
  if (!shared.links.empty()) {
    tx->attachSharedMemory(std::move(shared.self), std::move(shared.links));
  }
  log.mark("transport");
  return tx;
}

}  // namespace chorus::transport
