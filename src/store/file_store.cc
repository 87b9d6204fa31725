// Store on a (possibly shared) filesystem: one file per key under a directory.
//
// Key names are hex-encoded into file names ("k" + hex), so any byte is allowed; keys whose hex
// form would exceed a file-name component are split over nested "d" + hex directories. Values are
// written to a temporary file and renamed into place, so a reader sees all of a value or nothing.
// add() serialises read-modify-write with flock() on "<dir>/.lock", which works across threads and
// processes. Waits poll for the file with a sleep that grows from 10 ms to 100 ms.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <random>
#include <system_error>
#include <thread>

#include <chorus/store.hpp>

#include "common/fd.h"
#include "store/store_util.h"

namespace chorus {
namespace {

constexpr size_t kHexPerComponent = 240;  // + 1 prefix char stays under NAME_MAX (255)

std::string hexEncode(const std::string& key) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(key.size() * 2);
  for (unsigned char c : key) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {
    if (dir_.empty()) throw Error(ErrorCode::kInvalidArgument, "file store: empty directory");
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      throw Error(ErrorCode::kSystem,
                  "file store: cannot create directory '" + dir_ + "': " + ec.message());
    }
    if (!std::filesystem::is_directory(dir_, ec)) {
      throw Error(ErrorCode::kSystem, "file store: '" + dir_ + "' is not a directory");
    }
    std::random_device rd;
    tag_ = std::to_string(rd()) + std::to_string(rd());
  }

  void set(const std::string& key, const Bytes& value) override {
    writeAtomic(pathFor(key, /*create_dirs=*/true), value);
  }

  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    Deadline deadline = Deadline::after(timeout);
    const std::string path = pathFor(key, false);
    Poller poller;
    while (true) {
      if (auto v = readFile(path)) return std::move(*v);
      if (!poller.sleep(deadline)) {
        store::throwWaitTimeout(where(), "key " + store::quoteKey(key), timeout);
      }
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    const std::string lock_path = dir_ + "/.lock";
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (lock.get() < 0) store::throwSystem("file store: cannot open '" + lock_path + "'", errno);
    while (::flock(lock.get(), LOCK_EX) != 0) {
      if (errno != EINTR) store::throwSystem("file store: flock '" + lock_path + "'", errno);
    }
    // The lock is released when the descriptor closes, on every path out of here.
    const std::string path = pathFor(key, true);
    auto current = readFile(path);
    int64_t result =
        store::addCounter(key, current ? store::parseCounter(key, *current) : 0, delta);
    writeAtomic(path, store::formatCounter(result));
    return result;
  }

  bool check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (!exists(pathFor(k, false))) return false;
    }
    return true;
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    Deadline deadline = Deadline::after(timeout);
    Poller poller;
    for (const auto& k : keys) {
      const std::string path = pathFor(k, false);
      while (!exists(path)) {
        if (!poller.sleep(deadline)) {
          store::throwWaitTimeout(where(), "key " + store::quoteKey(k), timeout);
        }
      }
    }
  }

 private:
  // Sleeps 10 ms, then longer up to 100 ms, never past the deadline; false once it has passed.
  class Poller {
   public:
    bool sleep(const Deadline& deadline) {
      if (deadline.expired()) return false;
      auto left = deadline.at() - Clock::now();
      std::this_thread::sleep_for(std::min<Clock::duration>(delay_, left));
      delay_ = std::min(delay_ * 3 / 2, std::chrono::milliseconds(100));
      return true;
    }

   private:
    std::chrono::milliseconds delay_{10};
  };

  std::string where() const { return "file store '" + dir_ + "'"; }

  std::string pathFor(const std::string& key, bool create_dirs) const {
    const std::string hex = hexEncode(key);
    std::string path = dir_;
    size_t pos = 0;
    while (hex.size() - pos > kHexPerComponent) {
      path += "/d" + hex.substr(pos, kHexPerComponent);
      pos += kHexPerComponent;
      if (create_dirs && ::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        store::throwSystem("file store: cannot create '" + path + "'", errno);
      }
    }
    return path + "/k" + hex.substr(pos);
  }

  static bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }

  static std::optional<Bytes> readFile(const std::string& path) {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      store::throwSystem("file store: cannot open '" + path + "'", errno);
    }
    Bytes out;
    uint8_t buf[65536];
    while (true) {
      ssize_t n = ::read(fd.get(), buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        store::throwSystem("file store: cannot read '" + path + "'", errno);
      }
      if (n == 0) break;
      out.insert(out.end(), buf, buf + n);
    }
    return out;
  }

  void writeAtomic(const std::string& path, const Bytes& value) {
    const std::string tmp = dir_ + "/.tmp." + std::to_string(::getpid()) + "." + tag_ + "." +
                            std::to_string(counter_++);
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) store::throwSystem("file store: cannot create '" + tmp + "'", errno);
    size_t done = 0;
    while (done < value.size()) {
      ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::unlink(tmp.c_str());
        store::throwSystem("file store: cannot write '" + tmp + "'", err);
      }
      done += static_cast<size_t>(n);
    }
    if (::close(fd.release()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      store::throwSystem("file store: cannot write '" + tmp + "'", err);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      store::throwSystem("file store: cannot rename '" + tmp + "' to '" + path + "'", err);
    }
  }

  std::string dir_;
  std::string tag_;  // random bits: with the pid, temp names are unique across processes and hosts
  std::atomic<uint64_t> counter_{0};
};

}  // namespace

std::shared_ptr<Store> makeFileStore(const std::string& dir) {
  return std::make_shared<FileStore>(dir);
}

}  // namespace chorus
