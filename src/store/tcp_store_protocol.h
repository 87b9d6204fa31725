// Wire protocol of the TCP store (tcp_store_client.cc <-> tcp_store_server.cc).
//
// Every message is a frame: a 12-byte header, then body_len bytes of body. All integers are
// fixed-width little-endian.
//   header:   u32 magic = 0x54534843 ("CHST")  u16 version = 1  u8 code  u8 flags = 0  u32 body_len
//   request:  code = op;  response: code = status (0 ok, else a chorus::ErrorCode value)
//   body_len <= 64 MiB. Inside bodies, a string/bytes field is u32 length + raw bytes.
// Requests and the bodies of their OK responses (one response per request, in order):
//   SET   (1)  key, value                      -> (empty)
//   GET   (2)  i64 timeout_ms, key             -> value    once the key exists
//   ADD   (3)  key, i64 delta                  -> i64 new value (stored as decimal ASCII)
//   CHECK (4)  u32 n, n x key                  -> u8 (1 when every key exists)
//   WAIT  (5)  i64 timeout_ms, u32 n, n x key  -> (empty)  once every key exists
//   MGET  (6)  i64 timeout_ms, u32 n, n x key  -> u32 n, n x value  once every key exists
// (A server older than MGET closes the connection on it; the client then falls back to GETs.)
// An error response carries one string field, the message. A GET/WAIT/MGET whose keys are missing
// is parked until they are set, or answered with status kTimeout (message: the first missing key)
// once timeout_ms passes. The client also enforces a deadline of its own (timeout_ms plus its I/O
// timeout) and closes the connection when it passes, which cancels a parked request. A frame with a
// bad magic, version, op or length, or a body that does not parse exactly, makes the server close
// that connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::store::proto {

constexpr uint32_t kMagic = 0x54534843;  // "CHST" as little-endian bytes
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderSize = 12;
constexpr uint32_t kMaxBody = 64u << 20;

enum class Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCheck = 4, kWait = 5, kMultiGet = 6 };

inline bool validOp(uint8_t op) { return op >= 1 && op <= 6; }

struct Header {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t code = 0;
  uint8_t flags = 0;
  uint32_t body_len = 0;
};

// Appends fields to a frame; finish() fills in the header.
class Writer {
 public:
  explicit Writer(uint8_t code) {
    buf_.reserve(64);
    put(kMagic, 4);
    put(kVersion, 2);
    buf_.push_back(code);
    buf_.push_back(0);  // flags
    put(0, 4);          // body_len, set by finish()
  }
  Writer& u8(uint8_t v) {
    buf_.push_back(v);
    return *this;
  }
  Writer& u32(uint32_t v) {
    put(v, 4);
    return *this;
  }
  Writer& i64(int64_t v) {
    put(static_cast<uint64_t>(v), 8);
    return *this;
  }
  Writer& bytes(const void* data, size_t n) {
    put(n, 4);
    const auto* p = static_cast<const uint8_t*>(data);
    buf_.insert(buf_.end(), p, p + n);
    return *this;
  }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  Writer& bytes(const std::vector<uint8_t>& v) { return bytes(v.data(), v.size()); }
  size_t bodySize() const { return buf_.size() - kHeaderSize; }
  // Returns the frame; the writer is left empty.
  std::vector<uint8_t> finish() {
    uint64_t n = bodySize();
    for (int i = 0; i < 4; ++i) buf_[8 + i] = static_cast<uint8_t>(n >> (8 * i));
    return std::move(buf_);
  }

 private:
  void put(uint64_t v, int width) {
    for (int i = 0; i < width; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> buf_;
};

inline uint64_t loadLE(const uint8_t* p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

inline Header parseHeader(const uint8_t* p) {
  Header h;
  h.magic = static_cast<uint32_t>(loadLE(p, 4));
  h.version = static_cast<uint16_t>(loadLE(p + 4, 2));
  h.code = p[6];
  h.flags = p[7];
  h.body_len = static_cast<uint32_t>(loadLE(p + 8, 4));
  return h;
}

// True when the header could start a valid frame (magic, version, flags, length).
inline bool plausible(const Header& h) {
  return h.magic == kMagic && h.version == kVersion && h.flags == 0 && h.body_len <= kMaxBody;
}

// Reads fields from a body; any read past the end sets failed() and yields zero/empty values.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t u8() { return static_cast<uint8_t>(take(1)); }
  uint32_t u32() { return static_cast<uint32_t>(take(4)); }
  int64_t i64() { return static_cast<int64_t>(take(8)); }
  std::string str() {
    size_t n = u32();
    if (failed_ || static_cast<size_t>(end_ - p_) < n) return fail<std::string>();
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  std::vector<uint8_t> bytes() {
    size_t n = u32();
    if (failed_ || static_cast<size_t>(end_ - p_) < n) return fail<std::vector<uint8_t>>();
    std::vector<uint8_t> v(p_, p_ + n);
    p_ += n;
    return v;
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  bool failed() const { return failed_; }
  // True when every field parsed and nothing is left over.
  bool done() const { return !failed_ && p_ == end_; }

 private:
  uint64_t take(int width) {
    if (failed_ || end_ - p_ < width) return fail<uint64_t>();
    uint64_t v = loadLE(p_, width);
    p_ += width;
    return v;
  }
  template <typename T>
  T fail() {
    failed_ = true;
    p_ = end_;
    return T{};
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool failed_ = false;
};

}  // namespace chorus::store::proto
