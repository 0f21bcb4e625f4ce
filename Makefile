# Two commands on a fresh Debian 12 machine (as root):
#   make run    install missing packages, build, run the demo (tq bench + vLLM case validation)
#   make test   install missing packages, build, run every test (ctest)
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_ARGS ?=

DEB_PACKAGES := cmake ninja-build g++ make libtbb-dev libeigen3-dev libxsimd-dev xtl-dev \
                libgtest-dev libgmock-dev googletest libbenchmark-dev nlohmann-json3-dev libcli11-dev

TQ := $(BUILD_DIR)/tools/tq/tq
CASES := $(sort $(wildcard tests/data/vllm-soa/*))

.PHONY: all deps configure build test run clean

all: build

# Installs only what is missing (dpkg -s), so a prepared machine needs no network.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

configure: deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

run: build
	$(TQ) bench
	@for c in $(CASES); do echo; echo "== tq validate $$c"; $(TQ) validate $$c || exit 1; \
	  echo "== tq validate $$c --output vllm_v2_out.npy (vLLM's tensor-core decode)"; \
	  $(TQ) validate $$c --output vllm_v2_out.npy; echo "(exit $$?)"; done

clean:
	rm -rf $(BUILD_DIR)
