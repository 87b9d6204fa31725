// The TCP store server's state, shared by its connection handling (tcp_store_server.cc) and
// its request handling (tcp_store_requests.cc). Everything here is owned by the server thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <chorus/error.hpp>
#include <chorus/store.hpp>

#include "auth/server_handshake.h"
#include "auth/settings.h"
#include "common/fd.h"
#include "store/store_util.h"
#include "store/tcp_store_limits.h"
#include "store/tcp_store_protocol.h"

namespace chorus {

namespace proto = store::proto;

namespace store::server {

constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadPerWakeup = 1 << 20;  // fairness between clients

// What a client proves with its handshake: knowledge of the key for this store.
const std::vector<uint8_t> kStoreContext = {'s', 't', 'o', 'r', 'e'};

constexpr auto kNever = Clock::time_point::max();
// A client without a key gets an error frame naming the problem, if its request is this small.
constexpr uint32_t kLargestAnsweredStranger = 64 * 1024;

struct Client {
  Fd fd;
  std::string address;  // the peer's ip:port, for messages
  // Until the client has proved the key (null without a key, or once proved).
  std::unique_ptr<auth::ServerHandshake> handshake;
  Clock::time_point handshake_until = kNever;
  bool handshake_begun = false;  // its first bytes were a handshake's
  // A client without a key that speaks the store protocol: answered with an error, then closed.
  bool unauthenticated_request = false;
  // Without a key: until when its first whole request must have arrived (kNever: it has).
  Clock::time_point first_request_until = kNever;
  // Since when part of a frame has been waiting for the rest (kNever: none).
  Clock::time_point partial_since = kNever;
  std::vector<uint8_t> in;  // received, not yet handled: [in_pos, in.size())
  size_t in_pos = 0;
  std::vector<uint8_t> out;  // to send: [out_pos, out.size())
  size_t out_pos = 0;
  bool dead = false;
  // A parked GET/WAIT/MGET: its keys, and the missing key it is registered under.
  bool parked = false;
  proto::Op parked_op = proto::Op::kGet;
  std::vector<std::string> parked_keys;
  std::string parked_on;
  Clock::time_point parked_until = Clock::time_point::max();

  size_t outPending() const { return out.size() - out_pos; }
  // Stops handling (and reading) requests while parked or while replies pile up unread.
  bool blocked() const { return parked || outPending() > proto::kMaxBody; }
};

}  // namespace store::server

using store::server::Client;

struct TcpStoreServer::Impl {
  auth::AuthSettings auth;
  store::ServerLimits limits;
  Fd listen_fd;
  Fd wake_fd;
  int port = 0;
  std::atomic<bool> stop{false};
  std::thread thread;

  // Owned by the server thread.
  std::unordered_map<uint64_t, Client> clients;
  uint64_t next_id = 1;
  std::unordered_map<std::string, Store::Bytes> data;
  std::unordered_map<std::string, std::unordered_set<uint64_t>> waiters;  // key -> parked ids
  std::vector<uint64_t> runnable;  // clients unparked or drained: handle their buffered input

  void run();
  void acceptAll();
  void readFrom(uint64_t id, Client& c);
  void handleInput(uint64_t id, Client& c);
  void handleRequest(uint64_t id, Client& c, proto::Op op, proto::Reader& r);
  bool tryAnswerParked(uint64_t id, Client& c);
  void notify(const std::string& key);
  int expireParked();     // answers timed-out parked requests; returns the poll timeout in ms
  int dropSlowClients();  // past their handshake or frame deadline; returns the poll timeout
  bool authenticate(Client& c);  // feeds the handshake; false while it is not done
  void refuse(Client& c, const std::string& what, const std::string& why);
  bool checkKey(Client& c, const std::string& key);  // false (after replying) when too long
  void unregister(uint64_t id, Client& c);
  void reply(Client& c, std::vector<uint8_t> frame);
  void replyError(Client& c, ErrorCode code, const std::string& message);
  void flush(Client& c);
  void close(uint64_t id);
};

}  // namespace chorus
