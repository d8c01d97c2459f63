# The README's two commands. Both work on a fresh Debian 12 machine as root.
#   make run   installs what is needed, builds, and runs hurrayd in the foreground.
#   make test  installs what is needed, builds, and runs every test: the normal build,
#              the same tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang),
#              and a bounded libFuzzer run of every fuzz target.
#   make bench installs the benchmark's extra packages, builds a Release build (build-bench)
#              and runs bench/ against its own hurrayd and baselines (build-bench/bench.json).

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60

CMAKE_COMMON := -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHURRAY_WERROR=ON
CLANG := -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19

.PHONY: all deps build build-sanitize test test-normal test-sanitize run bench clean

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

# The benchmarks (bench/, docs/performance.md): a Release build at -O2 without sanitizers,
# then one run of the harness. BENCH_FLAGS=--quick gives a short smoke run.
BENCH_FLAGS ?=
bench: deps
	# The Redis baseline (server and hiredis), JSON for --json, grpc.health.v1's .proto.
	./scripts/install-deps.sh redis-server libhiredis-dev nlohmann-json3-dev grpc-proto
	cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
	  -DHURRAY_BUILD_TESTS=OFF -DHURRAY_BUILD_BENCH=ON
	cmake --build build-bench -j $(JOBS) --target hurrayd hurray_bench
	./build-bench/bench/hurray_bench --hurrayd build-bench/daemon/hurrayd \
	  --json build-bench/bench.json $(BENCH_FLAGS)

clean:
	rm -rf build build-sanitize
