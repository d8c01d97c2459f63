# The README's two commands. Both work on a fresh Debian 12 machine as root.
#   make run   installs what is needed, builds, and runs hurrayd in the foreground.
#   make test  installs what is needed, builds, and runs every test: the normal build,
#              the same tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang),
#              and a bounded libFuzzer run of every fuzz target.

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60

CMAKE_COMMON := -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHURRAY_WERROR=ON
CLANG := -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19

.PHONY: all deps build build-sanitize test test-normal test-sanitize run clean

all: build

deps:
	./scripts/install-deps.sh

build: deps
	cmake -S . -B build $(CMAKE_COMMON)
	cmake --build build -j $(JOBS)

build-sanitize: deps
	cmake -S . -B build-sanitize $(CMAKE_COMMON) $(CLANG) \
	  -DHURRAY_SANITIZE=address,undefined -DHURRAY_FUZZ=ON -DHURRAY_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build build-sanitize -j $(JOBS)

test-normal: build
	ctest --test-dir build --output-on-failure -j $(JOBS)

test-sanitize: build-sanitize
	ctest --test-dir build-sanitize --output-on-failure -j $(JOBS)

# The sanitizer run goes last: its summary counts every test, the fuzz runs included.
test: test-normal test-sanitize

# hurrayd in the foreground with its embedded defaults; Ctrl-C stops it cleanly.
run: build
	./build/daemon/hurrayd

clean:
	rm -rf build build-sanitize
