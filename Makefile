# Entry points for people and CI. The real build is CMake + Ninja.
#   make         release build in build/ (build/libdpmalloc.so)
#   make test    configure, build and run every test (CTest)
#   make bench   quick benchmark against every allocator found
BUILD ?= build
CMAKE ?= cmake
GEN := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all release test bench bench-full bench-deps asan tsan clean

all: release

release:
	$(CMAKE) -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=Release
	$(CMAKE) --build $(BUILD) -j

test: release
	cd $(BUILD) && ctest --output-on-failure -j2 --timeout 600

asan:
	$(CMAKE) -S . -B build-asan $(GEN) -DCMAKE_BUILD_TYPE=Release -DDPM_SANITIZE=address,undefined -DDPM_DEBUG_CHECKS=ON
	$(CMAKE) --build build-asan -j
	cd build-asan && ctest --output-on-failure -j2 --timeout 900 -L sanitize

tsan:
	$(CMAKE) -S . -B build-tsan $(GEN) -DCMAKE_BUILD_TYPE=Release -DDPM_SANITIZE=thread
	$(CMAKE) --build build-tsan -j
	cd build-tsan && ctest --output-on-failure -j2 --timeout 900 -L sanitize

# --- benchmark targets (owned by bench/) ---
bench: release
	$(BUILD)/bench/dpmbench --quick

clean:
	rm -rf $(BUILD) build-asan build-tsan
