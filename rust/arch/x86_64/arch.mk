# SPDX-License-Identifier: GPL-2.0
#
# x86-64's part of the build (included by Kbuild).

sframe_arch_objs := rust/arch/x86_64/helpers.o
sframe_arch_test_objs := rust/arch/x86_64/helpers_test.o

# bindgen parses C with libclang: a GCC-built kernel's (Debian's) C flags
# need a target named, and these x86-only GCC options dropped (the rest of
# the list is in Kbuild).
SFRAME_BINDGEN_TARGET := x86_64-linux-gnu
SFRAME_ARCH_GCC_ONLY_C_FLAGS := \
	-mno-fp-ret-in-387 -mpreferred-stack-boundary=% -mskip-rax-setup \
	-mindirect-branch=thunk-extern -mindirect-branch-register \
	-mindirect-branch-cs-prefix -mfunction-return=thunk-extern \
	-mrecord-mcount -mstack-protector-guard% -mgeneral-regs-only

# Structures bindgen cannot lay out (packed or over-aligned members).
SFRAME_ARCH_BINDGEN_FLAGS := \
	--opaque-type xregs_state --opaque-type desc_struct \
	--opaque-type arch_lbr_state --opaque-type local_apic \
	--opaque-type alt_instr --opaque-type x86_msi_data \
	--opaque-type x86_msi_addr_lo
