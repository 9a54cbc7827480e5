// SPDX-License-Identifier: GPL-2.0
/*
 * arm64's out-of-line wrappers (rust/arch/arm64/): what the module asks of
 * a register frame and of the current task that only arm64 defines, most
 * of it static inline in the kernel's headers.
 */
#include <linux/compat.h>
#include <linux/ftrace.h>
#include <linux/ptrace.h>
#include <linux/sched.h>

#include "../../bindings/helpers.h"

void sframe_arm64_read_regs(struct pt_regs *regs, struct sframe_arm64_regs *out)
{
	out->pc = regs->pc;
	out->sp = regs->sp;
	out->fp = regs->regs[29];
	out->lr = regs->regs[30];
}

/*
 * The mode @regs were saved in, in one call; an AArch32 frame is the other
 * user mode (perf_callchain_user() walks those with {fp, sp, lr}).
 */
int sframe_regs_mode(struct pt_regs *regs)
{
	if (!user_mode(regs))
		return SFRAME_REGS_KERNEL;
	if (compat_user_mode(regs))
		return SFRAME_REGS_USER_OTHER;
	return SFRAME_REGS_USER64;
}

/* A task with a 32-bit address space (TIF_32BIT). */
bool sframe_current_compat(void)
{
	return is_compat_task();
}

/*
 * nmi_uaccess_okay() is x86's alone: here the current task's user memory
 * may always be read from perf's interrupt, as arm64's own user stack
 * walk reads it.
 */
bool sframe_arch_user_access_okay(unsigned long probe)
{
	return true;
}

/* Never reached: the window always allows plain reads here. */
unsigned long sframe_read_user_checked(void *dst, unsigned long addr, unsigned long len)
{
	return sframe_read_user_inatomic(dst, addr, len);
}

/*
 * Sets the register of the @n-th integer argument (0-based) of a hooked
 * call in its saved registers (x0-x7), which ftrace's trampoline restores
 * before the call goes on (arch/arm64/kernel/entry-ftrace.S): the call's
 * replacement receives it.  Nothing for @n past x7.
 */
void sframe_ftrace_regs_set_argument(struct ftrace_regs *fregs, unsigned int n,
				     unsigned long val)
{
	if (n < 8)
		arch_ftrace_regs(fregs)->regs[n] = val;
}
