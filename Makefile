# Tether: `make run` and `make test` do all the set-up on a fresh Debian 12 machine.

SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

# Debian packages the build, the tests and `tether dev` need.
PACKAGES := postgresql libpq-dev libssl-dev libmicrohttpd-dev libcrypt-dev libcurl4-openssl-dev pkg-config
# Debian packages only `make test` needs: a headless browser for the support page's test, and a
# Python to run the real firebase-admin SDK (from PyPI, pinned in Tests/firebase-admin) in.
TEST_PACKAGES := chromium python3 python3-venv pgbouncer
FIREBASE_ADMIN_VENV := .tether/firebase-admin-venv
# schemathesis (PyPI, pinned in Tests/schemathesis), run against schema/openapi.yaml by scripts/schemathesis.sh.
SCHEMATHESIS_VENV := .tether/schemathesis-venv
# Debian packages only `make bench` needs: the HTTP load generator and what scripts/bench.sh
# drives it with (pgbench comes with postgresql).
BENCH_PACKAGES := wrk python3 curl
SWIFT_BUILD_FLAGS ?=

.PHONY: all deps test-deps test-packages test-venvs test-build bench-deps build run test fuzz soak bench bench-crypto bench-service clean

all: build

# Install the Debian packages of the list $(1) that are missing (apt-get as root; otherwise print the command).
define install-missing
	@missing=""; \
	for package in $(1); do \
	  dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$package"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "Installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends$$missing >/dev/null; \
	  else \
	    echo "Missing Debian packages. Run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi
endef

## deps: install missing Debian packages (apt-get as root; otherwise print the command)
deps:
	$(call install-missing,$(PACKAGES))
	@command -v swift >/dev/null || { echo "Swift 6 toolchain not found (expected at /opt/swift/usr/bin)"; exit 1; }

## test-deps: deps, and what only the tests need
test-deps: test-packages test-venvs

test-packages: deps
	$(call install-missing,$(TEST_PACKAGES))

# The Python tools, once the Debian packages are there (python3-venv).
test-venvs: test-packages
	@$(MAKE) --no-print-directory $(FIREBASE_ADMIN_VENV)/.installed $(SCHEMATHESIS_VENV)/.installed

# Each Python tool (firebase-admin, schemathesis) in a virtualenv of its own, .tether/NAME-venv, made
# again when its pinned Tests/NAME/requirements.txt changes.
.tether/%-venv/.installed: Tests/%/requirements.txt
	rm -rf $(@D)
	python3 -m venv $(@D)
	$(@D)/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@

## bench-deps: deps, and what only the benchmarks need
bench-deps: deps
	$(call install-missing,$(BENCH_PACKAGES))

## build: debug build of every target
build: deps
	swift build $(SWIFT_BUILD_FLAGS)

## run: build, then `tether dev` (private PostgreSQL under .tether/pg, server on TETHER_LISTEN)
run: deps
	swift build $(SWIFT_BUILD_FLAGS) --product tether
	.build/debug/tether dev

# The debug build with the tests.
test-build: deps
	swift build $(SWIFT_BUILD_FLAGS) --build-tests

## test: start a throwaway PostgreSQL, run every test against it, stop it
# The virtualenvs install (mostly waiting on PyPI) while Swift compiles: about a minute less.
test: test-packages
	@$(MAKE) --no-print-directory -j2 test-build test-venvs
	scripts/test.sh

## soak: tether dev under mixed load for DURATION (or SOAK_DURATION; default 30m: make soak DURATION=2h); memory, files and connections must stay flat (make test runs 2m); then 100,000 forged sign-ins (make test sends 20,000)
DURATION ?= 30m
SOAK_DURATION ?= $(DURATION)
soak: test-deps
	swift build $(SWIFT_BUILD_FLAGS) --build-tests
	SOAK_DURATION=$(SOAK_DURATION) scripts/soak.sh
	TETHER_FORGED_SIGN_INS=100000 scripts/test.sh --filter ForgedSignInGrowthTests

## fuzz: the hostile-input suite for longer (FUZZ_ROUNDS rounds over every route, default 50; make test runs 2), then schemathesis with FUZZ_EXAMPLES examples per operation (default 100; make test runs 10)
FUZZ_ROUNDS ?= 50
FUZZ_EXAMPLES ?= 100
fuzz: test-deps
	swift build $(SWIFT_BUILD_FLAGS) --build-tests
	TETHER_FUZZ_ROUNDS=$(FUZZ_ROUNDS) scripts/test.sh --filter HostileInputTests
	SCHEMATHESIS_EXAMPLES=$(FUZZ_EXAMPLES) scripts/schemathesis.sh

## bench: every benchmark, as ratios against baselines measured in the same run (BENCHMARKS.md)
bench: bench-crypto bench-service

## bench-crypto: token signing and verification against `openssl speed`
bench-crypto: deps
	swift build -c release --product tether-bench
	.build/release/tether-bench crypto

## bench-service: a release `tether dev` under 16 wrk clients next to pgbench baselines, one table
bench-service: bench-deps
	swift build -c release --product tether
	scripts/bench.sh

clean:
	rm -rf .build .tether
