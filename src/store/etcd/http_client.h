// HTTP POSTs through libcurl, for etcd's JSON gateway. One easy handle per request in flight,
// kept between requests so that the connection to a member is reused.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::store::etcd {

// Files for HTTPS: the CA that signed the members' certificates (empty: the system's), and this
// client's certificate and key where the members ask for one (etcd's --client-cert-auth).
struct TlsFiles {
  std::string ca, cert, key;
};

struct HttpReply {
  bool answered = false;  // an HTTP response came back (any status)
  long status = 0;
  std::string body;
  std::string error;   // why there was no answer (libcurl's words)
  bool fatal = false;  // and another try will not do better (a certificate that fails to verify)
  bool stoppedByReader = false;
};

class HttpClient {
 public:
  // Sees the response body as it streams; returns false to stop reading.
  using Reader = std::function<bool(std::string_view chunk)>;

  explicit HttpClient(TlsFiles tls = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // POSTs `body` (JSON) to url and gives up after `timeout` (at least 1 ms); connecting gives up
  // after `connectTimeout`. With a reader the body goes to it instead of the reply.
  HttpReply post(const std::string& url, const std::string& body, std::chrono::milliseconds timeout,
                 std::chrono::milliseconds connectTimeout, const Reader& reader = {});

 private:
  void* take();
  void give(void* handle);

  const TlsFiles tls_;
  std::mutex mu_;
  std::vector<void*> idle_;
};

}  // namespace chorus::store::etcd
