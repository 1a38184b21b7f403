# Thin wrapper over CMake. `make demo` and `make check` are the README's two commands.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build demo check unit interop integration fuzz-replay asan bench install clean

all: build

deps:
	bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DNDS_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	$(BUILD)/ndstore demo

# Every test: unit suites (+ fuzz corpus replay), the same under ASan+UBSan, interop and integration.
check: build
	bash scripts/check.sh

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNDS_SANITIZE=ON -DNDS_WERROR=ON >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ctest --output-on-failure -j$(JOBS)

# Benchmark (docs/performance.md): `make bench`, or `make bench BENCH_ARGS=--quick` for a smoke run.
bench: build
	bash bench/run.sh $(BUILD) $(BENCH_ARGS)

# `make install` installs into the configured prefix (/usr/local); `make install PREFIX=/opt/ndstore`
# anywhere else (ndstore.pc and the CMake package then name that prefix). DESTDIR=... stages it.
PREFIX ?=
install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix "$(PREFIX)")

clean:
	rm -rf $(BUILD) build-asan
