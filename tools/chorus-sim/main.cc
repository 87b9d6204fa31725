// chorus-sim: predicts All-Reduce times on a described network by running the real algorithm
// code, for every rank, over a virtual network in this one process (src/sim, dry mode: no payload
// is touched, so any world size and buffer size costs only the algorithms' bookkeeping).
//   chorus-sim --hosts 128 --ranks-per-host 8 --max-bytes 256M --csv out.csv --png out.png
// Beside it: sweep.cc runs the sizes and algorithms, heap_budget.cc holds every run within
// --max-memory-gib, plot.cc draws --png.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "common/tool_version.h"
#include "sweep.h"

int main(int argc, char** argv) {
  chorus::sim_tool::Settings s;
  CLI::App app{
      "chorus-sim: predicted All-Reduce time per size and algorithm on a described network, from "
      "the real algorithm code run for every rank over a virtual network in this process (no "
      "data moves; see docs/simulation.md for the model and what it leaves out).\n"
      "Cost grows with the messages an algorithm sends and the plans it keeps per rank. "
      "Measured on a busy 2-core machine: N = 1024 (128 x 8) takes at most about 3 s per size "
      "and algorithm. N = 16384 (2048 x 8): rd about 1 s per size; rhd and tree up to about a "
      "minute at 256 MiB; hier about 2 s below 8 MiB, but from 8 MiB on (pipelined, with a ring "
      "of 2(H-1) steps across the hosts) it needs about 10 GB and many minutes (8 minutes at "
      "8 MiB on 1024 x 16 with 5 GB); the flat ring (every rank plans all 2(N-1) steps up front: "
      "about 80 GB) and oneshot/twoshot (N^2 messages) do not fit. Runs past --max-memory-gib "
      "are reported as not simulated, never estimated."};
  app.option_defaults()->always_capture_default();
  app.add_option("--hosts", s.hosts, "hosts")->check(CLI::Range(1, 1 << 20));
  app.add_option("--ranks-per-host", s.perHost, "ranks on each host")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--net-alpha-us", s.netAlphaUs, "latency of a message between hosts (us)");
  app.add_option("--net-gbps", s.netGBps,
                 "bandwidth of each host's NIC, each way, in GB/s (beta_net = 1/this); all the "
                 "host's ranks' messages go through it one after the other");
  app.add_option("--oversubscription", s.oversub,
                 "divides the bandwidth between hosts (a core oversubscribed F:1)")
      ->check(CLI::Range(1.0, 1e6));
  app.add_option("--shm-alpha-us", s.shmAlphaUs, "latency of a message within a host (us)");
  app.add_option("--shm-gbps", s.shmGBps,
                 "bandwidth of each rank's own link to the ranks of its host, GB/s");
  app.add_option("--overhead-us", s.overheadUs,
                 "CPU time a rank spends posting each send (LogP's o); without it, algorithms "
                 "that send thousands of messages per rank (oneshot, twoshot) look free at small "
                 "sizes");
  app.add_option("--shared-cores", s.sharedCores,
                 "cores that all hosts' network stacks share, as when the hosts are network "
                 "namespaces of one machine (the emulated cluster); 0: not modelled")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--core-gbps", s.coreGBps,
                 "with --shared-cores: GB/s of traffic between hosts that one core's network "
                 "stack work (send and receive sides together) keeps up with")
      ->check(CLI::Range(0.0, 1e6));
  app.add_option("--reduce-gbps", s.reduceGBps, "reduction rate, GB/s of result (gamma = 1/this)");
  app.add_option("--copy-gbps", s.copyGBps, "local copy rate, GB/s");
  app.add_option("--straggler", s.stragglers,
                 "RANK:DELAY_US, that rank enters the collective DELAY_US late (repeatable)");
  app.add_option("-b,--min-bytes", s.minBytes, "smallest size (suffixes K, M, G)");
  app.add_option("-e,--max-bytes", s.maxBytes, "largest size");
  app.add_option("-f,--step-factor", s.stepFactor, "size multiplier between rows")
      ->check(CLI::Range(1.01, 1e6));
  app.add_option("--algo", s.algoNames,
                 "algorithms to run (default: every all-reduce algorithm that applies)");
  app.add_option("--segment-bytes", s.segment, "pipelining unit (CHORUS_SEGMENT_BYTES)");
  app.add_option("--ring-bidir-bytes", s.ringBothWays,
                 "ring all-reduces from this size run both ways (CHORUS_RING_BIDIR_BYTES; "
                 "0: never)");
  app.add_option("--csv", s.csvPath, "write the rows as CSV");
  app.add_option("--png", s.pngPath,
                 "plot time against size per algorithm (needs /usr/bin/python3 with matplotlib; "
                 "skipped with a message otherwise)");
  app.add_option("--max-memory-gib", s.maxMemoryGiB,
                 "heap the simulation may use; a run that needs more is reported, not run");
  app.add_option("--run-limit-s", s.runLimit,
                 "wall-clock seconds per run before it is given up (0: none)");
  app.add_flag("-q,--quiet", s.quiet, "no progress lines on stderr");
  app.set_version_flag("--version", chorus::tools::versionText("chorus-sim"));
  CLI11_PARSE(app, argc, argv);
  try {
    chorus::sim_tool::simulate(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-sim: %s\n", e.what());
    return 1;
  }
  return 0;
}
