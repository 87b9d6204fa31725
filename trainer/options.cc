#include "options.h"

#include <CLI/CLI.hpp>
#include <chorus/dp.hpp>

#include "common/tool_version.h"

#include <cstdio>

namespace chorus::train {

int parseOptions(int argc, char** argv, TrainOptions& o) {
  CLI::App app{
      "Data-parallel training of Fashion-MNIST with LibTorch and chorus::dp.\n"
      "Run it under chorus-run (e.g. chorus-run -n 4 -- chorus-train --epochs 1); every rank "
      "trains on its own shard and gradients are averaged by Chorus."};
  app.set_version_flag("--version", chorus::tools::versionText("chorus-train"));
  app.add_option("--model", o.model, "mlp (784-512-256-10) or cnn (two conv layers)")
      ->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--epochs", o.epochs, "Epochs")->check(CLI::Range(1, 1000));
  app.add_option("--batch", o.batch, "Batch size per rank")->check(CLI::Range(1, 1 << 16));
  app.add_option("--lr", o.lr, "Learning rate")->check(CLI::PositiveNumber);
  app.add_option("--optimizer", o.optimizer, "sgd (with --momentum) or adam")
      ->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  app.add_option("--accumulation", o.accumulation, "Micro-batches per optimizer step (K)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--mode", o.mode,
                 "sync, delayed (one step stale), local-sgd or diloco (local steps with the "
                 "--optimizer, an outer Nesterov SGD step on the averaged change every "
                 "--sync-every steps)")
      ->check(CLI::IsMember({"sync", "delayed", "local-sgd", "diloco"}));
  app.add_option("--compress", o.compress,
                 "Gradient compression in sync and delayed modes, with error feedback: none, bf16, "
                 "fp16, int8 (a scale per block) or powersgd:R (rank-R factors)")
      ->check([](const std::string& text) {
        try {
          chorus::dp::parseCompression(text);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--sync-every", o.syncEvery, "diloco: inner steps between outer steps (H)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--outer-lr", o.outerLr, "diloco: outer SGD learning rate")
      ->check(CLI::PositiveNumber);
  app.add_option("--outer-momentum", o.outerMomentum, "diloco: outer Nesterov momentum")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--fragments", o.fragments,
                 "diloco: sync the parameters in F fragments at staggered steps")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--eval-every", o.evalEvery,
                 "Test accuracy every K optimizer steps, with the training time, into the metrics "
                 "and the plot (0: at the end of each epoch only). local-sgd and diloco evaluate "
                 "each rank's replica on its share of the test set: choose K a multiple of "
                 "--sync-every to see the synced model")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--target-accuracy", o.targetAccuracy,
                 "Stop once the test accuracy (fraction, e.g. 0.85) reaches this, and print the "
                 "training time it took (needs --eval-every)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--local-sgd-period", o.localSgdPeriod, "local-sgd: average every H steps")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--min-buckets", o.minBuckets,
                 "Cut the gradients into at least this many buckets, so that a small model's "
                 "communication overlaps backward too (0: buckets by --bucket-mb alone)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bucket-mb", o.bucketMb, "Gradient bucket size in MiB")
      ->check(CLI::Range(0.001, 4096.0));
  app.add_option("--limit", o.limit, "Use only the first N training samples (0: all)");
  app.add_option("--data", o.data, "Directory with the Fashion-MNIST *-idx?-ubyte.gz files");
  app.add_option("--metrics", o.metrics, "Write per-step metrics to this CSV (rank 0)");
  app.add_option("--plot", o.plot, "Plot loss and test accuracy to this PNG (rank 0, python3)");
  app.add_option("--seed", o.seed, "Seed for initialisation and shuffling (same on all ranks)");
  app.add_option("--threads", o.threads, "Intra-op threads per rank (0: cores / local ranks)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--check-every", o.checkEvery, "Consistency check every N steps (0: never)")
      ->check(CLI::Range(0, 1 << 30));
  bool noProgress = false;
  app.add_flag("--no-progress", noProgress, "No progress bar");
  app.add_option("--max-steps", o.maxSteps,
                 "Stop after this many optimizer steps in all (0: every epoch)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint", o.checkpointDir,
                 "Directory for checkpoints: rank 0 writes one atomically every --checkpoint-every "
                 "steps and at the end (the newest two are kept)");
  app.add_option("--checkpoint-every", o.checkpointEvery, "Steps between checkpoints")
      ->check(CLI::Range(1, 1 << 30));
  app.add_flag("--resume", o.resume,
               "Resume from the newest checkpoint in --checkpoint (none there: start afresh)");
  app.add_flag("--elastic", o.elastic,
               "Survive lost ranks: the survivors go on (a replacement started with CHORUS_JOIN=1 "
               "joins and receives the state); run under chorus-run --elastic");
  app.add_option("--min-ranks", o.minRanks, "--elastic: stop when fewer ranks remain")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--admit-every", o.admitEvery,
                 "--elastic: look for waiting replacements every N steps (0: only at failures)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--fail-rank", o.failRank,
                 "Testing: this rank kills itself (SIGKILL) during step --fail-step, on its first "
                 "life only (CHORUS_RESTART unset)");
  app.add_option("--fail-step", o.failStep, "Testing: the step at which --fail-rank fails")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--fail-signal", o.failSignal,
                 "Testing: kill (SIGKILL, a crash), stop (SIGSTOP, a hang) or exit (_exit(17), "
                 "which chorus-run reports after a moment's grace, letting the survivors speak)")
      ->check(CLI::IsMember({"kill", "stop", "exit"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  o.progress = !noProgress;
  if (o.targetAccuracy > 0 && o.evalEvery == 0) {
    std::fprintf(stderr, "chorus-train: --target-accuracy needs --eval-every K\n");
    return 2;
  }
  if (o.compress != "none" && o.mode != "sync" && o.mode != "delayed") {
    std::fprintf(stderr, "chorus-train: --compress applies to --mode sync or delayed, not %s\n",
                 o.mode.c_str());
    return 2;
  }
  if (o.resume && o.checkpointDir.empty()) {
    std::fprintf(stderr, "chorus-train: --resume needs --checkpoint DIR\n");
    return 2;
  }
  return -1;
}

}  // namespace chorus::train
