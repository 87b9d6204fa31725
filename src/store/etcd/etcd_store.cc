// The store on etcd v3 ("etcd://h1:2379,h2:2379/prefix"), through etcd's JSON gateway with
// libcurl and nlohmann::json, both already Debian packages the project builds with. The gateway
// needs no generated code and no gRPC stack in libchorus (and in every process that loads it,
// torch's included); what it costs, JSON and base64 around each request, is small beside a
// rendezvous's few requests per rank. Keys live under "<prefix>/"; values are bytes as given;
// counters are decimal text as in every store. Waits read, then watch (etcd_client.h says from
// which revision), so a put between the two is not missed.
#include "store/etcd/etcd_store.h"

#include <chorus/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "store/compare_set.h"
#include "store/etcd/base64.h"
#include "store/etcd/etcd_client.h"
#include "store/store_util.h"

namespace chorus::store::etcd {
namespace {

using std::chrono::milliseconds;

// A transaction carries at most this many operations (etcd's --max-txn-ops default).
constexpr size_t kMaxTxnOps = 128;
// The reads of a wait get at least this long, so that a zero timeout still reads once.
constexpr milliseconds kMinRead{250};
// The watches of one wait that start from the present (served at once, but given up when the
// store moved since the read); later ones start from the revision read at (never miss a put,
// but etcd may deliver it up to 100 ms late). While ranks rendezvous the store moves with every
// rank's write, and a few fresh reads find the key sooner than a late delivery.
constexpr int kWatchesFromNow = 8;
// A watch from a past revision that ends sooner than this without an event was refused: the
// wait pauses as long before it reads again.
constexpr milliseconds kQuickWatch{20};

std::string text(const Store::Bytes& b) { return std::string(b.begin(), b.end()); }
Store::Bytes bytes(const std::string& s) { return Store::Bytes(s.begin(), s.end()); }

class EtcdStore final : public Store, public ComparesAndSets {
 public:
  EtcdStore(std::vector<HostPort> endpoints, const std::string& prefix, milliseconds timeout,
            bool https, TlsFiles tls)
      : client_(std::move(endpoints), https, std::move(tls)),
        prefix_(prefix + "/"),
        timeout_(timeout) {
    // Fails now, as the TCP store's connect does, when no member answers.
    client_.call("a first read (under prefix '" + prefix + "')", "/v3/kv/range",
                 {{"key", base64Encode(prefix_)}, {"count_only", true}}, opDeadline());
  }

  void set(const std::string& key, const Bytes& value) override {
    client_.call("put of key " + quoteKey(key), "/v3/kv/put",
                 {{"key", base64Encode(full(key))}, {"value", base64Encode(text(value))}},
                 opDeadline());
  }

  Bytes get(const std::string& key, milliseconds timeout) override {
    return bytes(waitFor({key}, timeout)[0]);
  }

  std::vector<Bytes> getMany(const std::vector<std::string>& keys, milliseconds timeout) override {
    std::vector<Bytes> out;
    for (auto& v : waitFor(keys, timeout)) out.push_back(bytes(v));
    return out;
  }

  void wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    waitFor(keys, timeout);
  }

  bool check(const std::vector<std::string>& keys) override {
    const Deadline deadline = opDeadline();
    for (size_t i = 0; i < keys.size(); i += kMaxTxnOps) {
      std::vector<std::string> chunk(
          keys.begin() + static_cast<ptrdiff_t>(i),
          keys.begin() + static_cast<ptrdiff_t>(std::min(keys.size(), i + kMaxTxnOps)));
      for (const KeyRead& r : readAll(chunk, deadline)) {
        if (!r.value) return false;
      }
    }
    return true;
  }

  // Read, then write the sum only if the key did not change since (a transaction comparing its
  // revision); a writer in between makes it read again (the failed transaction's read). 2
  // requests, and 1 more per writer in between.
  int64_t add(const std::string& key, int64_t delta) override {
    const Deadline deadline = opDeadline();
    KeyRead now = readAll({key}, deadline)[0];
    // add(key, 0) reads a counter (the membership protocol does so often): no write when it
    // exists.
    if (delta == 0 && now.value) return parseCounter(key, bytes(*now.value));
    for (;;) {
      const int64_t next =
          addCounter(key, now.value ? parseCounter(key, bytes(*now.value)) : 0, delta);
      Json compare = now.value ? Json{{"key", base64Encode(full(key))},
                                      {"target", "MOD"},
                                      {"result", "EQUAL"},
                                      {"mod_revision", std::to_string(now.modRevision)}}
                               : absentCompare(key);
      auto [swapped, after] = transact(compare, key, text(formatCounter(next)),
                                       "add on key " + quoteKey(key), deadline);
      if (swapped) return next;
      now = after;
    }
  }

  CompareSetResult compareSet(const std::string& key, const std::optional<Bytes>& expected,
                              const Bytes& desired) override {
    Json compare = expected ? Json{{"key", base64Encode(full(key))},
                                   {"target", "VALUE"},
                                   {"result", "EQUAL"},
                                   {"value", base64Encode(text(*expected))}}
                            : absentCompare(key);
    auto [swapped, after] = transact(compare, key, text(desired),
                                     "compare-and-set of key " + quoteKey(key), opDeadline());
    if (swapped) return {true, desired};
    return {false, after.value ? std::optional<Bytes>(bytes(*after.value)) : std::nullopt};
  }

 private:
  std::string full(const std::string& key) const { return prefix_ + key; }
  Deadline opDeadline() const { return Deadline::after(timeout_); }

  Json absentCompare(const std::string& key) const {
    return {{"key", base64Encode(full(key))},
            {"target", "CREATE"},
            {"result", "EQUAL"},
            {"create_revision", "0"}};
  }

  // One transaction: when `compare` holds, put value at key; otherwise read key. Returns whether
  // it put, and otherwise the key as read.
  std::pair<bool, KeyRead> transact(const Json& compare, const std::string& key,
                                    const std::string& value, const std::string& what,
                                    const Deadline& deadline) {
    const std::string k = base64Encode(full(key));
    Json txn = {
        {"compare", Json::array({compare})},
        {"success", Json::array({{{"request_put", {{"key", k}, {"value", base64Encode(value)}}}}})},
        {"failure", Json::array({{{"request_range", {{"key", k}}}}})}};
    Json reply = client_.call(what, "/v3/kv/txn", txn, deadline);
    if (reply.value("succeeded", false)) return {true, KeyRead{}};
    KeyRead read;
    auto responses = reply.find("responses");
    if (responses != reply.end() && responses->is_array() && !responses->empty()) {
      read = readRange((*responses)[0].value("response_range", Json::object()));
    }
    read.storeRevision = intField(reply.value("header", Json::object()), "revision");
    return {false, read};
  }

  // The keys (at most kMaxTxnOps), read at one revision by one transaction.
  std::vector<KeyRead> readAll(const std::vector<std::string>& keys, const Deadline& deadline) {
    Json ops = Json::array();
    for (const auto& key : keys) {
      ops.push_back({{"request_range", {{"key", base64Encode(full(key))}}}});
    }
    const std::string what = keys.size() == 1 ? "read of key " + quoteKey(keys[0])
                                              : "read of " + std::to_string(keys.size()) +
                                                    " keys from " + quoteKey(keys[0]);
    Json reply = client_.call(what, "/v3/kv/txn", {{"success", ops}}, deadline);
    const int64_t revision = intField(reply.value("header", Json::object()), "revision");
    std::vector<KeyRead> out(keys.size());
    auto responses = reply.value("responses", Json::array());
    if (responses.size() != keys.size()) {
      throw Error(ErrorCode::kSystem, "etcd store: " + what + " answered " +
                                          std::to_string(responses.size()) + " reads");
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      out[i] = readRange(responses[i].value("response_range", Json::object()));
      out[i].storeRevision = revision;
    }
    return out;
  }

  // The values of keys, once all exist: reads those still missing, watches the first of them
  // from the revision read at, and reads again when it came (or the watch was renewed).
  std::vector<std::string> waitFor(const std::vector<std::string>& keys, milliseconds timeout) {
    const Deadline deadline = Deadline::after(timeout);
    std::vector<std::optional<std::string>> values(keys.size());
    int watches = 0;
    for (;;) {
      const Deadline readBy(std::max(deadline.at(), Clock::now() + kMinRead));
      size_t missing = keys.size();
      int64_t revision = 0;
      for (size_t i = 0; i < keys.size() && missing == keys.size();) {
        std::vector<size_t> index;
        std::vector<std::string> chunk;
        for (; i < keys.size() && chunk.size() < kMaxTxnOps; ++i) {
          if (values[i]) continue;
          index.push_back(i);
          chunk.push_back(keys[i]);
        }
        if (chunk.empty()) break;
        std::vector<KeyRead> reads = readAll(chunk, readBy);
        for (size_t j = 0; j < reads.size(); ++j) {
          values[index[j]] = reads[j].value;
          if (!reads[j].value && missing == keys.size()) {
            missing = index[j];
            revision = reads[j].storeRevision;
          }
        }
      }
      if (missing == keys.size()) break;
      if (deadline.expired()) {
        throwWaitTimeout("etcd store " + client_.endpointsText() + " under " + quoteKey(prefix_),
                         "key " + quoteKey(keys[missing]), timeout);
      }
      std::string value;
      const bool fromNow = ++watches <= kWatchesFromNow;
      const auto watchedAt = Clock::now();
      if (client_.watchForPut(full(keys[missing]), revision, fromNow, deadline, &value)) {
        values[missing] = value;
      } else if (!fromNow && Clock::now() - watchedAt < kQuickWatch) {
        // The member refused the watch at once (no leader, going down): not a loop of requests.
        std::this_thread::sleep_for(std::min(kQuickWatch, milliseconds(deadline.remainingMs())));
      }
    }
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (auto& v : values) out.push_back(std::move(*v));
    return out;
  }

  EtcdClient client_;
  const std::string prefix_;
  const milliseconds timeout_;
};

}  // namespace

std::shared_ptr<Store> makeEtcdStore(std::vector<HostPort> endpoints, const std::string& prefix,
                                     milliseconds timeout, bool https, TlsFiles tls) {
  return std::make_shared<EtcdStore>(std::move(endpoints), prefix, timeout, https, std::move(tls));
}

std::shared_ptr<Store> openEtcdStore(const StoreUrl& url, milliseconds timeout,
                                     const AuthOptions& auth) {
  TlsFiles tls;
  const std::tuple<const char*, const std::string*, std::string*> settings[] = {
      {"CHORUS_ETCD_CA", &auth.etcdCaFile, &tls.ca},
      {"CHORUS_ETCD_CERT", &auth.etcdCertFile, &tls.cert},
      {"CHORUS_ETCD_KEY", &auth.etcdKeyFile, &tls.key}};
  for (const auto& [name, given, field] : settings) {
    const char* value = given->c_str();
    if (*value == 0) continue;
    if (!url.tls) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("openStore: ") + name +
                      " is set but the store URL is etcd:// (plain HTTP): use etcds://");
    }
    if (::access(value, R_OK) != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("openStore: ") + name + "=" + value + " cannot be read");
    }
    *field = value;
  }
  if (tls.cert.empty() != tls.key.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "openStore: CHORUS_ETCD_CERT and CHORUS_ETCD_KEY go together (a client "
                "certificate and its key)");
  }
  return makeEtcdStore(url.endpoints, url.path, timeout, url.tls, std::move(tls));
}

}  // namespace chorus::store::etcd
