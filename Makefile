# Chorus: the two commands a new user needs are `make demo` and `make test`.
BUILD ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
RANKS ?= 4

.PHONY: all deps build demo demo-c demo-train demo-torch test test-torch2 bench-torch test-pip test-sanitize test-tsan fuzz bench compare compare-cluster compare-host compare-hier install docs format clean

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

# The same training from PyTorch: unmodified DDP with the torch.distributed backend "chorus",
# launched by torchrun on $(RANKS) local ranks; ends with the test accuracy and the parameter
# check across ranks. TORCH_MODEL=cnn for the CNN; examples/torch/README.md has the other launches.
TORCH_MODEL ?= mlp
demo-torch:
	scripts/install-deps
	scripts/install-deps --train
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target chorus_py_torch
	PYTHONPATH=$(abspath $(BUILD))/python OPENBLAS_NUM_THREADS=1 \
	  /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node $(RANKS) --redirects 2 --tee 2 \
	  examples/torch/train_ddp.py --backend chorus --model $(TORCH_MODEL) --epochs 1

# Four ranks on this machine All-Reduce a few sizes, verify them and print bandwidth.
demo-c: build
	$(BUILD)/tools/chorus-run/chorus-run -n $(RANKS) -- $(BUILD)/examples/allreduce_demo

# The trainer's tests read Fashion-MNIST and the timeline test draws with matplotlib: --train.
test: deps
	scripts/install-deps --train
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHORUS_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The torch.distributed backend against PyPI's torch 2.x: each torch in a virtual environment of
# its own (scripts/install-torch2; the first time it downloads the wheels, several GB with their
# CUDA libraries) and a build folder of its own, $(BUILD)-torch-<version>; builds and runs the
# Python tests (ctest -L python). TORCH2: newest (the default), oldest, all, or versions.
TORCH2 ?= newest
test-torch2: deps
	set -e; for venv in $$(scripts/install-torch2 $(TORCH2)); do \
	  dir=$(BUILD)-$${venv##*/venv-}; \
	  cmake -S . -B $$dir -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHORUS_WERROR=ON \
	    -DPython3_EXECUTABLE=$$venv/bin/python $(CMAKE_FLAGS); \
	  cmake --build $$dir -j $(JOBS); \
	  (cd $$dir && ctest -L python --output-on-failure -j $(JOBS) --timeout 600); \
	done

# The chorus backend against gloo on the newest torch (the venv of test-torch2, build folder
# $(BUILD)-torch-<version>): dist.all_reduce 8 B to 64 MiB and the binding's cost against the C
# API at N = 2 and 4, DDP steps (MLP, CNN), an FSDP2 step and its peak memory on 4 ranks; both
# backends in the same run, alternating; prints the table with the targets (bench/torch/run.py,
# a few minutes on 2 cores). BENCH_TORCH_ARGS: e.g. --quick, --json FILE, --pin.
BENCH_TORCH_ARGS ?=
bench-torch: deps
	set -e; venv=$$(scripts/install-torch2 newest | tail -n 1); dir=$(BUILD)-$${venv##*/venv-}; \
	  cmake -S . -B $$dir -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$$venv/bin/python \
	    $(CMAKE_FLAGS); \
	  cmake --build $$dir -j $(JOBS) --target chorus-run chorus-bench chorus_py_core chorus_py_torch; \
	  $$venv/bin/python bench/torch/run.py --build $$dir $(BENCH_TORCH_ARGS)

# `pip install .` into a temporary venv (offline, Debian's setuptools), then 2 ranks all_reduce
# through it; a full CMake build the first time (build-pip/), so not part of `make test`.
test-pip: deps
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) tests/install/pip_install_test.sh $(CURDIR)

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
