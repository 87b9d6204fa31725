// The members of an etcd cluster behind its v3 JSON gateway (/v3/kv/..., /v3/watch): each request
// goes to the member that answered last, then to the others in turn, until one answers or the
// caller's deadline passes. Any member serves reads and forwards writes to the leader, so
// following the leader needs nothing more than reaching a live member.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "store/etcd/http_client.h"
#include "store/store_url.h"

namespace chorus::store::etcd {

using Json = nlohmann::json;

// A key's value and the revision of the store it was read at.
struct KeyRead {
  std::optional<std::string> value;  // nullopt: absent
  int64_t modRevision = 0;           // of the key (0 when absent)
  int64_t storeRevision = 0;         // of the whole store when it was read
};

class EtcdClient {
 public:
  // https: the members serve HTTPS (tls: the files to use).
  EtcdClient(std::vector<HostPort> endpoints, bool https = false, TlsFiles tls = {});

  // POSTs `request` to `path` and returns the reply. Tries the members in turn until one
  // answers, and goes round again (after a pause) while the deadline allows. `what` names the
  // operation in errors ("put of key 'x'"). Throws Error(kTimeout) naming every member and why
  // it did not answer, or Error(kInvalidArgument) when etcd refuses the request itself.
  Json call(const std::string& what, const std::string& path, const Json& request,
            const Deadline& deadline);

  // Waits for a put of `key` after revision `readAt` (at which the caller found it absent): true
  // with its value once one came, false when `until` passed first, the member stopped watching,
  // or (fromNow) the store moved past readAt before the watch began: the caller reads again.
  // fromNow watches from the present, which etcd serves at once; a watch from a past revision
  // waits for etcd's catch-up of slow watchers (every 100 ms), so it is the fallback for a store
  // that other writers keep moving.
  bool watchForPut(const std::string& key, int64_t readAt, bool fromNow, const Deadline& until,
                   std::string* value);

  // "127.0.0.1:2379,127.0.0.1:2380".
  std::string endpointsText() const;
  // HTTP requests sent so far (for measuring the load a rank puts on the store).
  uint64_t requests() const { return requests_.load(); }

 private:
  std::string urlOf(size_t member, const std::string& path) const;

  std::vector<HostPort> endpoints_;
  const bool https_;
  const bool clientCertificate_;
  std::atomic<size_t> preferred_{0};  // the member that answered last
  std::atomic<uint64_t> requests_{0};
  HttpClient http_;
};

// Reads of a gateway reply: int64 fields come as strings, bytes fields as base64, and fields
// with their default value (0, empty, false) are left out.
int64_t intField(const Json& object, const char* name);
std::string bytesField(const Json& object, const char* name);
// A range reply's first key, as KeyRead (with the revision from its header).
KeyRead readRange(const Json& rangeReply);

}  // namespace chorus::store::etcd
