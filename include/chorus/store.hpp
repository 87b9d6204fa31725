// Key-value rendezvous used to bootstrap communicators.
#pragma once

#include <chorus/export.h>
#include <chorus/options.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

// Every blocking call takes a timeout and throws Error(kTimeout) when it passes.
class CHORUS_API Store {
 public:
  using Bytes = std::vector<uint8_t>;
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until the key exists, then returns its value.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Adds delta to the integer stored at key (0 when absent) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // True when every key exists.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // The values of every key, in order, once all exist (one timeout for all; a timeout names a
  // missing key). The default gets them one by one; a store that reads many keys in one
  // request (the TCP store, etcd, a prefix store over either) overrides it: a rendezvous of N
  // ranks reads N records per rank.
  virtual std::vector<Bytes> getMany(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout);
};

// In-process store, for ranks that are threads of one process.
CHORUS_API std::shared_ptr<Store> makeHashStore();
// Store on a shared filesystem: one file per key under dir.
CHORUS_API std::shared_ptr<Store> makeFileStore(const std::string& dir);
// Client of a TCP store server; proves the key of `auth` (AuthOptions::fromEnv() when not given)
// on every connection.
CHORUS_API std::shared_ptr<Store> makeTcpStore(const std::string& host, int port,
                                               std::chrono::milliseconds timeout);
CHORUS_API std::shared_ptr<Store> makeTcpStore(const std::string& host, int port,
                                               std::chrono::milliseconds timeout,
                                               const AuthOptions& auth);
// Prefixes every key with prefix + "/".
CHORUS_API std::shared_ptr<Store> makePrefixStore(const std::string& prefix,
                                                  std::shared_ptr<Store> inner);
// "tcp://host:port", "file:///path" or "etcd[s]://host:port,.../prefix"; `auth` as for
// makeTcpStore (and the etcd TLS files).
CHORUS_API std::shared_ptr<Store> openStore(const std::string& url,
                                            std::chrono::milliseconds timeout);
CHORUS_API std::shared_ptr<Store> openStore(const std::string& url,
                                            std::chrono::milliseconds timeout,
                                            const AuthOptions& auth);

// A TCP store server running on its own thread until destroyed.
class CHORUS_API TcpStoreServer {
 public:
  // port 0 picks a free port. Throws Error(kSystem) when the address cannot be bound. Clients
  // must prove the key of `auth` (none: not authenticated; a bad key file or mode `required`
  // without a key throws Error(kInvalidArgument)); `limits` bound what they may send.
  TcpStoreServer(const std::string& host, int port, const AuthOptions& auth,
                 const StoreLimits& limits);
  // With AuthOptions::fromEnv() and StoreLimits::fromEnv().
  TcpStoreServer(const std::string& host, int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const;

 private:
  struct CHORUS_HIDDEN Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chorus
