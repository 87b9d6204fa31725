// Thread-ranks for the membership tests: communicators created on one in-process store that the
// test keeps (join() needs it), and a check of every collective against values computed here.
#pragma once

#include <chorus/chorus.hpp>

#include <dirent.h>
#include <unistd.h>

#include <cstdio>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chorus::testing {

inline Options membershipOptions(std::chrono::milliseconds timeout) {
  Options o;
  o.timeout = timeout;
  return o;
}

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// Runs body(rank, comm) for `size` ranks created on `store`, plus one thread per extra body
// (newcomers, given their index); returns every thrown message, tagged.
inline std::vector<std::string> runElastic(
    std::shared_ptr<Store> store, int size, const Options& options,
    const std::function<void(int, std::unique_ptr<Communicator>)>& body,
    const std::vector<std::function<void()>>& extra = {}) {
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  auto record = [&](const std::string& who, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    errors.push_back(who + ": " + what);
  };
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, Communicator::create(store, r, size, options));
      } catch (const std::exception& e) {
        record("rank " + std::to_string(r), e.what());
      }
    });
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        extra[i]();
      } catch (const std::exception& e) {
        record("extra " + std::to_string(i), e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// Value that rank `id` (a name that survives renumbering) contributes at element i.
inline int64_t contribution(int id, size_t i) {
  return static_cast<int64_t>(id) * 1000 + static_cast<int64_t>(i % 97) - 40;
}

// Every collective on `comm`, checked against sums and copies computed here. ids[r]: the name of
// rank r (e.g. its rank in the first communicator).
inline void checkCollectives(Communicator& comm, const std::vector<int>& ids) {
  const int n = comm.size();
  const int me = comm.rank();
  const std::string who = "rank " + std::to_string(me) + " of " + std::to_string(n) + ": ";
  require(static_cast<int>(ids.size()) == n, who + "ids do not match the size");
  const size_t count = 257;
  std::vector<int64_t> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = contribution(ids[static_cast<size_t>(me)], i);
  auto sumAt = [&](size_t i) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += contribution(ids[static_cast<size_t>(r)], i);
    return s;
  };
  std::vector<int64_t> buf = mine;
  comm.allReduce(std::span<int64_t>(buf)).wait();
  for (size_t i = 0; i < count; ++i) require(buf[i] == sumAt(i), who + "all_reduce wrong");
  buf = mine;
  comm.allReduce(std::span<int64_t>(buf), ReduceOp::kMax).wait();
  int maxId = ids[0];
  for (int id : ids) maxId = std::max(maxId, id);
  for (size_t i = 0; i < count; ++i) {
    require(buf[i] == contribution(maxId, i), who + "all_reduce max wrong");
  }
  std::vector<int64_t> gathered(count * static_cast<size_t>(n));
  comm.allGather(std::span<const int64_t>(mine), std::span<int64_t>(gathered)).wait();
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      require(gathered[static_cast<size_t>(r) * count + i] ==
                  contribution(ids[static_cast<size_t>(r)], i),
              who + "all_gather wrong");
    }
  }
  std::vector<int64_t> scatterIn(count * static_cast<size_t>(n));
  for (size_t i = 0; i < scatterIn.size(); ++i) {
    scatterIn[i] = contribution(ids[static_cast<size_t>(me)], i);
  }
  std::vector<int64_t> block(count);
  comm.reduceScatter(std::span<const int64_t>(scatterIn), std::span<int64_t>(block)).wait();
  for (size_t i = 0; i < count; ++i) {
    require(block[i] == sumAt(static_cast<size_t>(me) * count + i), who + "reduce_scatter wrong");
  }
  const int root = n - 1;
  buf = mine;
  comm.broadcast(std::span<int64_t>(buf), root).wait();
  for (size_t i = 0; i < count; ++i) {
    require(buf[i] == contribution(ids[static_cast<size_t>(root)], i), who + "broadcast wrong");
  }
  std::vector<int64_t> exchanged(scatterIn.size());
  comm.allToAll(std::span<const int64_t>(scatterIn), std::span<int64_t>(exchanged)).wait();
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      require(exchanged[static_cast<size_t>(r) * count + i] ==
                  contribution(ids[static_cast<size_t>(r)], static_cast<size_t>(me) * count + i),
              who + "all_to_all wrong");
    }
  }
  comm.barrier().wait();
}

inline int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

inline std::vector<std::string> devShmEntries() {
  std::vector<std::string> out;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.find("chorus") != std::string::npos) out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

}  // namespace chorus::testing
