// mp_worker, mode "garbage": junk on the ranks' ports and the store.
#include "modes.h"

#include <chorus/chorus.h>
#include <chorus/store.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace mpworker {

// ---- garbage ----

struct Address {
  std::string ip;
  int port = 0;
};

// The store holds "ip:port host-id" per rank.
Address parseAddress(const std::string& record) {
  const std::string text = record.substr(0, record.find(' '));
  auto colon = text.rfind(':');
  if (colon == std::string::npos) fatal("bad address '" + text + "'");
  return Address{text.substr(0, colon), std::atoi(text.c_str() + colon + 1)};
}

int dialRaw(const Address& a) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(a.port));
  inet_pton(AF_INET, a.ip.c_str(), &sa.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + static_cast<size_t>(i)] = static_cast<uint8_t>(x >> (8 * i));
}

// A Chorus hello (tcp/hello.h layout) that some field makes unacceptable.
std::vector<uint8_t> hello(uint32_t magic, uint8_t version, uint8_t kind,
                           const std::vector<uint8_t>& job, int32_t from, int32_t to,
                           int32_t world) {
  std::vector<uint8_t> h(72, 0);
  put32(h, 0, magic);
  h[4] = version;
  h[5] = kind;
  for (size_t i = 0; i < 16 && i < job.size(); ++i) h[8 + i] = job[i];
  put32(h, 24, static_cast<uint32_t>(from));
  put32(h, 28, static_cast<uint32_t>(to));
  put32(h, 32, static_cast<uint32_t>(world));
  return h;
}

struct Payload {
  std::string name;
  std::vector<uint8_t> bytes;
  int holdMs = 0;      // keep the connection open this long after writing
  bool reset = false;  // close with RST instead of FIN
};

std::vector<uint8_t> randomBytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

std::vector<Payload> rankPayloads(const std::vector<uint8_t>& job, int target, int n,
                                  std::mt19937& rng) {
  constexpr uint32_t kHello = 0x48524843;  // "CHRH"
  constexpr uint32_t kFrame = 0x53524843;  // "CHRS"
  std::vector<uint8_t> otherJob(16, 0x5A);
  std::vector<Payload> p;
  p.push_back({"nothing", {}, 0, false});
  p.push_back({"reset", {}, 0, true});
  p.push_back({"random-4k", randomBytes(rng, 4096), 0, false});
  p.push_back({"random-1m", randomBytes(rng, 1 << 20), 0, false});
  p.push_back({"wrong-magic", hello(0xDEADBEEF, 1, 1, job, n - 1, target, n), 0, false});
  auto truncated = hello(kHello, 1, 1, otherJob, n - 1, target, n);
  truncated.resize(20);
  p.push_back({"truncated-hello", truncated, 0, false});
  p.push_back({"truncated-hello-held", truncated, 100, false});
  p.push_back({"wrong-version", hello(kHello, 9, 1, job, n - 1, target, n), 0, false});
  p.push_back({"wrong-kind", hello(kHello, 1, 7, job, n - 1, target, n), 0, false});
  p.push_back({"accept-kind", hello(kHello, 1, 2, job, n - 1, target, n), 0, false});
  p.push_back({"other-job", hello(kHello, 1, 1, otherJob, n - 1, target, n), 0, false});
  // This job's id, but a sender that cannot be a higher rank or a wrong destination / size.
  p.push_back({"from-lower", hello(kHello, 1, 1, job, target, target, n), 0, false});
  p.push_back({"from-outside", hello(kHello, 1, 1, job, n + 7, target, n), 0, false});
  p.push_back({"from-negative", hello(kHello, 1, 1, job, -5, target, n), 0, false});
  p.push_back({"to-other", hello(kHello, 1, 1, job, n - 1, target + 1, n), 0, false});
  p.push_back({"wrong-world", hello(kHello, 1, 1, job, n - 1, target, n + 1), 0, false});
  auto hugeAuth = hello(kHello, 1, 1, otherJob, n - 1, target, n);
  put32(hugeAuth, 36, 0xFFFFFFFF);
  p.push_back({"huge-auth-length", hugeAuth, 0, false});
  // A data frame header with an absurd payload length.
  std::vector<uint8_t> frame(48, 0);
  put32(frame, 0, kFrame);
  frame[4] = 1;
  frame[5] = 1;
  for (int i = 40; i < 48; ++i) frame[static_cast<size_t>(i)] = 0xFF;
  p.push_back({"frame-huge-length", frame, 0, false});
  return p;
}

std::vector<Payload> storePayloads(std::mt19937& rng) {
  // Store frames: u32 magic "CHST" | u16 version 1 | u8 op | u8 flags | u32 body length.
  auto header = [](uint32_t magic, uint16_t version, uint8_t op, uint8_t flags, uint32_t len) {
    std::vector<uint8_t> h(12, 0);
    put32(h, 0, magic);
    h[4] = static_cast<uint8_t>(version);
    h[5] = static_cast<uint8_t>(version >> 8);
    h[6] = op;
    h[7] = flags;
    put32(h, 8, len);
    return h;
  };
  constexpr uint32_t kStore = 0x54534843;
  std::vector<Payload> p;
  p.push_back({"store-nothing", {}, 0, false});
  p.push_back({"store-reset", {}, 0, true});
  p.push_back({"store-random-4k", randomBytes(rng, 4096), 0, false});
  p.push_back({"store-random-1m", randomBytes(rng, 1 << 20), 0, false});
  p.push_back({"store-wrong-magic", header(0xDEADBEEF, 1, 1, 0, 0), 0, false});
  p.push_back({"store-wrong-version", header(kStore, 7, 1, 0, 0), 0, false});
  p.push_back({"store-bad-op", header(kStore, 1, 99, 0, 0), 0, false});
  p.push_back({"store-flags", header(kStore, 1, 1, 1, 0), 0, false});
  p.push_back({"store-huge-length", header(kStore, 1, 1, 0, 0xFFFFFFFF), 0, false});
  p.push_back({"store-max-length-truncated", header(kStore, 1, 1, 0, 64u << 20), 0, false});
  auto badBody = header(kStore, 1, 1, 0, 8);  // SET whose key length runs past the body
  for (int i = 0; i < 8; ++i) badBody.push_back(0xEE);
  p.push_back({"store-bad-body", badBody, 0, false});
  auto hugeKey = header(kStore, 1, 4, 0, 8);  // CHECK of 0xFFFFFFFF keys
  for (int i = 0; i < 4; ++i) hugeKey.push_back(0xFF);
  for (int i = 0; i < 4; ++i) hugeKey.push_back(0);
  p.push_back({"store-check-many-keys", hugeKey, 0, false});
  auto truncated = header(kStore, 1, 1, 0, 0);
  truncated.resize(7);
  p.push_back({"store-truncated-header", truncated, 100, false});
  return p;
}

// Sends every payload on a connection of its own; returns how many connections were made.
int attack(const Address& a, const std::vector<Payload>& payloads) {
  int made = 0;
  for (const auto& p : payloads) {
    int fd = dialRaw(a);
    if (fd < 0) continue;  // the port may be closed already: that is fine
    ++made;
    size_t off = 0;
    while (off < p.bytes.size()) {
      ssize_t k = ::send(fd, p.bytes.data() + off, p.bytes.size() - off, MSG_NOSIGNAL);
      if (k <= 0) break;  // the rank dropped us: that is the point
      off += static_cast<size_t>(k);
    }
    if (p.holdMs) std::this_thread::sleep_for(std::chrono::milliseconds(p.holdMs));
    if (p.reset) {
      linger l{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd);
  }
  return made;
}

int runGarbage(int attacker) {
  const char* url = std::getenv("CHORUS_STORE");
  const char* rankText = std::getenv("CHORUS_RANK");
  const char* sizeText = std::getenv("CHORUS_WORLD_SIZE");
  if (!url || !rankText || !sizeText) fatal("garbage needs CHORUS_STORE, CHORUS_RANK, ...");
  const int rank = std::atoi(rankText), n = std::atoi(sizeText);
  if (attacker < 0) attacker = n - 1;
  const std::string storeUrl = url;
  if (storeUrl.rfind("tcp://", 0) != 0) fatal("garbage needs a tcp:// store");
  const Address storeAddress = parseAddress(storeUrl.substr(6));
  std::mt19937 rng(12345u + static_cast<unsigned>(rank));
  std::vector<Address> peers;
  std::vector<uint8_t> job;
  int connections = 0;

  std::thread setupAttack;
  if (rank == attacker) {
    // The ranks publish their listening addresses once every rank has joined the store (this one
    // too, from init() below): read them as soon as they appear and attack while the ranks
    // connect, the others still waiting for this one's connection.
    setupAttack = std::thread([&] {
      auto store = chorus::openStore(storeUrl, std::chrono::seconds(10));
      for (int r = 0; r < n; ++r) {
        if (r == rank) continue;
        auto v = store->get("chorus/1/addr/" + std::to_string(r), std::chrono::seconds(10));
        peers.push_back(parseAddress(std::string(v.begin(), v.end())));
      }
      job = store->get("chorus/1/job", std::chrono::seconds(10));
      for (int r = 0, i = 0; r < n; ++r) {
        if (r != rank)
          connections += attack(peers[static_cast<size_t>(i++)], rankPayloads(job, r, n, rng));
      }
    });
  }

  Ctx c = init();
  if (setupAttack.joinable()) setupAttack.join();
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::thread during;
  if (rank == attacker) {
    during = std::thread([&] {
      std::mt19937 rng2(777);
      for (; !stop.load(); ++rounds) {
        for (int r = 0, i = 0; r < n; ++r) {
          if (r != rank) {
            connections += attack(peers[static_cast<size_t>(i++)], rankPayloads(job, r, n, rng2));
          }
        }
        connections += attack(storeAddress, storePayloads(rng2));
      }
    });
  }
  // Collectives while the garbage flows, until the attacker has sent every payload to every
  // rank and the store once (it tells the others through the broadcast).
  bool ok = true;
  const size_t count = 1 << 16;
  std::vector<float> buf(count);
  chorus_status st = CHORUS_OK;
  int iterations = 0;
  for (int32_t go = 1; st == CHORUS_OK && go; ++iterations) {
    for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(c.rank + 1);
    st = chorus_all_reduce(c.comm, buf.data(), buf.data(), count, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
    for (size_t i = 0; i < count && st == CHORUS_OK; i += 97) {
      ok = ok && buf[i] == static_cast<float>(n * (n + 1) / 2);
    }
    if (rank == attacker) go = (rounds.load() < 1 || iterations < 20) && iterations < 100000;
    if (st == CHORUS_OK) st = chorus_broadcast(c.comm, &go, 1, CHORUS_DTYPE_I32, attacker);
  }
  result(c, "collectives", st,
         "iterations=" + std::to_string(iterations) + (ok ? " right=1" : " right=0"));
  if (rank == attacker) {
    stop = true;
    during.join();
  }
  if (st == CHORUS_OK) st = chorus_barrier(c.comm);
  // A second communicator needs the store (and fresh listening ports) again.
  chorus_comm* second = nullptr;
  chorus_status st2 = chorus_comm_init_from_env(&second);
  std::string msg2 = second ? "" : oneLine(chorus_last_error(nullptr));
  if (st2 == CHORUS_OK) {
    float x = static_cast<float>(rank + 1);
    st2 = chorus_all_reduce(second, &x, &x, 1, CHORUS_DTYPE_F32, CHORUS_OP_SUM);
    if (st2 != CHORUS_OK) msg2 = oneLine(chorus_last_error(second));
    if (st2 == CHORUS_OK && x != static_cast<float>(n * (n + 1) / 2)) ok = false;
  }
  result(c, "second-communicator", st2, "", msg2.c_str());
  if (rank == attacker) {
    say("ATTACK rank=" + std::to_string(rank) + " connections=" + std::to_string(connections) +
        " rounds=" + std::to_string(rounds.load()));
  }
  chorus_comm_destroy(second);
  chorus_comm_destroy(c.comm);
  return st == CHORUS_OK && st2 == CHORUS_OK && ok ? 0 : 1;
}

}  // namespace mpworker
