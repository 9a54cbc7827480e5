# SPDX-License-Identifier: GPL-2.0
#
# sframe-unwind: build the module, its user space, and run the tests.
#
#   make demo      set up, build, boot a guest and profile a demo program
#   make test      every test: host, module build, guest suites
#   make           the module, against KDIR (default: the cached test kernel)
#   make module-arm64  the module for the arm64 test kernel, in out/arm64
#   make deb       Debian packages, sframe-unwind-dkms and sframectl, in out/deb
#
# See README.md and Documentation/testing.rst.

LLVM ?= -19
# KDIR: a kernel build directory with CONFIG_RUST=y, built by the same rustc.
# Left empty, the cached test kernel is used (and built when missing).
KDIR ?=
# Where scripts/rust-kbuild installs the Rust artifacts a distribution's
# headers package lacks, one directory per kernel release.
RUST_KBUILD ?= /var/lib/sframe-unwind/kbuild

SCRIPTS := $(CURDIR)/scripts
# Each is computed once, when first used (recipes only: `make test` does
# not build the test kernel twice).
kdir_given = $(eval kdir_given := $(if $(KDIR),$(KDIR),$(shell $(SCRIPTS)/kernel)))$(kdir_given)
# A headers directory without rust/ (Debian's linux-headers packages): use
# the directory scripts/rust-kbuild made for its release, if there is one.
kdir_release = $(shell cat $(kdir_given)/include/config/kernel.release 2>/dev/null)
kdir = $(eval kdir := $(or $(if $(wildcard $(kdir_given)/rust/libkernel.rmeta),$(kdir_given)), \
	$(if $(kdir_release),$(wildcard $(RUST_KBUILD)/$(kdir_release))),$(kdir_given)))$(kdir)
# LLVM=... only for a kernel built with clang: a GCC-built kernel (Debian's)
# is built on with its own compiler, as its Makefile says.
llvm = $(if $(shell grep -sx 'CONFIG_CC_IS_CLANG=y' $(kdir)/.config),LLVM=$(LLVM))

.PHONY: all module modules module-arm64 clippy clean setup kernel rootfs host-test test \
	guest-test demo bench stress fmt check-fmt deb

all: module

module modules:
	$(MAKE) -C $(kdir) M=$(CURDIR) $(llvm) modules

clippy:
	$(MAKE) -C $(kdir) M=$(CURDIR) $(llvm) CLIPPY=1 modules

# The module for the arm64 test kernel, cross-built into out/arm64.
module-arm64:
	$(SCRIPTS)/module-arm64

clean:
	@if [ -n "$(KDIR)" ] || [ -e "$$HOME/.cache/sframe-unwind/kernel/current" ]; then \
		$(MAKE) -C $(kdir) M=$(CURDIR) $(llvm) clean; fi
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

# Built with debhelper (debian/) in a trixie root, checked by lintian.
deb:
	$(SCRIPTS)/deb

bench:
	$(SCRIPTS)/bench

# The long loops on the test kernel; SFRAME_KASAN=1 make stress runs them on
# the KASAN kernel (a second, cached build).
stress:
	$(SCRIPTS)/run-tests --stress

# The module's own sources (the decoder and the ABI are cargo crates too).
module_rs = $(shell find rust -name '*.rs' -not -path 'rust/sframe/*' \
	-not -path 'rust/uapi/*' -not -path 'rust/generated/*')

fmt:
	cargo fmt --all
	rustfmt --edition 2021 $(module_rs)

check-fmt:
	cargo fmt --all --check
	rustfmt --edition 2021 --check $(module_rs)
