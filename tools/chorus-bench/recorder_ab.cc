// recorder-ab: what the flight recorder costs per small call, measured inside one process. Two
// communicators are split from the same parent, one with the recorder on and one with it off
// (Options::trace.entries = 0), and timed in alternating blocks of blocking all-reduces. Both see
// the same placement of the ranks on the cores and the same load, which separate runs do not:
// on the test machines an 8-byte shared-memory all-reduce takes 0.8 or 1.1 us depending on the
// run, more than the difference measured here.
//
//   chorus-run -n 2 -- recorder-ab [--bytes 8] [--block 1000] [--blocks 200] [--json FILE]
//
// Per block: the mean time per call of the slowest rank. Rank 0 prints the median block of
// each communicator, their ratio, and the median of the ratios of neighbouring blocks (on/off).
#include <CLI/CLI.hpp>
#include <chorus/chorus.hpp>
#include "common/json.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace {

using chorus::Communicator;

// A communicator of the same ranks as `parent`, with a recorder of `entries` calls (0: off).
std::unique_ptr<Communicator> splitWithEntries(Communicator& parent, size_t entries) {
  chorus::Options options = parent.options();
  options.trace.entries = entries;
  return parent.split(0, parent.rank(), options);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = 8;
  int block = 1000, blocks = 200;
  std::string json;
  bool bothOff = false;
  CLI::App app{"recorder-ab: the flight recorder's cost per call, on and off in one process"};
  app.add_option("--bytes", bytes, "all-reduce size (f32 sum)")->check(CLI::Range(4, 1 << 20));
  app.add_option("--block", block, "calls per block")->check(CLI::Range(1, 1000000));
  app.add_option("--blocks", blocks, "blocks per communicator")->check(CLI::Range(2, 100000));
  app.add_option("--json", json, "also write the figures as JSON to this file");
  app.add_flag("--both-off", bothOff,
               "the recorder off in both communicators: the ratio then shows the method's own bias "
               "(the two communicators' rings and placement), which a real on/off ratio includes");
  CLI11_PARSE(app, argc, argv);

  try {
    auto parent = Communicator::fromEnv();
    const int rank = parent->rank();
    // The recorder's size when on: the environment's (CHORUS_TRACE_ENTRIES), unless that is off.
    const size_t given = parent->options().trace.entries;
    const size_t onEntries = given != 0 ? given : chorus::TraceOptions{}.entries;
    std::unique_ptr<Communicator> comms[2] = {splitWithEntries(*parent, bothOff ? 0 : onEntries),
                                              splitWithEntries(*parent, 0)};
    const size_t count = bytes / sizeof(float);
    std::vector<float> in(count, 1.0f), out(count);
    auto run = [&](Communicator& c, int calls) {
      for (int i = 0; i < calls; ++i) {
        c.allReduce(std::span<const float>(in), std::span<float>(out)).wait();
      }
    };
    for (auto& c : comms) run(*c, 2 * block);  // warm-up

    // times[k][b]: communicator k (0 on, 1 off), block b; the order alternates per block pair.
    std::vector<double> times(2 * static_cast<size_t>(blocks));
    for (int b = 0; b < blocks; ++b) {
      for (int j = 0; j < 2; ++j) {
        const int k = (b + j) % 2;
        comms[k]->barrier().wait();
        const auto t0 = std::chrono::steady_clock::now();
        run(*comms[k], block);
        const std::chrono::duration<double, std::micro> dt = std::chrono::steady_clock::now() - t0;
        times[static_cast<size_t>(k) * blocks + b] = dt.count() / block;
      }
    }
    parent->allReduce(std::span<double>(times), chorus::ReduceOp::kMax).wait();  // the slowest rank
    if (rank == 0) {
      const std::vector<double> on(times.begin(), times.begin() + blocks);
      const std::vector<double> off(times.begin() + blocks, times.end());
      std::vector<double> pairs(on.size());
      for (size_t b = 0; b < on.size(); ++b) pairs[b] = on[b] / off[b];
      const double mOn = median(on), mOff = median(off), mPair = median(pairs);
      std::printf(
          "%zu B, %d blocks of %d calls: on %.4f us, off %.4f us, on/off %.4f, "
          "median of block pairs %.4f\n",
          bytes, blocks, block, mOn, mOff, mOn / mOff, mPair);
      if (!json.empty()) {
        std::string text = "{";
        chorus::json::number(text, "bytes", bytes);
        text += ", ";
        chorus::json::number(text, "block", block);
        text += ", ";
        chorus::json::number(text, "blocks", blocks);
        text += ", ";
        chorus::json::number(text, "on_us", mOn);
        text += ", ";
        chorus::json::number(text, "off_us", mOff);
        text += ", ";
        chorus::json::number(text, "ratio", mOn / mOff);
        text += ", ";
        chorus::json::number(text, "pair_ratio", mPair);
        text += "}\n";
        if (FILE* f = std::fopen(json.c_str(), "w")) {
          std::fputs(text.c_str(), f);
          std::fclose(f);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recorder-ab: %s\n", e.what());
    return 1;
  }
  return 0;
}
