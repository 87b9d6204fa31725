// gloo_bench: Gloo All-Reduce (f32 sum) measured with chorus-bench's definitions (common.h).
//
//   chorus-run -n 4 -- gloo_bench --algo ring_chunked --min-bytes 8 --max-bytes 64M --json f.json
//
//   scripts/cluster run-each 4 -- env GLOO_BENCH_STORE_DIR=/tmp/d .../gloo_bench --algo ring ...
//
// Ranks: --rank/--size, else CHORUS_RANK/CHORUS_WORLD_SIZE (chorus-run), else
// CLUSTER_RANK/CLUSTER_SIZE (scripts/cluster run-each), else OMPI_COMM_WORLD_RANK/SIZE.
// Rendezvous: a Gloo FileStore in --store-dir, else $GLOO_BENCH_STORE_DIR, else a directory under
// /tmp named after chorus-run's pid and CHORUS_STORE (removed at the end); the directory must be
// shared by all ranks (one filesystem). Transport: Gloo TCP, bound to the first of
//   --iface IF | --hostname ADDR      (command line)
//   $GLOO_BENCH_IFACE | $GLOO_BENCH_HOSTNAME
//   $CLUSTER_IFNAME                   (scripts/cluster run-each: the host's own veth)
//   127.0.0.1                         (default: loopback)
//
// --algo ring_chunked       gloo::AllreduceRingChunked<float> (legacy API), in place
//        halving_doubling   gloo::AllreduceHalvingDoubling<float> (legacy API), in place
//        ring               gloo::allreduce() with AllreduceOptions::RING (the API PyTorch's
//                           ProcessGroupGloo uses), out of place, options built per call
// Legacy algorithm objects are built once per size, outside the timed loop (their constructor
// allocates and registers buffers), and run() is timed: that is how they are meant to be used.
#include "common.h"

#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>

namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  compare::Config cfg;
  std::string algo = "ring_chunked", storeDir, iface, hostname;
  int rank = -1, size = -1;
  try {
    compare::parseArgs(argc, argv, cfg, [&](int i, char** av) -> int {
      std::string a = av[i];
      if (i + 1 >= argc) return 0;
      if (a == "--algo") return algo = av[i + 1], 2;
      if (a == "--store-dir") return storeDir = av[i + 1], 2;
      if (a == "--rank") return rank = std::atoi(av[i + 1]), 2;
      if (a == "--size") return size = std::atoi(av[i + 1]), 2;
      if (a == "--iface") return iface = av[i + 1], 2;
      if (a == "--hostname") return hostname = av[i + 1], 2;
      return 0;
    });
    if (rank < 0) {
      rank = envInt("CHORUS_RANK", envInt("CLUSTER_RANK", envInt("OMPI_COMM_WORLD_RANK", -1)));
    }
    if (size < 0) {
      size =
          envInt("CHORUS_WORLD_SIZE", envInt("CLUSTER_SIZE", envInt("OMPI_COMM_WORLD_SIZE", -1)));
    }
    if (rank < 0 || size < 1 || rank >= size) {
      throw std::invalid_argument(
          "no rank/size: pass --rank/--size or run under chorus-run or scripts/cluster run-each");
    }
    if (algo != "ring_chunked" && algo != "halving_doubling" && algo != "ring") {
      throw std::invalid_argument("--algo must be ring_chunked | halving_doubling | ring");
    }

    bool ownDir = false;
    if (storeDir.empty() && std::getenv("GLOO_BENCH_STORE_DIR")) {
      storeDir = std::getenv("GLOO_BENCH_STORE_DIR");
    }
    if (storeDir.empty()) {
      const char* cs = std::getenv("CHORUS_STORE");
      if (!cs) throw std::invalid_argument("no --store-dir, GLOO_BENCH_STORE_DIR or CHORUS_STORE");
      // All ranks of one chorus-run share its pid and store URL.
      storeDir = "/tmp/gloo-bench-" + std::to_string(getppid()) + "-" + sanitize(cs);
      ownDir = true;
    }
    std::filesystem::create_directories(storeDir);

    gloo::transport::tcp::attr attr;
    if (iface.empty() && hostname.empty()) {
      if (const char* v = std::getenv("GLOO_BENCH_IFACE"); v && *v) {
        iface = v;
      } else if (const char* h = std::getenv("GLOO_BENCH_HOSTNAME"); h && *h) {
        hostname = h;
      } else if (const char* c = std::getenv("CLUSTER_IFNAME"); c && *c) {
        iface = c;
      } else {
        hostname = "127.0.0.1";
      }
    }
    if (!iface.empty()) {
      attr.iface = iface;
    } else {
      attr.hostname = hostname;
    }
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore fileStore(storeDir);
    gloo::rendezvous::PrefixStore store("gloo-bench", fileStore);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::seconds(600));
    ctx->connectFullMesh(store, dev);

    cfg.system = algo == "ring_chunked"       ? "gloo-ring-chunked"
                 : algo == "halving_doubling" ? "gloo-halving-doubling"
                                              : "gloo-ring";
    cfg.algo = algo;
    cfg.notes = std::string(algo == "ring"
                                ? "out of place, gloo::allreduce(opts), opts per call"
                                : "in place (legacy Gloo algorithms have no out-of-place form)") +
                "; transport tcp " + dev->str() + (iface.empty() ? "" : " (iface " + iface + ")");

    compare::Backend be;
    be.rank = rank;
    be.size = size;
    std::unique_ptr<gloo::Algorithm> alg;
    uint32_t tag = 0;
    if (algo == "ring") {
      be.allReduce = [&](float* in, float* out, size_t count) {
        gloo::AllreduceOptions opts(ctx);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setInput(in, count);
        opts.setOutput(out, count);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setTag(tag++);
        gloo::allreduce(opts);
      };
    } else {
      be.inPlace = true;
      be.prepare = [&](float*, float* buf, size_t count) {
        std::vector<float*> ptrs{buf};
        if (algo == "ring_chunked") {
          alg = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs,
                                                                    static_cast<int>(count));
        } else {
          alg = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs,
                                                                        static_cast<int>(count));
        }
      };
      be.allReduce = [&](float*, float*, size_t) { alg->run(); };
      be.release = [&] { alg.reset(); };
    }
    be.maxOverRanks = [&](std::vector<double>& v) {
      std::vector<double*> ptrs{v.data()};
      gloo::AllreduceRing<double>(ctx, ptrs, static_cast<int>(v.size()),
                                  gloo::ReductionFunction<double>::max)
          .run();
    };
    be.sumOverRanks = [&](int64_t x) {
      std::vector<int64_t*> ptrs{&x};
      gloo::AllreduceRing<int64_t>(ctx, ptrs, 1, gloo::ReductionFunction<int64_t>::sum).run();
      return x;
    };

    const long wrong = compare::runAndReport(be, cfg, rank, size);
    // Leave together, through the store rather than a collective: a rank that returns from the
    // last collective and closes its sockets while a peer is still finishing that collective
    // makes the peer fail with "Connection closed by peer".
    try {
      std::vector<std::string> done, left;
      for (int q = 0; q < size; ++q) {
        done.push_back("done/" + std::to_string(q));
        left.push_back("left/" + std::to_string(q));
      }
      store.set(done[static_cast<size_t>(rank)], {'1'});
      store.wait(done, std::chrono::seconds(600));
      store.set(left[static_cast<size_t>(rank)], {'1'});
      if (ownDir && rank == 0) {
        store.wait(left, std::chrono::seconds(600));
        std::error_code ec;
        std::filesystem::remove_all(storeDir, ec);
      }
    } catch (const std::exception& e) {
      // The results are complete (and written by rank 0): report, but do not fail the run.
      std::fprintf(stderr, "gloo_bench: rank %d: teardown: %s\n", rank, e.what());
    }
    return wrong == 0 ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_bench: %s\n", e.what());
    return 1;
  }
}
