#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

namespace chorus::train {
namespace {

// File layout (little-endian, as written by this machine):
//   magic "chorus-train checkpoint 1\n"
//   u64 entry count; per entry: u32 name length, name, u8 type, u64 count, data
//   u64 FNV-1a over every byte before it
constexpr char kMagic[] = "chorus-train checkpoint 1\n";
constexpr size_t kMagicSize = sizeof kMagic - 1;

uint64_t fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

size_t elementSize(CheckpointEntry::Type t) { return t == CheckpointEntry::Type::kF32 ? 4 : 8; }

const char* typeName(CheckpointEntry::Type t) {
  return t == CheckpointEntry::Type::kF32 ? "f32" : "i64";
}

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

std::runtime_error failure(const std::string& path, const std::string& what) {
  return std::runtime_error("checkpoint " + path + ": " + what);
}

std::string errnoText() { return std::strerror(errno); }

void writeAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw failure(path, "write failed: " + errnoText());
    done += static_cast<size_t>(n);
  }
}

void fsyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw failure(path, "cannot open for fsync: " + errnoText());
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw failure(path, "fsync failed: " + errnoText());
}

// Checkpoints in dir, oldest first.
std::vector<std::pair<int64_t, std::string>> listCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return found;
  static const std::regex name("checkpoint-([0-9]{1,18})\\.bin");
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(file, m, name)) {
      found.emplace_back(std::stoll(m[1].str()), e.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string readAll(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw failure(path, "cannot open: " + errnoText());
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = errnoText();
      ::close(fd);
      throw failure(path, "read failed: " + why);
    }
    if (n == 0) break;
    bytes.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace

std::string writeCheckpoint(const std::string& dir, int64_t step,
                            const std::vector<CheckpointEntry>& entries, int keep) {
  std::string bytes(kMagic, kMagicSize);
  put(bytes, static_cast<uint64_t>(entries.size()));
  for (const auto& e : entries) {
    put(bytes, static_cast<uint32_t>(e.name.size()));
    bytes += e.name;
    put(bytes, static_cast<uint8_t>(e.type));
    put(bytes, static_cast<uint64_t>(e.count));
    bytes.append(static_cast<const char*>(e.data), e.count * elementSize(e.type));
  }
  put(bytes, fnv1a(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/checkpoint-" + std::to_string(step) + ".bin";
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw failure(tmp, "cannot create: " + errnoText());
  try {
    writeAll(fd, bytes, tmp);
    if (::fsync(fd) != 0) throw failure(tmp, "fsync failed: " + errnoText());
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  // The rename makes the complete file visible at once; the directory's fsync makes it durable.
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    throw failure(path, "rename failed: " + errnoText());
  fsyncPath(dir, O_RDONLY | O_DIRECTORY);
  auto all = listCheckpoints(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) {
    std::filesystem::remove(all[i].second, ec);
  }
  return path;
}

std::string newestCheckpoint(const std::string& dir) {
  auto all = listCheckpoints(dir);
  return all.empty() ? "" : all.back().second;
}

void readCheckpoint(const std::string& path, const std::vector<CheckpointEntry>& entries) {
  const std::string bytes = readAll(path);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicSize + 16 || bytes.compare(0, kMagicSize, kMagic) != 0) {
    throw failure(path, "not a chorus-train checkpoint (or truncated: " +
                            std::to_string(bytes.size()) + " bytes)");
  }
  uint64_t stored;
  std::memcpy(&stored, p + bytes.size() - 8, 8);
  if (fnv1a(p, bytes.size() - 8) != stored) {
    throw failure(path, "checksum mismatch: the file is truncated or corrupted; not used");
  }
  size_t at = kMagicSize;
  auto take = [&](void* out, size_t n) {
    if (at + n > bytes.size() - 8) throw failure(path, "entry runs past the end of the file");
    std::memcpy(out, p + at, n);
    at += n;
  };
  uint64_t count;
  take(&count, 8);
  if (count != entries.size()) {
    throw failure(path, "holds " + std::to_string(count) + " entries, this run has " +
                            std::to_string(entries.size()) + " (another model or optimizer?)");
  }
  // First check every entry, then copy: a mismatch leaves the run's buffers untouched.
  std::vector<size_t> offsets;
  for (const auto& e : entries) {
    uint32_t nameSize;
    take(&nameSize, 4);
    if (nameSize > bytes.size()) throw failure(path, "malformed entry name");
    std::string name(nameSize, '\0');
    take(name.data(), nameSize);
    uint8_t type;
    uint64_t n;
    take(&type, 1);
    take(&n, 8);
    if (name != e.name || type != static_cast<uint8_t>(e.type) || n != e.count) {
      throw failure(path, "entry '" + name + "' (" + std::to_string(n) +
                              " elements) where this run has '" + e.name + "' (" +
                              std::to_string(e.count) + " " + typeName(e.type) +
                              "): written by another model or optimizer");
    }
    offsets.push_back(at);
    const size_t size = n * elementSize(e.type);
    if (at + size > bytes.size() - 8) throw failure(path, "entry '" + name + "' runs past the end");
    at += size;
  }
  if (at != bytes.size() - 8) throw failure(path, "unexpected bytes after the last entry");
  for (size_t i = 0; i < entries.size(); ++i) {
    std::memcpy(entries[i].data, p + offsets[i], entries[i].count * elementSize(entries[i].type));
  }
}

}  // namespace chorus::train
