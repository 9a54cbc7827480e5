# SPDX-License-Identifier: GPL-2.0
#
# sframe-unwind: build the module, its user space, and run the tests.
#
#   make demo      set up, build, boot a guest and profile a demo program
#   make test      every test: host, module build, guest suites
#   make           the module, against KDIR (default: the cached test kernel)
#
# See README.md and Documentation/testing.rst.

LLVM ?= -19
# KDIR: a kernel build directory with CONFIG_RUST=y, built by the same rustc.
# Left empty, the cached test kernel is used (and built when missing).
KDIR ?=

SCRIPTS := $(CURDIR)/scripts
kdir = $(if $(KDIR),$(KDIR),$(shell $(SCRIPTS)/kernel))

.PHONY: all module modules clippy clean setup kernel rootfs host-test test \
	guest-test demo bench stress fmt check-fmt

all: module

module modules:
	$(MAKE) -C $(kdir) M=$(CURDIR) LLVM=$(LLVM) modules

clippy:
	$(MAKE) -C $(kdir) M=$(CURDIR) LLVM=$(LLVM) CLIPPY=1 modules

clean:
	@if [ -n "$(KDIR)" ] || [ -e "$$HOME/.cache/sframe-unwind/kernel/current" ]; then \
		$(MAKE) -C $(kdir) M=$(CURDIR) LLVM=$(LLVM) clean; fi
	cargo clean

setup:
	$(SCRIPTS)/setup

kernel:
	$(SCRIPTS)/kernel

rootfs:
	$(SCRIPTS)/rootfs

host-test:
	cargo test --workspace --release

test:
	$(SCRIPTS)/run-tests

demo:
	$(SCRIPTS)/demo

bench:
	$(SCRIPTS)/bench

# The long loops on the test kernel; SFRAME_KASAN=1 make stress runs them on
# the KASAN kernel (a second, cached build).
stress:
	$(SCRIPTS)/run-tests --stress

fmt:
	cargo fmt --all
	rustfmt --edition 2021 rust/*.rs

check-fmt:
	cargo fmt --all --check
	rustfmt --edition 2021 --check rust/*.rs
