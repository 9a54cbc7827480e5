// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for static inline kernel functions that Rust cannot
 * call.  Each is a one-line forward; the Rust side documents the rules.
 */
#include <linux/mmu_notifier.h>
#include <linux/ratelimit.h>
#include <linux/sched.h>

#include "bindings/helpers.h"

struct mm_struct *sframe_current_mm(void)
{
	return current->mm;
}

/* Unwinder: rust/ftrace.rs, rust/perf.rs, rust/unwind.rs. */
#include <linux/ftrace.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched/task_stack.h>
#include <linux/uprobes.h>

unsigned long sframe_ftrace_regs_get_argument(struct ftrace_regs *fregs, unsigned int n)
{
	return ftrace_regs_get_argument(fregs, n);
}

void sframe_ftrace_regs_set_ip(struct ftrace_regs *fregs, unsigned long ip)
{
	ftrace_regs_set_instruction_pointer(fregs, ip);
}

int sframe_perf_callchain_store(struct perf_callchain_entry_ctx *ctx, u64 ip)
{
	return perf_callchain_store(ctx, ip);
}

struct pt_regs *sframe_current_user_regs(void)
{
	return task_pt_regs(current);
}

bool sframe_user_mode(struct pt_regs *regs)
{
	return user_mode(regs);
}

bool sframe_user_64bit_mode(struct pt_regs *regs)
{
	return user_64bit_mode(regs);
}

/* What perf_callchain_user() refuses to walk (arch/x86/events/core.c). */
bool sframe_regs_vm86(struct pt_regs *regs)
{
	return regs->flags & (X86_VM_MASK | PERF_EFLAGS_VM);
}

bool sframe_current_is_kthread(void)
{
	return current->flags & PF_KTHREAD;
}

/* Inside a uprobe handler: perf_callchain_user() has a rule for that. */
bool sframe_current_in_uprobe(void)
{
#ifdef CONFIG_UPROBES
	return current->utask && current->utask->auprobe;
#else
	return false;
#endif
}

/*
 * Running a KVM guest: perf_guest_state() is a static call modules cannot
 * use; PF_VCPU is set for exactly the time a vCPU task is in guest mode.
 */
bool sframe_current_in_guest(void)
{
	return current->flags & PF_VCPU;
}

void sframe_ratelimit_init(struct ratelimit_state *rs, int interval_ms, int burst)
{
	ratelimit_state_init(rs, msecs_to_jiffies(interval_ms), burst);
}

struct mmu_notifier *sframe_mmu_notifier_get(const struct mmu_notifier_ops *ops,
					     struct mm_struct *mm)
{
	return mmu_notifier_get(ops, mm);
}

void sframe_cond_resched(void)
{
	cond_resched();
}

/* Other processes: rust/permission.rs. */
#include <linux/dcache.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/string.h>

/*
 * Whether @file is procfs's file @name of the current process, opened on
 * its address space.  Procfs never renames the files of a process
 * directory, so the dentry name is stable while the file is open.
 */
bool sframe_proc_self_file(struct file *file, const char *name)
{
	return file_inode(file)->i_sb->s_magic == PROC_SUPER_MAGIC &&
	       file->private_data == current->mm &&
	       !strcmp(file_dentry(file)->d_name.name, name);
}
