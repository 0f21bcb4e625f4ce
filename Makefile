# Two commands on a fresh Debian 12 machine (as root):
#   make run    install missing packages, build, run the demo (tq bench + validation of the vLLM
#               cases, both layouts: tests/data/vllm-soa and tests/data/vllm-aos; the same from
#               Python: examples/python_validate.py)
#   make test   install missing packages, build, run every test (ctest; the Python package's
#               pytest suite and a fresh-venv `pip install .` included)
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=

DEB_PACKAGES := cmake ninja-build g++ make libtbb-dev libeigen3-dev libxsimd-dev xtl-dev \
                libgtest-dev libgmock-dev googletest libbenchmark-dev nlohmann-json3-dev libcli11-dev \
                python3-venv python3-dev

# The Python package (python/, docs/PYTHON.md) is built into $(BUILD_DIR)/python with the
# interpreter of a virtual environment that sees the system's packages (torch, where
# installed) and gets nanobind, scikit-build-core, numpy and pytest from PyPI if missing.
VENV ?= .venv
PYTHON := $(VENV)/bin/python
PY_PACKAGES := nanobind scikit-build-core numpy pytest

TQ := $(BUILD_DIR)/tools/tq/tq
case_dirs = $(sort $(patsubst %/meta.json,%,$(wildcard tests/data/$(1)/*/meta.json)))
CASES := $(call case_dirs,vllm-soa) $(call case_dirs,vllm-aos)

.PHONY: all deps pydeps configure build test run clean

all: build

# Installs only what is missing (dpkg -s), so a prepared machine needs no network.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

pydeps: deps
	@[ -x $(PYTHON) ] || python3 -m venv --system-site-packages $(VENV)
	@$(PYTHON) -c "import nanobind, scikit_build_core, numpy, pytest" 2>/dev/null || \
	  $(PYTHON) -m pip install -q $(PY_PACKAGES)

configure: deps pydeps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DTURBOQUANT_ENABLE_PYTHON=ON \
	  -DPython_EXECUTABLE=$(abspath $(PYTHON)) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

run: build
	$(TQ) bench
	@for c in $(CASES); do echo; echo "== tq validate $$c"; $(TQ) validate $$c || exit 1; \
	  [ -f $$c/vllm_v2_out.npy ] || continue; \
	  echo "== tq validate $$c --output vllm_v2_out.npy (vLLM's tensor-core decode)"; \
	  $(TQ) validate $$c --output vllm_v2_out.npy; echo "(exit $$?)"; done
	@echo; echo "== python examples/python_validate.py (docs/PYTHON.md's five lines)"
	PYTHONPATH=$(BUILD_DIR)/python $(PYTHON) examples/python_validate.py

clean:
	rm -rf $(BUILD_DIR)

# Sanitizers (issue 6, docs/RELIABILITY.md §3): the whole test suite under
# AddressSanitizer + UndefinedBehaviorSanitizer (build-asan), then the oneTBB /
# concurrency tests (labels cpu, reliability) under ThreadSanitizer
# (build-tsan), linked against a ThreadSanitizer build of the system's oneTBB
# version (tests/reliability/tsan_onetbb.sh: Debian's libtbb is uninstrumented
# and would drown TSan in false reports). The installed-package test is
# skipped: its example links without sanitizers; so is the clang compile check
# (label compat: it runs no library code). To keep CI under its 60 minutes,
# TSan (TSAN_SKIP) leaves out tests whose threads other TSan tests already run
# the same way (ASan and the Release run take every one of them): the
# one-million-token LongLayout tests (140 s), the golden model's grids against
# the float64 oracle (157 s; the scalar reference runs on one thread), and
# three quarters of the CPU backend's shape grids (320 s): of the
# short-sequence edge grid the GQA-4 combinations (every preset, head size,
# block size and layout), of the multi-token grid every fifth combination.
# -O1 -g1 (line tables only): the sanitizer builds were most of CI's time at
# -O2 -g, and reports need only file:line. UBSan's object-size check is left
# to ASan, which finds the same out-of-object accesses at run time: with both
# it made the SIMD backends' compile 1.4x slower (isa_avx2.cpp: 176 s, 126 s without).
TSAN_SKIP := LongLayout|Grid/MultiTokenGrid|Grid/ReferenceDecodeEdgeGrid|Grid/CpuDecodeEdgeGrid.*_gqa[138]|Grid/CpuMultiTokenGrid.*/[0-9]*[1-46-9]$$
SAN_CMAKE := -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DTURBOQUANT_ENABLE_CUDA=OFF -DTURBOQUANT_ENABLE_BENCH=OFF
.PHONY: sanitize
sanitize: deps
	cmake -S . -B build-asan $(SAN_CMAKE) \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize=object-size -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) -LE "package|compat"
	tests/reliability/tsan_onetbb.sh build-tsan/onetbb
	cmake -S . -B build-tsan $(SAN_CMAKE) -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  -DTBB_DIR=$(CURDIR)/build-tsan/onetbb/install/lib/cmake/TBB
	cmake --build build-tsan -j $(JOBS) --target test_cpu test_reliability
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure -j $(JOBS) -L "cpu|reliability" -E "$(TSAN_SKIP)"
