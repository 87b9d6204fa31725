// mp_worker, mode "correct": every collective checked bit for bit.
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

// ---- correct ----

// The combinations run with the large count: each dtype and op once, both placements.
bool heavyAllReduce(chorus_dtype t, chorus_op op, int inPlace) {
  return (t == CHORUS_DTYPE_F32 && op == CHORUS_OP_SUM && !inPlace) ||
         (t == CHORUS_DTYPE_I32 && op == CHORUS_OP_MAX && inPlace) ||
         (t == CHORUS_DTYPE_F16 && op == CHORUS_OP_AVG && inPlace);
}

class Checker {
 public:
  explicit Checker(Ctx c) : c_(c) {}

  void status(const std::string& name, chorus_status st) {
    if (st != CHORUS_OK) {
      result(c_, name, st);
      std::exit(1);
    }
    ++ops_;
  }
  void same(const std::string& name, const std::vector<uint8_t>& got,
            const std::vector<uint8_t>& want, size_t offset = 0) {
    ++checks_;
    if (got.size() < offset + want.size() ||
        (!want.empty() && std::memcmp(got.data() + offset, want.data(), want.size()) != 0)) {
      size_t at = 0;
      while (at < want.size() && offset + at < got.size() && got[offset + at] == want[at]) ++at;
      say("WRONG rank=" + std::to_string(c_.rank) + " case=" + name +
          " first_bad_byte=" + std::to_string(at) + " of " + std::to_string(want.size()));
      ++wrong_;
    }
  }
  int ops() const { return ops_; }
  int checks() const { return checks_; }
  int wrong() const { return wrong_; }

 private:
  Ctx c_;
  int ops_ = 0, checks_ = 0, wrong_ = 0;
};

// One rank's run of mode "correct": every step checks through k, adds the results every rank
// gets alike to hash, and takes fresh salts so each case's inputs differ.
class Correct {
 public:
  explicit Correct(const Ctx& c)
      : c_(c), n_(c.size), me_(c.rank), N_(static_cast<size_t>(n_)), k_(c) {}

  int run() {
    const int64_t start = monoMs();
    const std::vector<size_t> counts = {0, 1, 7, N_ - 1, N_ + 1, 1000003};
    k_.status("barrier", chorus_barrier(c_.comm));
    for (size_t count : counts) {
      const std::string cn = "count=" + std::to_string(count);
      // The large count runs a sample of the combinations: all of them would take too long.
      const bool heavy = count > 100000;
      allReduce(count, cn, heavy);
      reduceScatter(count, cn, heavy);
      allGather(count, cn, heavy);
      broadcast(count, cn, heavy);
      k_.status("barrier/" + cn, chorus_barrier(c_.comm));
    }
    for (size_t count : {size_t{7}, size_t{300007}}) nonBlocking(count);
    return finish(start);
  }

 private:
  void allReduce(size_t count, const std::string& cn, bool heavy) {
    const chorus_dtype dtypes[] = {CHORUS_DTYPE_F32, CHORUS_DTYPE_I32, CHORUS_DTYPE_F16};
    const chorus_op ops[] = {CHORUS_OP_SUM, CHORUS_OP_MAX, CHORUS_OP_AVG};
    for (chorus_dtype t : dtypes) {
      const size_t es = sizeOf(t);
      for (chorus_op op : ops) {
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          if (heavy && !heavyAllReduce(t, op, inPlace)) continue;
          const std::string name = std::string("allreduce/") + dtypeName(t) + "/" + opName(op) +
                                   (inPlace ? "/inplace/" : "/outofplace/") + cn;
          ++salt_;
          auto in = filled(t, count, me_, n_, salt_);
          const auto original = in;
          std::vector<uint8_t> want(count * es);
          for (size_t i = 0; i < count; ++i) store(t, want.data(), i, reduced(op, n_, i, salt_));
          if (inPlace) {
            k_.status(name, chorus_all_reduce(c_.comm, ptr(in), ptr(in), count, t, op));
            k_.same(name, in, want);
            hash_.add(in);
          } else {
            std::vector<uint8_t> out(count * es, 0xAB);
            k_.status(name, chorus_all_reduce(c_.comm, ptr(in), ptr(out), count, t, op));
            k_.same(name, out, want);
            k_.same(name + "/input-kept", in, original);
            hash_.add(out);
          }
        }
      }
    }
  }

  // reduce_scatter: this rank receives block `me` of the reduction of count * n elements.
  void reduceScatter(size_t count, const std::string& cn, bool heavy) {
    const std::pair<chorus_dtype, chorus_op> rsCases[] = {{CHORUS_DTYPE_F32, CHORUS_OP_SUM},
                                                          {CHORUS_DTYPE_I32, CHORUS_OP_MAX},
                                                          {CHORUS_DTYPE_F16, CHORUS_OP_AVG}};
    for (auto [t, op] : rsCases) {
      const size_t es = sizeOf(t);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (heavy && (t != CHORUS_DTYPE_F16 || !inPlace)) continue;
        const std::string name = std::string("reduce_scatter/") + dtypeName(t) + "/" + opName(op) +
                                 (inPlace ? "/inplace/" : "/outofplace/") + cn;
        ++salt_;
        auto in = filled(t, count * N_, me_, n_, salt_);
        std::vector<uint8_t> want(count * es);
        for (size_t i = 0; i < count; ++i) {
          store(t, want.data(), i, reduced(op, n_, count * static_cast<size_t>(me_) + i, salt_));
        }
        if (inPlace) {
          uint8_t* recv = count ? in.data() + count * es * static_cast<size_t>(me_) : nullptr;
          k_.status(name, chorus_reduce_scatter(c_.comm, ptr(in), recv, count, t, op));
          k_.same(name, in, want, count * es * static_cast<size_t>(me_));
        } else {
          const auto original = in;
          std::vector<uint8_t> out(count * es, 0xAB);
          k_.status(name, chorus_reduce_scatter(c_.comm, ptr(in), ptr(out), count, t, op));
          k_.same(name, out, want);
          k_.same(name + "/input-kept", in, original);
        }
      }
    }
  }

  // all_gather: block r of the output comes from rank r.
  void allGather(size_t count, const std::string& cn, bool heavy) {
    for (chorus_dtype t : {CHORUS_DTYPE_F32, CHORUS_DTYPE_F16}) {
      const size_t es = sizeOf(t);
      for (int inPlace = 0; inPlace < 2; ++inPlace) {
        if (heavy && (t != CHORUS_DTYPE_F32 || !inPlace)) continue;
        const std::string name = std::string("all_gather/") + dtypeName(t) +
                                 (inPlace ? "/inplace/" : "/outofplace/") + cn;
        ++salt_;
        std::vector<uint8_t> want(count * N_ * es);
        for (int r = 0; r < n_; ++r) {
          for (size_t i = 0; i < count; ++i) {
            store(t, want.data(), count * static_cast<size_t>(r) + i, input(r, n_, i, salt_));
          }
        }
        std::vector<uint8_t> out(count * N_ * es, 0xAB);
        if (inPlace) {
          uint8_t* mine = count ? out.data() + count * es * static_cast<size_t>(me_) : nullptr;
          for (size_t i = 0; i < count; ++i) store(t, mine, i, input(me_, n_, i, salt_));
          k_.status(name, chorus_all_gather(c_.comm, mine, ptr(out), count, t));
        } else {
          auto in = filled(t, count, me_, n_, salt_);
          const auto original = in;
          k_.status(name, chorus_all_gather(c_.comm, ptr(in), ptr(out), count, t));
          k_.same(name + "/input-kept", in, original);
        }
        k_.same(name, out, want);
        hash_.add(out);
      }
    }
  }

  // broadcast from every root.
  void broadcast(size_t count, const std::string& cn, bool heavy) {
    for (int root = 0; root < n_; ++root) {
      if (heavy && root != 0 && root != n_ - 1) continue;
      chorus_dtype t = root % 2 ? CHORUS_DTYPE_I32 : CHORUS_DTYPE_F32;
      const std::string name =
          std::string("broadcast/") + dtypeName(t) + "/root=" + std::to_string(root) + "/" + cn;
      ++salt_;
      auto want = filled(t, count, root, n_, salt_);
      std::vector<uint8_t> buf = me_ == root ? want : std::vector<uint8_t>(want.size(), 0xAB);
      k_.status(name, chorus_broadcast(c_.comm, ptr(buf), count, t, root));
      k_.same(name, buf, want);
      hash_.add(buf);
    }
  }

  // Non-blocking: several requests in flight, completed in issue order.
  void nonBlocking(size_t count) {
    const std::string cn = "/count=" + std::to_string(count);
    int s0 = ++salt_, s1 = ++salt_, s2 = ++salt_, s3 = ++salt_, s4 = ++salt_;
    auto a = filled(CHORUS_DTYPE_F32, count, me_, n_, s0);
    std::vector<uint8_t> aOut(count * 4, 0xAB);
    auto b = filled(CHORUS_DTYPE_I32, count, me_, n_, s1);
    auto rs = filled(CHORUS_DTYPE_F32, count * N_, me_, n_, s2);
    std::vector<uint8_t> rsOut(count * 4, 0xAB);
    auto ag = filled(CHORUS_DTYPE_I32, count, me_, n_, s3);
    std::vector<uint8_t> agOut(count * N_ * 4, 0xAB);
    const int root = n_ - 1;
    auto bcWant = filled(CHORUS_DTYPE_F32, count, root, n_, s4);
    std::vector<uint8_t> bc = me_ == root ? bcWant : std::vector<uint8_t>(bcWant.size(), 0xAB);

    chorus_request* req[5] = {};
    k_.status("iallreduce" + cn, chorus_iall_reduce(c_.comm, ptr(a), ptr(aOut), count,
                                                    CHORUS_DTYPE_F32, CHORUS_OP_SUM, &req[0]));
    k_.status("iallreduce/inplace" + cn,
              chorus_iall_reduce(c_.comm, ptr(b), ptr(b), count, CHORUS_DTYPE_I32, CHORUS_OP_MAX,
                                 &req[1]));
    k_.status("ireduce_scatter" + cn,
              chorus_ireduce_scatter(c_.comm, ptr(rs), ptr(rsOut), count, CHORUS_DTYPE_F32,
                                     CHORUS_OP_SUM, &req[2]));
    k_.status("iall_gather" + cn,
              chorus_iall_gather(c_.comm, ptr(ag), ptr(agOut), count, CHORUS_DTYPE_I32, &req[3]));
    k_.status("ibroadcast" + cn,
              chorus_ibroadcast(c_.comm, ptr(bc), count, CHORUS_DTYPE_F32, root, &req[4]));
    completeInIssueOrder(req, cn);

    std::vector<uint8_t> want(count * 4);
    for (size_t i = 0; i < count; ++i) store(CHORUS_DTYPE_F32, want.data(), i, n_ * baseOf(i, s0));
    k_.same("iallreduce" + cn, aOut, want);
    for (size_t i = 0; i < count; ++i) {
      store(CHORUS_DTYPE_I32, want.data(), i, reduced(CHORUS_OP_MAX, n_, i, s1));
    }
    k_.same("iallreduce/inplace" + cn, b, want);
    for (size_t i = 0; i < count; ++i) {
      store(CHORUS_DTYPE_F32, want.data(), i,
            reduced(CHORUS_OP_SUM, n_, count * static_cast<size_t>(me_) + i, s2));
    }
    k_.same("ireduce_scatter" + cn, rsOut, want);
    std::vector<uint8_t> agWant(count * N_ * 4);
    for (int r = 0; r < n_; ++r) {
      for (size_t i = 0; i < count; ++i) {
        store(CHORUS_DTYPE_I32, agWant.data(), count * static_cast<size_t>(r) + i,
              input(r, n_, i, s3));
      }
    }
    k_.same("iall_gather" + cn, agOut, agWant);
    k_.same("ibroadcast" + cn, bc, bcWant);
    hash_.add(aOut);
    hash_.add(b);
    hash_.add(agOut);
    hash_.add(bc);
  }

  // Polls the last request until done (20 s at most), then the earlier ones must be done too;
  // waits for all five.
  void completeInIssueOrder(chorus_request* (&req)[5], const std::string& cn) {
    int done = 0;
    int64_t deadline = monoMs() + 20000;
    while (!done) {
      chorus_status polled = chorus_request_test(req[4], &done);
      if (polled != CHORUS_OK) k_.status("test" + cn, polled);
      if (!done && monoMs() > deadline) fatal("chorus_request_test never reported completion" + cn);
      if (!done) usleep(1000);
    }
    for (int i = 0; i < 4; ++i) {  // issue order: the earlier ones are complete too
      int earlier = 0;
      k_.status("test" + cn, chorus_request_test(req[i], &earlier));
      if (!earlier) {
        say("WRONG rank=" + std::to_string(me_) + " case=test-order" + cn +
            " request=" + std::to_string(i));
        fatal("requests completed out of issue order");
      }
    }
    for (int i = 0; i < 5; ++i) k_.status("wait" + cn, chorus_request_wait(req[i]));
  }

  // Every rank must hold bit-identical results: compare the hashes; report and destroy.
  int finish(int64_t start) {
    std::vector<uint64_t> hashes(N_);
    k_.status("all_gather/hash",
              chorus_all_gather(c_.comm, &hash_.h, hashes.data(), 8, CHORUS_DTYPE_U8));
    bool identical = true;
    for (uint64_t h : hashes) identical = identical && h == hash_.h;
    k_.status("barrier/end", chorus_barrier(c_.comm));

    char hex[32];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash_.h));
    result(c_, "correct", CHORUS_OK,
           "ops=" + std::to_string(k_.ops()) + " checks=" + std::to_string(k_.checks()) +
               " wrong=" + std::to_string(k_.wrong()) + " identical=" + (identical ? "1" : "0") +
               " hash=" + hex + " elapsed_ms=" + std::to_string(monoMs() - start));
    chorus_comm_destroy(c_.comm);
    return k_.wrong() == 0 && identical ? 0 : 2;
  }

  const Ctx& c_;
  const int n_, me_;
  const size_t N_;
  Checker k_;
  Hash hash_;  // of the results every rank gets alike
  int salt_ = 0;
};

int runCorrect(const Ctx& c) { return Correct(c).run(); }

}  // namespace mpworker
