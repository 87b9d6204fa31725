#include "store/etcd/http_client.h"

#include <chorus/error.hpp>

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

namespace chorus::store::etcd {
namespace {

// Handles kept for reuse beyond those in flight: enough for the threads of one process that
// talk to the store at once (a rank's main thread, its watchers and progress thread).
constexpr size_t kMaxIdle = 8;

void initCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw Error(ErrorCode::kSystem, "etcd store: libcurl could not be initialised");
    }
  });
}

struct Sink {
  std::string* body;
  const HttpClient::Reader* reader;
  bool stopped = false;
};

size_t onWrite(char* data, size_t size, size_t count, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t n = size * count;
  if (*sink->reader) {
    if (!(*sink->reader)(std::string_view(data, n))) {
      sink->stopped = true;
      return 0;  // libcurl ends the transfer with CURLE_WRITE_ERROR
    }
    return n;
  }
  sink->body->append(data, n);
  return n;
}

}  // namespace

HttpClient::HttpClient(TlsFiles tls) : tls_(std::move(tls)) { initCurlOnce(); }

HttpClient::~HttpClient() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::take() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  CURL* h = curl_easy_init();
  if (h == nullptr) throw Error(ErrorCode::kSystem, "etcd store: curl_easy_init failed");
  return h;
}

void HttpClient::give(void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdle) {
    idle_.push_back(handle);
  } else {
    curl_easy_cleanup(static_cast<CURL*>(handle));
  }
}

HttpReply HttpClient::post(const std::string& url, const std::string& body,
                           std::chrono::milliseconds timeout,
                           std::chrono::milliseconds connectTimeout, const Reader& reader) {
  CURL* h = static_cast<CURL*>(take());
  curl_easy_reset(h);  // keeps the connection cache
  HttpReply reply;
  Sink sink{&reply.body, &reader};
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, onWrite);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  // Threads share the process: no SIGALRM-based resolver timeouts.
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  // The members are addressed directly: an http_proxy meant for the web must not carry them.
  curl_easy_setopt(h, CURLOPT_PROXY, "");
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(std::max<int64_t>(1, timeout.count())));
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, connectTimeout.count())));
  if (!tls_.ca.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, tls_.ca.c_str());
  if (!tls_.cert.empty()) curl_easy_setopt(h, CURLOPT_SSLCERT, tls_.cert.c_str());
  if (!tls_.key.empty()) curl_easy_setopt(h, CURLOPT_SSLKEY, tls_.key.c_str());
  const CURLcode rc = curl_easy_perform(h);
  curl_slist_free_all(headers);
  reply.stoppedByReader = sink.stopped;
  if (rc == CURLE_OK || sink.stopped) {
    reply.answered = true;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply.status);
  } else {
    reply.error = errbuf[0] != 0 ? errbuf : curl_easy_strerror(rc);
    reply.fatal = rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
                  rc == CURLE_SSL_CERTPROBLEM;
  }
  give(h);
  return reply;
}

}  // namespace chorus::store::etcd
