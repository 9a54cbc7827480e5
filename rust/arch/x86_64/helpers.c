// SPDX-License-Identifier: GPL-2.0
/*
 * x86-64's out-of-line wrappers (rust/arch/x86_64/): what the module asks
 * of a register frame and of the current task that only x86 defines.
 */
#include <linux/ftrace.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/thread_info.h>
#include <linux/uaccess.h>

#include "../../bindings/helpers.h"

/*
 * The mode @regs were saved in, in one call: 64-bit user mode is what
 * perf_callchain_user() walks (arch/x86/events/core.c); vm86 and ia32
 * frames are the other user modes.
 */
int sframe_regs_mode(struct pt_regs *regs)
{
	if (!user_mode(regs))
		return SFRAME_REGS_KERNEL;
	if (user_64bit_mode(regs) && !(regs->flags & (X86_VM_MASK | PERF_EFLAGS_VM)))
		return SFRAME_REGS_USER64;
	return SFRAME_REGS_USER_OTHER;
}

/*
 * A 32-bit address space: ia32 tasks, and x32 tasks, which run in 64-bit
 * mode (user_64bit_mode() is true) but whose pointers are 32 bits wide.
 * set_personality_ia32() sets TIF_ADDR32 for both at exec; in_x32_syscall()
 * would only describe the current system call, not an interrupted task.
 */
bool sframe_current_addr32(void)
{
	return test_thread_flag(TIF_ADDR32);
}

/*
 * Whether plain user reads may go ahead in this walk: an NMI may land
 * while the CPU switches mm, which nmi_uaccess_okay() tells, but x86 keeps
 * it from modules.  copy_from_user_nmi() checks it: a one-byte read at
 * @probe, the user SP of the task being sampled, answers (a page that is
 * not resident there only sends the walk to the checked reads).
 */
bool sframe_arch_user_access_okay(unsigned long probe)
{
	u8 byte;

	return !copy_from_user_nmi(&byte, (const void __user *)probe, 1);
}

/* A read that checks nmi_uaccess_okay() itself.  Returns the bytes not read. */
unsigned long sframe_read_user_checked(void *dst, unsigned long addr, unsigned long len)
{
	return copy_from_user_nmi(dst, (const void __user *)addr, len);
}

/*
 * Sets the register of the @n-th integer argument (0-based) of a hooked
 * call in its saved registers, which ftrace's trampoline restores before
 * the call goes on (restore_mcount_regs in arch/x86/kernel/ftrace_64.S,
 * and the full set for FTRACE_OPS_FL_SAVE_REGS): the call's replacement
 * receives it.  Nothing for @n past the six argument registers.
 */
void sframe_ftrace_regs_set_argument(struct ftrace_regs *fregs, unsigned int n,
				     unsigned long val)
{
	struct pt_regs *regs = &arch_ftrace_regs(fregs)->regs;

	switch (n) {
	case 0:
		regs->di = val;
		break;
	case 1:
		regs->si = val;
		break;
	case 2:
		regs->dx = val;
		break;
	case 3:
		regs->cx = val;
		break;
	case 4:
		regs->r8 = val;
		break;
	case 5:
		regs->r9 = val;
		break;
	}
}
