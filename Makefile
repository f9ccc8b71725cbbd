# cachebench front door: `make setup`, `make run`, `make test`.
BUILD       ?= build
SAN_BUILD   ?= build-sanitize
TSAN_BUILD  ?= build-tsan
FUZZ_BUILD  ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
JOBS        ?= $(shell nproc)
BUILD_TYPE  ?= RelWithDebInfo
CMAKE_FLAGS ?=
CACHEBENCH_DATA ?= $(abspath ../shared)
export CACHEBENCH_DATA

CB := $(BUILD)/apps/cachebench/cachebench
DEMO_MODEL := $(CACHEBENCH_DATA)/models/stories260K/stories260K.gguf

.PHONY: all setup configure build run test test-main test-sanitize test-tsan fuzz format clean

all: build

## setup: install system packages (Debian) and Python tooling; safe to re-run
setup:
	bash tools/setup.sh

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

## build: configure and compile everything (CUDA too when nvcc is found)
build: configure
	cmake --build $(BUILD) -j $(JOBS)

## run: the main job: replay a synthetic multi-turn trace through the serving engine with
##      CachedAttention and with recompute, and print the comparison (stories260K, CPU)
DEMO_TRACE := $(BUILD)/demo/trace.json
run: build
	$(CB) --version
	@if [ ! -f "$(DEMO_MODEL)" ]; then \
	  echo "stories260K not found under $(CACHEBENCH_DATA): set CACHEBENCH_DATA to the shared data"; \
	  exit 1; \
	fi
	@mkdir -p $(BUILD)/demo
	@echo; echo "== cachebench trace synth --sessions 12 --seed 0 (ShareGPT statistics)"
	$(CB) trace synth --sessions 12 --seed 0 --out $(DEMO_TRACE)
	@echo; echo "== cachebench replay (CachedAttention vs recompute, stories260K on the CPU)"
	$(CB) replay $(DEMO_TRACE) --model "$(DEMO_MODEL)" --mode ca --compare re \
	  --max-output-tokens 64 --out $(BUILD)/demo/replay.json --csv $(BUILD)/demo/turns
	@echo; echo "(summary: $(BUILD)/demo/replay.json; per-turn records: $(BUILD)/demo/turns.{ca,re}.csv)"

## test: the whole suite through CTest, then the unit tests under ASan+UBSan
test: test-main test-sanitize

# CTest runs $(JOBS) tests at once, one per core: OpenBLAS's own threads (one per core in each
# test) would only spin waiting for work beside them (a sanitizer replay: 105 s of CPU for 60 s
# of wall time with them, 55 s for 55 s without), so the tests' BLAS runs on one thread.
TEST_ENV := OPENBLAS_NUM_THREADS=1

test-main: build
	$(TEST_ENV) ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize:
	@# GCC's `undefined` leaves out float-cast-overflow (a float converted to an integer it does
	@# not fit, e.g. a huge number in a JSON file read as a count): named here.
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	  -DCACHEBENCH_SANITIZE=address,undefined,float-cast-overflow -DCACHEBENCH_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j $(JOBS)
	$(TEST_ENV) ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(SAN_BUILD) -L unit --output-on-failure -j $(JOBS)

## test-tsan: the AttentionStore suites (concurrent save/load/evict) and the CPU kernels that
##            split work over threads (GEMV, decode attention) under ThreadSanitizer
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCACHEBENCH_SANITIZE=thread \
	  -DCACHEBENCH_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_store test_engine test_engine_overlap \
	  test_kernels_cpu
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 $(TSAN_BUILD)/tests/unit/store/test_store
	@# OpenBLAS's worker threads synchronize in code TSan does not instrument: a GEMM's output read
	@# after the call returns is reported as a race with the worker that wrote it. One BLAS thread.
	OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(TSAN_BUILD)/tests/unit/engine/test_engine
	OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(TSAN_BUILD)/tests/unit/engine/test_engine_overlap
	@# The kernels' tests name their thread counts and parts themselves.
	OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  $(TSAN_BUILD)/tests/unit/kernels_cpu/test_kernels_cpu \
	  --gtest_filter='MatmulBf16.*:MatmulF32Gemv.*:MatmulGemv.*:PagedAttentionFastTest.*:RunParts.*'

## fuzz: the libFuzzer targets of fuzz/ (parsers of untrusted files) built with clang, ASan and
##       UBSan in $(FUZZ_BUILD)/, then each run for FUZZ_SECONDS (FUZZ_TARGETS picks some)
fuzz:
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DCACHEBENCH_FUZZ=ON -DCACHEBENCH_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

## format: apply .clang-format to all C++ sources
format:
	git ls-files '*.h' '*.cc' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
