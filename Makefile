# Chorus: the two commands a new user needs are `make demo` and `make test`.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
RANKS ?= 4

.PHONY: all deps build demo demo-c demo-train demo-torch test test-torch test-torch-suite bench-torch bench-async bench-recovery-torch bench-recovery-torch-cluster bench-goodput-torch test-pip test-sanitize test-tsan fuzz bench compare compare-cluster compare-host compare-hier chaos install docs format clean

all: build

deps:
	scripts/install-deps

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Data-parallel training: installs LibTorch and Fashion-MNIST, builds, and trains an MLP for one
# epoch on $(RANKS) local ranks; ends with the test accuracy and the parameter check across ranks.
demo: demo-train

demo-train:
	scripts/install-deps
	scripts/install-deps --train
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target chorus-run chorus-train
	OPENBLAS_NUM_THREADS=1 $(BUILD)/tools/chorus-run/chorus-run -n $(RANKS) -- \
	  $(BUILD)/trainer/chorus-train --model mlp --epochs 1 --batch 64 --optimizer adam --lr 1e-3 \
	  --bucket-mb 1 --metrics $(BUILD)/train-metrics.csv --plot $(BUILD)/train-metrics.png

# The same training from PyTorch on the newest torch (TORCH=oldest, a version, or debian for
# Debian's torch 1.13): unmodified DDP with the torch.distributed backend "chorus", launched by
# torchrun on $(RANKS) local ranks, then the same model under FSDP2's fully_shard (not on 1.13);
# each run ends with the test accuracy and the parameter check across ranks. TORCH_MODEL=cnn for
# the CNN; examples/torch/README.md has the other launches.
TORCH ?= newest
TORCH_MODEL ?= mlp
demo-torch:
	scripts/install-deps
	scripts/install-deps --train
	set -e; py=$$(scripts/torch-python $(TORCH)); \
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$$py $(CMAKE_FLAGS); \
	cmake --build $(BUILD) -j $(JOBS) --target chorus_py_torch; \
	run() { PYTHONPATH=$(abspath $(BUILD))/python OPENBLAS_NUM_THREADS=1 $$py -m torch.distributed.run \
	  --standalone --nproc_per_node $(RANKS) --redirects 2 --tee 2 "$$@" --backend chorus \
	  --model $(TORCH_MODEL) --epochs 1; }; \
	run examples/torch/train_ddp.py; \
	if $$py -c 'import torch.distributed.fsdp as f; f.fully_shard' 2>/dev/null; then \
	  run examples/torch/train_fsdp.py; else echo "demo-torch: no FSDP2 in this torch"; fi

# Four ranks on this machine All-Reduce a few sizes, verify them and print bandwidth.
demo-c: build
	$(BUILD)/tools/chorus-run/chorus-run -n $(RANKS) -- $(BUILD)/examples/allreduce_demo

# The trainer's tests read Fashion-MNIST and the timeline test draws with matplotlib: --train.
# The Python package and its tests use the newest PyPI torch (TORCH, as for demo-torch), in a
# virtual environment under ~/.cache/chorus (scripts/install-torch2: the first time it downloads
# the wheels, several GB with their CUDA libraries, once per machine).
test: deps
	scripts/install-deps --train
	set -e; py=$$(scripts/torch-python $(TORCH)); \
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHORUS_WERROR=ON \
	  -DPython3_EXECUTABLE=$$py $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The backend's Python tests (ctest -L python, but the install one) against the other torches: the
# oldest supported PyPI torch and Debian's torch 1.13, each in a build folder of its own,
# $(BUILD)-torch-<version>, which builds only what those tests run (CI runs it after make test).
# TORCHES: any of newest, oldest, debian, or versions (scripts/torch-python).
TORCHES ?= oldest debian
test-torch: deps
	set -e; for t in $(TORCHES); do \
	  py=$$(scripts/torch-python $$t); \
	  dir=$(BUILD)-torch-$$($$py -c 'import torch; print(torch.__version__.split("+")[0])'); \
	  cmake -S . -B $$dir -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHORUS_WERROR=ON \
	    -DPython3_EXECUTABLE=$$py $(CMAKE_FLAGS); \
	  cmake --build $$dir -j $(JOBS) --target chorus_python_test_deps; \
	  (cd $$dir && ctest -L python -LE install --output-on-failure -j $(JOBS) --timeout 600); \
	done

# PyTorch's own distributed_test.py (from the torch wheel) with backend chorus and with gloo, at
# 2 and 4 ranks; prints "chorus passes N of the M tests gloo passes" and fails on a test gloo
# passes and chorus does not, unless tests/python/torch/suite/exceptions.txt lists it (with why).
# TORCH_SUITE: newest (default), oldest or a version (scripts/install-torch2); builds in
# $(BUILD)-torch-<version> as test-torch does. About 2 minutes per backend and world size on 2
# cores (docs/python.md); SUITE_ARGS passes run_suite.py options (for example -k barrier).
TORCH_SUITE ?= newest
SUITE_RANKS ?= 2 4
SUITE_ARGS ?=
test-torch-suite: deps
	tests/python/torch/suite/run-suite.sh --torch $(TORCH_SUITE) --ranks "$(SUITE_RANKS)" \
	  --jobs $(JOBS) --build-prefix $(abspath $(BUILD)) -- $(SUITE_ARGS)

# The chorus backend against gloo on the torch of make test (TORCH, in $(BUILD)): dist.all_reduce
# 8 B to 64 MiB and the binding's cost against the C API at N = 2 and 4, DDP steps (MLP, CNN), an
# FSDP2 step and its peak memory on 4 ranks; both backends in the same run, alternating; prints
# the table with the targets (bench/torch/run.py, a few minutes on 2 cores). BENCH_TORCH_ARGS:
# e.g. --quick, --json FILE, --pin.
BENCH_TORCH_ARGS ?=
bench-torch: deps
	set -e; py=$$(scripts/torch-python $(TORCH)); \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$$py \
	    $(CMAKE_FLAGS); \
	  cmake --build $(BUILD) -j $(JOBS) --target chorus-run chorus-bench chorus_py_core chorus_py_torch; \
	  $$py bench/torch/run.py --build $(BUILD) $(BENCH_TORCH_ARGS)

# A rank lost during PyTorch training: Chorus's elastic Trainer against torchft (PyPI, installed
# into the newest torch venv by scripts/install-torch2 --torchft) in the same run, alternating;
# the time from the kill to the next committed step (bench/elastic/torch_recovery.py).
# BENCH_RECOVERY_ARGS: e.g. --runs 10 --timeout 10 --json FILE.
BENCH_RECOVERY_ARGS ?=
bench-recovery-torch: deps
	set -e; py=$$(scripts/install-torch2 --torchft newest | tail -n 1)/bin/python; \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$$py \
	    $(CMAKE_FLAGS); \
	  cmake --build $(BUILD) -j $(JOBS) --target chorus-run chorus_py_core chorus_py_torch; \
	  $$py bench/elastic/torch_recovery.py --build $(BUILD) --python $$py $(BENCH_RECOVERY_ARGS)

# The same comparison on the emulated cluster (root: network namespaces), ranks spread over hosts.
BENCH_CLUSTER_RECOVERY_ARGS ?= --layouts 2x1 2x2 4x2 --runs 3
bench-recovery-torch-cluster: deps
	set -e; py=$$(scripts/install-torch2 --torchft newest | tail -n 1)/bin/python; \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$$py \
	    $(CMAKE_FLAGS); \
	  cmake --build $(BUILD) -j $(JOBS) --target chorus-store chorus_py_core chorus_py_torch; \
	  $$py bench/elastic/torch_cluster_recovery.py --build $(BUILD) --python $$py \
	    $(BENCH_CLUSTER_RECOVERY_ARGS)

# Goodput under repeated failures, Chorus's elastic Trainer against torchft: 4 ranks, a rank
# SIGKILLed every 60 s and every 15 s and no failure, GOODPUT_SECONDS each (six runs in a row,
# an hour at the default), replacements restarted; the table (useful samples/s, efficiency,
# accuracy) and the plot in $(GOODPUT_OUT) (bench/elastic/torch_goodput.py). Chorus runs with
# GOODPUT_SPARES spares (chorus-run --spares; 0: replacements started after each failure only).
# GOODPUT_ARGS go to every run: "--data-cache DIR" gives both systems the examples' decoded-data
# cache (docs/torch-goodput.md, "Fifth sitting"). The fourth sitting's cells (a spare per kill,
# all ready before the window) are torch_goodput.py commands of their own (see there).
GOODPUT_SECONDS ?= 600
GOODPUT_SPARES ?= 1
GOODPUT_ARGS ?=
GOODPUT_OUT ?= $(BUILD)/goodput
bench-goodput-torch: deps
	set -e; py=$$(scripts/install-torch2 --torchft newest | tail -n 1)/bin/python; \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$$py \
	    $(CMAKE_FLAGS); \
	  cmake --build $(BUILD) -j $(JOBS) --target chorus-run chorus_py_core chorus_py_torch; \
	  for every in 0 60 15; do for system in chorus torchft; do \
	    $$py bench/elastic/torch_goodput.py --build $(BUILD) --python $$py --system $$system \
	      --every $$every --seconds $(GOODPUT_SECONDS) --spares $(GOODPUT_SPARES) \
	      $(GOODPUT_ARGS) --out $(GOODPUT_OUT)/$$system-$$every.json; \
	  done; done; \
	  $$py bench/elastic/torch_goodput.py --table $(GOODPUT_OUT)/*.json; \
	  /usr/bin/python3 bench/elastic/torch_goodput_plot.py $(GOODPUT_OUT) $(GOODPUT_OUT)/goodput.png

# chorus.async_training against DDP on the emulated cluster (root): time to 85%, bytes per step.
BENCH_ASYNC_ARGS ?= --hosts 2 --rates 100mbit
bench-async: deps
	set -e; py=$$(scripts/torch-python $(TORCH)); \
	  cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$$py \
	    $(CMAKE_FLAGS); \
	  cmake --build $(BUILD) -j $(JOBS) --target chorus-run chorus_py_core chorus_py_torch; \
	  $$py bench/torch/async_bench.py --build $(BUILD) $(BENCH_ASYNC_ARGS)

# `pip install .` as a user of PyPI's torch does it (tests/install/pip_install_test.sh): a temporary
# venv that sees the newest torch venv, pip install . (scikit-build-core from PyPI), 2 ranks
# all_reduce through it, the refusal of another torch, then pip wheel . (QUICK=1 leaves it out).
# A full build the first time (build-pip/, kept; ccache), so not part of `make test`.
test-pip: deps
	TORCH_VENV=$$(scripts/install-torch2 newest | tail -n 1) CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) \
	  tests/install/pip_install_test.sh $(CURDIR)

# Every test but the install ones under AddressSanitizer and UndefinedBehaviorSanitizer (CI runs it
# after make test). Findings in other projects' code are suppressed in tests/sanitizers/*.supp,
# each with the line that says whose and why; the Python package is not built (python3 does not
# load the runtimes).
SANITIZERS_DIR := $(CURDIR)/tests/sanitizers
test-sanitize: deps
	cmake -S . -B $(BUILD)-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCHORUS_WERROR=ON -DCHORUS_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD)-sanitize -j $(JOBS)
	cd $(BUILD)-sanitize && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=suppressions=$(SANITIZERS_DIR)/lsan.supp:print_suppressions=0 \
	  ctest --output-on-failure -j $(JOBS) --timeout 900 -LE install

# The suites whose ranks are threads of one process, under ThreadSanitizer (not in CI: see
# tests/sanitizers/README.md for what it found and how long it takes).
TSAN_SUITES ?= unit store transport collectives dp trace auth membership wire
# Large payloads (20-75 s each under ThreadSanitizer: their synchronisation is that of the
# smaller tests of the same collectives), and trace.processes, whose straggler check expects the
# delays it injects to dominate the ranks' own speed, which ThreadSanitizer's slowdown does not
# leave them.
TSAN_EXCLUDE ?= AllReduceLargePrimeCount|CollectivesLarge|PipelinedHierarchicalAllReduce|RingMadeLateUnderLoad|trace\.processes
empty :=
space := $(empty) $(empty)
test-tsan: deps
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_WERROR=ON -DCHORUS_TSAN=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD)-tsan -j $(JOBS)
	cd $(BUILD)-tsan && TSAN_OPTIONS="suppressions=$(SANITIZERS_DIR)/tsan.supp halt_on_error=0 second_deadlock_stack=1" \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800 -L '^($(subst $(space),|,$(strip $(TSAN_SUITES))))$$' \
	  -E '$(TSAN_EXCLUDE)'

# Every fuzz harness (tests/fuzz/) for FUZZ_SECONDS each under libFuzzer with AddressSanitizer and
# UndefinedBehaviorSanitizer, built with clang in $(BUILD)-fuzz; new inputs and crashes go to
# $(FUZZ_SCRATCH), not into the repository (docs/security.md, "Fuzzing").
FUZZ_SECONDS ?= 60
FUZZ_SCRATCH ?= $(BUILD)-fuzz/scratch
fuzz:
	scripts/install-deps --fuzz
	cmake -S tests/fuzz/libfuzzer -B $(BUILD)-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ $(CMAKE_FLAGS)
	cmake --build $(BUILD)-fuzz -j $(JOBS)
	tests/fuzz/run_fuzzers.sh $(BUILD)-fuzz $(FUZZ_SECONDS) $(FUZZ_SCRATCH)

# All-reduce sweep on 2 and 4 local ranks with chorus-bench.
bench: build
	for n in 2 4; do $(BUILD)/tools/chorus-run/chorus-run -n $$n -- \
	  $(BUILD)/tools/chorus-bench/chorus-bench --op allreduce --min-bytes 8 --max-bytes 64M; done

# Side by side with Gloo, torch.distributed (gloo), Open MPI and MPICH (installs them first):
# TCP loopback on this machine, then the emulated 1 Gbit/s cluster of 2, 4 and 8 hosts (root).
compare: build
	scripts/install-deps --bench
	bench/compare/run.sh $(BUILD)

compare-cluster: build
	scripts/install-deps --bench
	SETTING=cluster bench/compare/run.sh $(BUILD)

# One host, every system on its best intra-host transport (shared memory; Gloo: TCP), with
# chorus-bench --bound; and 2x2, 4x2 hosts x ranks on the emulated cluster (root).
compare-host: build
	scripts/install-deps --bench
	SETTING=host bench/compare/run.sh $(BUILD)

compare-hier: build
	scripts/install-deps --bench
	SETTING=hier bench/compare/run.sh $(BUILD)

# The chaos campaign (docs/fault-tolerance.md): elastic CNN training on 4 emulated hosts (root:
# network namespaces), etcd store, authentication and encryption on, faults injected at random
# (seeded) for CHAOS_SECONDS; report.json and report.md in CHAOS_OUT; fails on any failed check.
CHAOS_SECONDS ?= 600
CHAOS_SEED ?= 1
CHAOS_OUT ?= $(BUILD)/chaos
chaos: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target chorus-run chorus-train chorus-bench chorus-doctor
	nice -n 19 python3 bench/chaos/chaos.py --build $(BUILD) --seconds $(CHAOS_SECONDS) \
	  --seed $(CHAOS_SEED) --out $(CHAOS_OUT)

install: build
	cmake --install $(BUILD)

# API reference of the public headers (include/chorus/) with Doxygen, into $(BUILD)/docs/html.
docs:
	scripts/install-deps --docs
	mkdir -p $(BUILD)/docs
	(cat docs/api/Doxyfile; echo "OUTPUT_DIRECTORY = $(BUILD)/docs") | doxygen -
	@echo "API reference: $(BUILD)/docs/html/index.html"

format:
	find include src tools tests examples bench trainer -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.c' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-sanitize $(BUILD)-tsan $(BUILD)-fuzz
