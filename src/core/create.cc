// Creation: rank 0 hosts the store when none runs yet, and the ranks of a new communicator meet
// through it (rendezvous) and connect to each other.
#include "core/connect.h"

#include "core/launch_env.h"
#include "core/library_version.h"
#include "core/roll_call.h"
#include "store/store_url.h"
#include "transport/connect.h"
#include "transport/creation_log.h"
#include "transport/init_line.h"

#include <chorus/error.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace chorus {

namespace {

// Rank 0 hosts the TCP store itself when nothing listens at the URL's address yet (runs under
// mpirun or srun need no separate server). Servers live as long as the process. True when this
// process serves the address. Clients prove the communicator's key (Options::auth).
bool maybeHostStore(const std::string& host, int port, const Options& options) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<TcpStoreServer>> servers;
  std::lock_guard<std::mutex> lock(mu);
  std::string key = host + ":" + std::to_string(port);
  if (servers.count(key)) return true;
  try {
    servers[key] = std::make_unique<TcpStoreServer>(host, port, options.auth, options.storeLimits);
    return true;
  } catch (const Error&) {
    // Already served (by chorus-run, chorus-store or another communicator), or not our address.
    return false;
  }
}

// A store this process hosts goes away when the process exits after a failed creation: the
// other ranks, which may be about to read the account this rank wrote there (a conflict of
// world sizes, say), would see only a lost connection. Stay a moment for them.
constexpr auto kHostLingerOnFailure = std::chrono::seconds(1);

}  // namespace

std::unique_ptr<CommunicatorImpl> connectScoped(std::shared_ptr<Store> scoped,
                                                const std::string& route, int rank, int size,
                                                Options options) {
  std::unique_ptr<transport::Transport> tx;
  if (size > 1) tx = transport::connect(*scoped, rank, size, options, route);
  return std::make_unique<CommunicatorImpl>(std::move(options), rank, size, std::move(tx),
                                            std::move(scoped), route);
}

std::unique_ptr<CommunicatorImpl> connectScopedBy(std::shared_ptr<Store> scoped,
                                                  const std::string& route, int rank, int size,
                                                  Options options, const Deadline& by) {
  std::unique_ptr<transport::Transport> tx;
  if (size > 1) {
    Options within = options;
    within.timeout = std::chrono::milliseconds(std::max(1, by.remainingMs()));
    tx = transport::connect(*scoped, rank, size, within, route);
  }
  return std::make_unique<CommunicatorImpl>(std::move(options), rank, size, std::move(tx),
                                            std::move(scoped), route);
}

std::string routeOf(const std::string& storeUrl) {
  if (storeUrl.rfind("tcp://", 0) != 0) return "";
  try {
    return store::parseStoreUrl(storeUrl).host;  // IPv6 without its brackets
  } catch (const Error&) {
    return "";  // openStore says what is wrong with it
  }
}

namespace {

std::unique_ptr<CommunicatorImpl> connect(std::shared_ptr<Store> store, const std::string& route,
                                          int rank, int size, Options options,
                                          transport::CreationLog log) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "rank " + std::to_string(rank) + " is not in [0, world size " + std::to_string(size) + ")");
  }
  if (!store) throw Error(ErrorCode::kInvalidArgument, "store is null");
  algo::validateAlgorithmSetting(options.algorithm);  // before any rank waits on this one
  // Each communicator created on the same store gets fresh keys: the n-th creation by a rank
  // pairs with the n-th creation by every other rank.
  int64_t generation = store->add("chorus/created/" + std::to_string(rank), 1);
  log.mark("generation");
  rollCall(*store, generation, rank, size, Deadline::after(options.timeout));
  log.mark("roll call");
  auto impl = connectScoped(makePrefixStore("chorus/" + std::to_string(generation), store), route,
                            rank, size, std::move(options));
  log.mark("transport and communicator");
  checkNoConflict(*store, generation);
  impl->rootStore = store;
  impl->elastic = true;
  impl->startTracing(store);
  log.mark("conflict check and tracing");
  return impl;
}

}  // namespace

std::unique_ptr<Communicator> Communicator::create(std::shared_ptr<Store> store, int rank, int size,
                                                   Options options) {
  transport::printInitLine(options, rank, size, libraryVersion());
  transport::CreationLog log(options, rank);
  return std::unique_ptr<Communicator>(
      new Communicator(connect(std::move(store), "", rank, size, std::move(options), log)));
}

std::unique_ptr<Communicator> Communicator::create(const std::string& storeUrl, int rank, int size,
                                                   Options options) {
  transport::printInitLine(options, rank, size, libraryVersion());
  transport::CreationLog log(options, rank);
  std::string route;
  bool hosting = false;
  if (storeUrl.rfind("tcp://", 0) == 0) {
    route = routeOf(storeUrl);
    if (rank == 0 && !route.empty()) {
      hosting = maybeHostStore(route, store::parseStoreUrl(storeUrl).port, options);
    }
  }
  auto store = openStore(storeUrl, options.timeout, options.auth);
  log.mark("store open");
  try {
    return std::unique_ptr<Communicator>(
        new Communicator(connect(std::move(store), route, rank, size, std::move(options), log)));
  } catch (const Error& e) {
    // kInvalidArgument: the ranks disagree (rollCall's conflicts), and the others are reading.
    if (hosting && e.code() == ErrorCode::kInvalidArgument) {
      std::this_thread::sleep_for(kHostLingerOnFailure);
    }
    throw;
  }
}

std::unique_ptr<Communicator> Communicator::fromEnv() { return fromEnv(Options::fromEnv()); }

std::unique_ptr<Communicator> Communicator::fromEnv(Options options) {
  if (launchedAlone()) return create(makeHashStore(), 0, 1, std::move(options));
  LaunchInfo launch = readLaunchInfo();
  if (startedAsReplacement()) {
    // Creating would start a second job on the store under a live rank's number: joining is
    // what such a process must do, and only a program written for it can go on after a join.
    throw Error(ErrorCode::kInvalidArgument,
                "Communicator::fromEnv: this process was started as a replacement for a lost rank "
                "(CHORUS_JOIN=1, rank " +
                    std::to_string(launch.rank) +
                    "), which must join the running job: call Communicator::fromEnvOrJoin "
                    "(C: chorus_comm_init_from_env_or_join), which joins then");
  }
  return create(launch.store, launch.rank, launch.size, std::move(options));
}

std::unique_ptr<Communicator> Communicator::fromEnvOrJoin() {
  return fromEnvOrJoin(Options::fromEnv());
}

std::unique_ptr<Communicator> Communicator::fromEnvOrJoin(Options options) {
  if (launchedAlone()) return create(makeHashStore(), 0, 1, std::move(options));
  LaunchInfo launch = readLaunchInfo();
  // CHORUS_RANK is only a hint for logs then: the survivors decide the newcomer's place.
  if (startedAsReplacement()) return join(launch.store, std::move(options));
  return create(launch.store, launch.rank, launch.size, std::move(options));
}

}  // namespace chorus
