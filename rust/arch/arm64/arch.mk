# SPDX-License-Identifier: GPL-2.0
#
# arm64's part of the build (included by Kbuild).

sframe_arch_objs := rust/arch/arm64/helpers.o
sframe_arch_test_objs := rust/arch/arm64/helpers_test.o

# bindgen parses C with libclang: a GCC-built kernel's (Debian's) C flags
# need a target named, and these arm64-only GCC options dropped (the rest
# of the list is in Kbuild), as the kernel's rust/Makefile drops them.
SFRAME_BINDGEN_TARGET := aarch64-linux-gnu
SFRAME_ARCH_GCC_ONLY_C_FLAGS := \
	-mno-fdpic -mbranch-protection=% -mstack-protector-guard% \
	-mgeneral-regs-only -mabi=lp64 -mharden-sls=%

# Structures bindgen cannot lay out (packed or over-aligned members).
SFRAME_ARCH_BINDGEN_FLAGS :=
