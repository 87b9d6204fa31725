// mp_worker's shared pieces: output lines, the communicator context, and the values every rank
// contributes and the results it expects (header-only: each mode's file includes it).
#pragma once

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

inline int64_t monoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // system-wide: comparable between the ranks
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// One write per line, so lines of different ranks and threads never mix.
inline void say(const std::string& line) {
  std::string s = line + "\n";
  (void)!write(STDOUT_FILENO, s.data(), s.size());
}

inline std::string oneLine(const char* text) {
  std::string s = text ? text : "<null>";
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

struct Ctx {
  chorus_comm* comm = nullptr;
  int rank = 0;
  int size = 1;
};

inline void result(const Ctx& c, const std::string& caseName, chorus_status st,
                   const std::string& extra = "", const char* msg = nullptr) {
  std::string line = "RESULT rank=" + std::to_string(c.rank) + " case=" + caseName +
                     " status=" + chorus_status_string(st);
  if (!extra.empty()) line += " " + extra;
  line += " msg=" + oneLine(msg ? msg : (c.comm ? chorus_last_error(c.comm) : ""));
  say(line);
}

[[noreturn]] inline void fatal(const std::string& what) {
  say("FATAL " + what);
  std::exit(3);
}

inline Ctx init() {
  Ctx c;
  chorus_status st = chorus_comm_init_from_env(&c.comm);
  if (st != CHORUS_OK) {
    fatal(std::string("chorus_comm_init_from_env: ") + chorus_status_string(st) + ": " +
          oneLine(chorus_last_error(nullptr)));
  }
  c.rank = chorus_comm_rank(c.comm);
  c.size = chorus_comm_size(c.comm);
  return c;
}

// ---- values ----

inline size_t sizeOf(chorus_dtype t) {
  switch (t) {
    case CHORUS_DTYPE_F16:
    case CHORUS_DTYPE_BF16:
      return 2;
    case CHORUS_DTYPE_I8:
    case CHORUS_DTYPE_U8:
      return 1;
    case CHORUS_DTYPE_F64:
    case CHORUS_DTYPE_I64:
      return 8;
    default:
      return 4;
  }
}

inline const char* dtypeName(chorus_dtype t) {
  switch (t) {
    case CHORUS_DTYPE_F32:
      return "f32";
    case CHORUS_DTYPE_I32:
      return "i32";
    case CHORUS_DTYPE_F16:
      return "f16";
    default:
      return "other";
  }
}

inline const char* opName(chorus_op op) {
  switch (op) {
    case CHORUS_OP_SUM:
      return "sum";
    case CHORUS_OP_MAX:
      return "max";
    case CHORUS_OP_AVG:
      return "avg";
    case CHORUS_OP_MIN:
      return "min";
    default:
      return "prod";
  }
}

// IEEE half of a small integer (|v| < 2048: exact).
inline uint16_t halfOf(int v) {
  if (v == 0) return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  unsigned a = static_cast<unsigned>(std::abs(v));
  int e = 0;
  while ((a >> (e + 1)) != 0) ++e;
  unsigned mantissa = (a << (10 - e)) & 0x3FF;
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | mantissa);
}

inline void store(chorus_dtype t, uint8_t* base, size_t i, int v) {
  switch (t) {
    case CHORUS_DTYPE_F32: {
      float f = static_cast<float>(v);
      std::memcpy(base + i * 4, &f, 4);
      return;
    }
    case CHORUS_DTYPE_I32: {
      int32_t x = v;
      std::memcpy(base + i * 4, &x, 4);
      return;
    }
    case CHORUS_DTYPE_F16: {
      uint16_t h = halfOf(v);
      std::memcpy(base + i * 2, &h, 2);
      return;
    }
    default:
      fatal("store: unsupported dtype");
  }
}

// Rank r's input element i: the offsets sum to zero over the ranks, so the sum is n * base(i) and
// the average base(i) exactly, whatever the order of the additions.
inline int baseOf(size_t i, int salt) { return static_cast<int>((i * 7 + salt * 5 + 3) % 13) - 6; }
inline int scaleOf(size_t i, int salt) { return static_cast<int>((i + salt) % 3); }
inline int input(int r, int n, size_t i, int salt) {
  return baseOf(i, salt) + (2 * r - (n - 1)) * scaleOf(i, salt);
}
inline int reduced(chorus_op op, int n, size_t i, int salt) {
  switch (op) {
    case CHORUS_OP_SUM:
      return n * baseOf(i, salt);
    case CHORUS_OP_MAX:
      return baseOf(i, salt) + (n - 1) * scaleOf(i, salt);
    case CHORUS_OP_AVG:
      return baseOf(i, salt);
    default:
      fatal("reduced: unsupported op");
  }
}

inline std::vector<uint8_t> filled(chorus_dtype t, size_t count, int r, int n, int salt) {
  std::vector<uint8_t> v(count * sizeOf(t));
  for (size_t i = 0; i < count; ++i) store(t, v.data(), i, input(r, n, i, salt));
  return v;
}

struct Hash {
  uint64_t h = 1469598103934665603ull;
  void add(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  void add(const std::vector<uint8_t>& v) { add(v.data(), v.size()); }
};

inline uint8_t* ptr(std::vector<uint8_t>& v) { return v.empty() ? nullptr : v.data(); }

}  // namespace mpworker
