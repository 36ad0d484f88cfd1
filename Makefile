# Thin wrapper over meson/ninja. The real build is meson.build.
#   make run      build and run the main demo (examples/quickstart.c)
#   make test     build and run every test
#   make bench    build and run the benchmarks
#   make install PREFIX=dir    install library, header and ordo.pc under dir
#   make clean
BUILD   ?= build
PREFIX  ?= /usr/local
MESON   ?= meson
JOBS    ?= 2

.PHONY: all deps configure run quickstart test bench install clean

all: configure
	$(MESON) compile -C $(BUILD)

# Installs what a fresh Debian 12 machine lacks (as root), and nothing when it is all there.
deps:
	@bash tools/install-deps.sh

configure: deps
	@if [ ! -f $(BUILD)/build.ninja ]; then $(MESON) setup $(BUILD); fi

run: all
	$(BUILD)/examples/quickstart

quickstart: run

test: all
	bash tests/run_all.sh $(BUILD)

bench: all
	$(BUILD)/bench/bench_ordo

install: configure
	$(MESON) configure $(BUILD) -Dprefix=$(abspath $(PREFIX))
	$(MESON) install -C $(BUILD)

clean:
	rm -rf $(BUILD) build-*
