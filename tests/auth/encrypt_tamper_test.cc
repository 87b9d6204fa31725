// An encrypted job whose rank 1 reaches rank 0 through a proxy that plays the network: it passes
// the bytes on (and keeps a copy: the data must not show through), or flips one bit of a record,
// replays a record, or cuts a record short. Any change is detected by rank 0, which names rank 1,
// and every rank fails with a clear error instead of computing with altered data.
#include "auth/handshake_messages.h"
#include "auth/record_cipher.h"
#include "auth_test_util.h"
#include "harness/thread_ranks.h"
#include "transport/tcp/hello.h"
#include "unit/scoped_env.h"

#include <chorus/chorus.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>

namespace chorus {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

enum class Tamper { kNone, kFlipBit, kReplay, kCut };

// Forwards one connection; in the dialer's direction (rank 1 to rank 0) it follows the records
// that come after the clear handshake and hello, and tampers with record `target`.
class Proxy {
 public:
  Proxy(Tamper tamper, uint64_t target) : tamper_(tamper), target_(target) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(listener_, 4);
    socklen_t len = sizeof(a);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Proxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  // Starts forwarding to `target` ("ip:port") the first connection that comes in.
  void start(const std::string& target) {
    if (thread_.joinable()) return;  // the record is read more than once
    thread_ = std::thread([this, target] { run(target); });
  }
  // What rank 1 sent to rank 0, as seen on the wire.
  std::string wire() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::string(seen_.begin(), seen_.end());
  }
  bool tampered() const { return tampered_; }

 private:
  void run(const std::string& target) {
    pollfd l{listener_, POLLIN, 0};
    while (!stop_ && ::poll(&l, 1, 100) == 0) {
    }
    if (stop_) return;
    int in = ::accept(listener_, nullptr, nullptr);
    const int port = std::stoi(target.substr(target.rfind(':') + 1));
    int out = authtest::connectRaw(port, target.substr(0, target.rfind(':')));
    if (in < 0 || out < 0) return;
    // The clear part: challenge, proof and hello; then records.
    size_t clear = auth::kChallengeBytes + auth::kProofBytes + transport::tcp::kHelloBytes;
    std::vector<uint8_t> pending;  // dialer bytes not yet forwarded
    uint64_t record = 0;
    bool open = true;
    while (!stop_ && open) {
      pollfd p[2] = {{in, POLLIN, 0}, {out, POLLIN, 0}};
      if (::poll(p, 2, 100) <= 0) continue;
      uint8_t buf[65536];
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t k = ::recv(out, buf, sizeof(buf), 0);
        if (k <= 0) break;
        (void)::send(in, buf, static_cast<size_t>(k), MSG_NOSIGNAL);
      }
      if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t k = ::recv(in, buf, sizeof(buf), 0);
      if (k <= 0) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.insert(seen_.end(), buf, buf + k);
      }
      pending.insert(pending.end(), buf, buf + k);
      // Forward whole units: the clear prefix, then one record at a time.
      for (;;) {
        size_t unit = 0;
        bool isRecord = false;
        if (clear > 0) {
          unit = std::min(clear, pending.size());
          clear -= unit;
        } else if (pending.size() >= 4) {
          uint32_t n;
          std::memcpy(&n, pending.data(), 4);
          if (pending.size() >= n + auth::kRecordOverhead) unit = n + auth::kRecordOverhead;
          isRecord = true;
        }
        if (unit == 0) break;
        std::vector<uint8_t> bytes(pending.begin(), pending.begin() + static_cast<long>(unit));
        pending.erase(pending.begin(), pending.begin() + static_cast<long>(unit));
        const bool hit = isRecord && record == target_ && tamper_ != Tamper::kNone;
        if (isRecord) ++record;
        if (hit && tamper_ == Tamper::kFlipBit) bytes[bytes.size() / 2] ^= 0x04;
        if (hit && tamper_ == Tamper::kCut) {
          (void)::send(out, bytes.data(), bytes.size() / 2, MSG_NOSIGNAL);
          tampered_ = true;
          open = false;
          break;
        }
        (void)::send(out, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (hit && tamper_ == Tamper::kReplay) {
          (void)::send(out, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        }
        tampered_ = tampered_ || hit;
      }
    }
    ::shutdown(out, SHUT_RDWR);
    ::shutdown(in, SHUT_RDWR);
    ::close(in);
    ::close(out);
  }

  Tamper tamper_;
  uint64_t target_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> tampered_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<uint8_t> seen_;
};

// Rank 1's view of the store: rank 0's address is the proxy's, which forwards to the real one.
class RedirectingStore final : public Store {
 public:
  RedirectingStore(std::shared_ptr<Store> inner, Proxy& proxy) : inner_(inner), proxy_(proxy) {}
  void set(const std::string& k, const Bytes& v) override { inner_->set(k, v); }
  Bytes get(const std::string& k, std::chrono::milliseconds timeout) override {
    Bytes v = inner_->get(k, timeout);
    if (k.size() >= 7 && k.compare(k.size() - 7, 7, "/addr/0") == 0) {
      std::string record(v.begin(), v.end());
      const std::string real = record.substr(0, record.find(' '));
      proxy_.start(real);
      record = "127.0.0.1:" + std::to_string(proxy_.port()) + record.substr(real.size());
      v.assign(record.begin(), record.end());
    }
    return v;
  }
  int64_t add(const std::string& k, int64_t d) override { return inner_->add(k, d); }
  bool check(const std::vector<std::string>& keys) override { return inner_->check(keys); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds t) override {
    inner_->wait(keys, t);
  }

 private:
  std::shared_ptr<Store> inner_;
  Proxy& proxy_;
};

// Two ranks run all-reduces of 100 KB (two records each way per call), with a marker in the
// data; returns each rank's error ("" when it finished).
std::array<std::string, 2> runJob(Proxy& proxy) {
  Options o = testing::testOptions(30s);
  o.transport = TransportKind::kTcp;
  auto store = makeHashStore();
  auto body = [&](int rank) -> std::string {
    try {
      std::shared_ptr<Store> mine = store;
      if (rank == 1) mine = std::make_shared<RedirectingStore>(store, proxy);
      auto c = Communicator::create(mine, rank, 2, o);
      std::vector<char> v(100'000, 'M');
      for (int call = 0; call < 8; ++call) {
        std::memcpy(v.data(), "SECRET-MARKER-SECRET", 20);
        c->allReduce(v.data(), v.data(), v.size(), DataType::kI8, ReduceOp::kMax).wait();
        if (v[6] != '-' || v[99'999] != 'M') return "rank " + std::to_string(rank) + ": wrong data";
      }
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  auto zero = std::async(std::launch::async, body, 0);
  auto one = std::async(std::launch::async, body, 1);
  return {zero.get(), one.get()};
}

class EncryptedWire : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.set("CHORUS_AUTH", nullptr);
    env_.set("CHORUS_AUTH_KEY_FILE", authtest::writeKey(dir_, "job.key").c_str());
    env_.set("CHORUS_ENCRYPT", "1");
  }
  test::ScratchDir dir_;
  ScopedEnv env_;
};

TEST_F(EncryptedWire, UntouchedRecordsArriveAndTheDataDoesNotShowOnTheWire) {
  Proxy proxy(Tamper::kNone, 0);
  auto errors = runJob(proxy);
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  const std::string wire = proxy.wire();
  EXPECT_GT(wire.size(), 8 * 50'000u);
  EXPECT_EQ(wire.find("SECRET-MARKER"), std::string::npos);
  EXPECT_EQ(wire.find("MMMMMMMMMMMMMMMM"), std::string::npos);
}

void expectDetected(Tamper tamper, const char* rank0Says) {
  Proxy proxy(tamper, 5);
  auto errors = runJob(proxy);
  ASSERT_TRUE(proxy.tampered());
  EXPECT_THAT(errors[0], HasSubstr("rank 1"));
  EXPECT_THAT(errors[0], HasSubstr(rank0Says));
  EXPECT_NE(errors[1], "") << "rank 1 finished although rank 0 failed";
  EXPECT_THAT(errors[1], AnyOf(HasSubstr("rank 0"), HasSubstr("lost connection")));
}

TEST_F(EncryptedWire, AFlippedBitIsDetectedAndEveryRankFails) {
  expectDetected(Tamper::kFlipBit, "failed authentication");
}

TEST_F(EncryptedWire, AReplayedRecordIsDetectedAndEveryRankFails) {
  expectDetected(Tamper::kReplay, "encrypted record 6 failed authentication");
}

TEST_F(EncryptedWire, ARecordCutShortIsDetected) {
  expectDetected(Tamper::kCut, "in the middle of encrypted record 5");
}

}  // namespace
}  // namespace chorus
