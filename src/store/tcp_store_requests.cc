// The TCP store server's requests: SET, GET, ADD, CHECK, WAIT, MGET and friends, parked requests
// and their wake-ups (the connections are tcp_store_server.cc's).
#include <algorithm>
#include <cstring>

#include "store/tcp_store_server_impl.h"

namespace chorus {

using namespace store::server;

bool TcpStoreServer::Impl::checkKey(Client& c, const std::string& key) {
  if (key.size() <= limits.maxKeyBytes) return true;
  refuse(c, "store request refused",
         "key of " + std::to_string(key.size()) + " bytes, longer than this store's limit of " +
             std::to_string(limits.maxKeyBytes) + " (CHORUS_STORE_MAX_KEY)");
  return false;
}

void TcpStoreServer::Impl::handleInput(uint64_t id, Client& c) {
  if (!authenticate(c)) return;
  bool progressed = false;
  while (!c.dead && !c.blocked()) {
    size_t avail = c.in.size() - c.in_pos;
    if (avail < proto::kHeaderSize) break;
    proto::Header h = proto::parseHeader(c.in.data() + c.in_pos);
    if (!proto::plausible(h) || !proto::validOp(h.code)) {
      c.dead = true;  // garbage, a foreign protocol, or an oversized length
      return;
    }
    if (c.unauthenticated_request) {
      if (h.body_len > kLargestAnsweredStranger) {
        c.dead = true;
        return;
      }
      if (avail < proto::kHeaderSize + h.body_len) break;
      c.in_pos = c.in.size();
      replyError(c, ErrorCode::kInvalidArgument,
                 "this store requires authentication: give the client the job's key file "
                 "(CHORUS_AUTH_KEY_FILE)");
      c.dead = true;
      return;
    }
    // The largest request a client may send: a SET of the longest key and value.
    const uint64_t largest = uint64_t{limits.maxKeyBytes} + limits.maxValueBytes + 8;
    if (h.body_len > largest) {
      refuse(c, "store request refused",
             "request of " + std::to_string(h.body_len) + " bytes, more than this store takes (" +
                 "CHORUS_STORE_MAX_KEY=" + std::to_string(limits.maxKeyBytes) +
                 ", CHORUS_STORE_MAX_VALUE=" + std::to_string(limits.maxValueBytes) + ")");
      c.dead = true;  // its body is not worth reading
      return;
    }
    if (avail < proto::kHeaderSize + h.body_len) break;
    proto::Reader r(c.in.data() + c.in_pos + proto::kHeaderSize, h.body_len);
    c.in_pos += proto::kHeaderSize + h.body_len;
    progressed = true;
    c.first_request_until = kNever;
    try {
      handleRequest(id, c, static_cast<proto::Op>(h.code), r);
    } catch (const std::exception& e) {
      // bad_alloc and the like: drop this client, keep serving the others.
      std::fprintf(stderr, "chorus: TcpStoreServer: dropping a client: %s\n", e.what());
      c.dead = true;
    }
  }
  // A frame begun and not finished must be finished within the frame deadline; parked clients
  // are not read from, so their clock stops.
  if (c.blocked() || c.in_pos == c.in.size()) {
    c.partial_since = kNever;
  } else if (progressed || c.partial_since == kNever) {
    c.partial_since = Clock::now();
  }
  // Drop handled bytes once they dominate the buffer.
  if (c.in_pos > 0 && (c.in_pos == c.in.size() || c.in_pos >= c.in.size() / 2)) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
}

void TcpStoreServer::Impl::handleRequest(uint64_t id, Client& c, proto::Op op, proto::Reader& r) {
  switch (op) {
    case proto::Op::kSet: {
      std::string key = r.str();
      Store::Bytes value = r.bytes();
      if (!r.done()) break;
      if (!checkKey(c, key)) return;
      if (value.size() > limits.maxValueBytes) {
        refuse(c, "store request refused",
               "value of " + std::to_string(value.size()) + " bytes for key " +
                   store::quoteKey(key) + ", larger than this store's limit of " +
                   std::to_string(limits.maxValueBytes) + " (CHORUS_STORE_MAX_VALUE)");
        return;
      }
      data[key] = std::move(value);
      reply(c, proto::Writer(0).finish());
      notify(key);
      return;
    }
    case proto::Op::kAdd: {
      std::string key = r.str();
      int64_t delta = r.i64();
      if (!r.done()) break;
      if (!checkKey(c, key)) return;
      int64_t result = 0;
      try {
        auto it = data.find(key);
        result = store::addCounter(key, it == data.end() ? 0 : store::parseCounter(key, it->second),
                                   delta);
      } catch (const Error& e) {
        replyError(c, e.code(), e.what());
        return;
      }
      data[key] = store::formatCounter(result);
      reply(c, proto::Writer(0).i64(result).finish());
      notify(key);
      return;
    }
    case proto::Op::kGet:
    case proto::Op::kCheck:
    case proto::Op::kWait:
    case proto::Op::kMultiGet: {
      std::vector<std::string> keys;
      int64_t timeout = op == proto::Op::kCheck ? 0 : r.i64();
      if (op == proto::Op::kGet) {
        keys.push_back(r.str());
      } else {
        uint32_t n = r.u32();
        // Each key takes at least 4 bytes: bounds n before reserving.
        if (r.failed() || n > r.left() / 4) break;
        keys.reserve(n);
        for (uint32_t i = 0; i < n; ++i) keys.push_back(r.str());
      }
      if (!r.done()) break;
      for (const auto& k : keys) {
        if (!checkKey(c, k)) return;
      }
      if (op == proto::Op::kCheck) {
        bool all = true;
        for (const auto& k : keys) all = all && data.count(k) != 0;
        reply(c, proto::Writer(0).u8(all ? 1 : 0).finish());
        return;
      }
      c.parked = true;
      c.parked_op = op;
      c.parked_keys = std::move(keys);
      c.parked_until = Deadline::after(std::chrono::milliseconds(timeout)).at();
      if (!tryAnswerParked(id, c) && Clock::now() >= c.parked_until) {
        std::string missing = c.parked_on;
        unregister(id, c);  // a zero timeout: answer at once
        replyError(c, ErrorCode::kTimeout, missing);
      }
      return;
    }
  }
  c.dead = true;  // the body did not parse
}

// Answers the parked request if its keys are all present; otherwise (re)registers it under a
// missing key. Returns true when answered.
bool TcpStoreServer::Impl::tryAnswerParked(uint64_t id, Client& c) {
  for (const auto& k : c.parked_keys) {
    if (data.count(k) == 0) {
      c.parked_on = k;
      waiters[k].insert(id);
      return false;
    }
  }
  c.parked = false;
  c.parked_on.clear();
  if (c.parked_op == proto::Op::kGet) {
    reply(c, proto::Writer(0).bytes(data.at(c.parked_keys[0])).finish());
  } else if (c.parked_op == proto::Op::kMultiGet) {
    // Sized before it is built: a request may name one large value many times.
    uint64_t bytes = 4;
    for (const auto& k : c.parked_keys) {
      bytes += 4 + data.at(k).size();
      if (bytes > proto::kMaxBody) break;
    }
    if (bytes > proto::kMaxBody) {
      replyError(c, ErrorCode::kInvalidArgument,
                 "the values of " + std::to_string(c.parked_keys.size()) +
                     " keys read at once exceed 64 MiB: read them one by one");
    } else {
      proto::Writer w(0);
      w.u32(static_cast<uint32_t>(c.parked_keys.size()));
      for (const auto& k : c.parked_keys) w.bytes(data.at(k));
      reply(c, w.finish());
    }
  } else {
    reply(c, proto::Writer(0).finish());
  }
  c.parked_keys.clear();
  return true;
}

int TcpStoreServer::Impl::expireParked() {
  auto now = Clock::now();
  auto next = Clock::time_point::max();
  for (auto& [id, c] : clients) {
    if (!c.parked || c.dead) continue;
    if (c.parked_until <= now) {
      std::string missing = c.parked_on;
      unregister(id, c);
      replyError(c, ErrorCode::kTimeout, missing);
      runnable.push_back(id);
    } else {
      next = std::min(next, c.parked_until);
    }
  }
  if (next == Clock::time_point::max()) return -1;
  return Deadline(next).remainingMs(60 * 1000);
}

void TcpStoreServer::Impl::notify(const std::string& key) {
  auto it = waiters.find(key);
  if (it == waiters.end()) return;
  std::unordered_set<uint64_t> ids = std::move(it->second);
  waiters.erase(it);
  for (uint64_t id : ids) {
    auto cit = clients.find(id);
    if (cit == clients.end()) continue;
    Client& c = cit->second;
    if (c.dead || !c.parked || c.parked_on != key) continue;
    if (tryAnswerParked(id, c)) runnable.push_back(id);
  }
}
}  // namespace chorus
