// SPDX-License-Identifier: GPL-2.0
/*
 * Registrations that follow the process (rust/lifecycle/): the exec, fork
 * and address-space teardown tracepoint probes, the task work and the
 * registry's maintenance work they queue, which call into the Rust side
 * directly.  Only in sframe_unwind.ko.
 */
#include <linux/binfmts.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/delay.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>

#include "../bindings/helpers.h"

struct sframe_tracepoint_lookup {
	const char *name;
	struct tracepoint *tp;
};

static void sframe_tracepoint_match(struct tracepoint *tp, void *priv)
{
	struct sframe_tracepoint_lookup *l = priv;

	if (!strcmp(tp->name, l->name))
		l->tp = tp;
}

/*
 * The sched tracepoints are not exported: find them by name in the
 * kernel's own table, through the exported iterator.
 */
static struct tracepoint *sframe_tracepoint(const char *name)
{
	struct sframe_tracepoint_lookup l = { .name = name };

	for_each_kernel_tracepoint(sframe_tracepoint_match, &l);
	return l.tp;
}

/*
 * After copy_process(), before wake_up_new_task(): the child has not run.
 * Preemption is off.  Kernel threads have no mm; CLONE_VM children share
 * the parent's, whose registrations they see already.
 */
static void sframe_fork_probe(void *data, struct task_struct *parent,
			      struct task_struct *child)
{
	if ((child->flags & PF_KTHREAD) || !child->mm || !parent->mm ||
	    child->mm == parent->mm)
		return;
	sframe_on_fork(parent->mm, child);
}

/*
 * In the task that exec'd, with its new mm, before it returns to user
 * space.  Preemption is off.
 */
static void sframe_exec_probe(void *data, struct task_struct *p, pid_t old_pid,
			      struct linux_binprm *bprm)
{
	if (p == current && p->mm && !(p->flags & PF_KTHREAD))
		sframe_on_exec();
}

static struct tracepoint *sframe_tp_fork, *sframe_tp_exec;

int sframe_lifecycle_probes_register(void)
{
	int ret;

	sframe_tp_fork = sframe_tracepoint("sched_process_fork");
	sframe_tp_exec = sframe_tracepoint("sched_process_exec");
	if (!sframe_tp_fork || !sframe_tp_exec)
		return -ENOENT;
	ret = tracepoint_probe_register(sframe_tp_fork, sframe_fork_probe, NULL);
	if (ret)
		return ret;
	ret = tracepoint_probe_register(sframe_tp_exec, sframe_exec_probe, NULL);
	if (ret) {
		tracepoint_probe_unregister(sframe_tp_fork, sframe_fork_probe, NULL);
		tracepoint_synchronize_unregister();
	}
	return ret;
}

/* After this returns no probe runs, and none will. */
void sframe_lifecycle_probes_unregister(void)
{
	tracepoint_probe_unregister(sframe_tp_exec, sframe_exec_probe, NULL);
	tracepoint_probe_unregister(sframe_tp_fork, sframe_fork_probe, NULL);
	tracepoint_synchronize_unregister();
}

/*
 * At the end of exit_mmap(): the mm's last user is gone and its mappings
 * with it; mmap_lock is held for writing and preemption is off.  Every
 * mm_struct passes here before it can be freed.
 */
static void sframe_exit_mmap_probe(void *data, struct mm_struct *mm)
{
	sframe_on_exit_mmap(mm);
}

static struct tracepoint *sframe_tp_exit_mmap;

int sframe_teardown_probe_register(void)
{
	sframe_tp_exit_mmap = sframe_tracepoint("exit_mmap");
	if (!sframe_tp_exit_mmap)
		return -ENOENT;
	return tracepoint_probe_register(sframe_tp_exit_mmap, sframe_exit_mmap_probe, NULL);
}

/* After this returns the probe does not run, and will not. */
void sframe_teardown_probe_unregister(void)
{
	tracepoint_probe_unregister(sframe_tp_exit_mmap, sframe_exit_mmap_probe, NULL);
	tracepoint_synchronize_unregister();
}

/*
 * The registry's maintenance (rust/registry/maintenance.rs): address spaces torn down
 * or left without sections are forgotten in process context, where the
 * registry's lock may be taken.
 */
static void sframe_maintenance_fn(struct work_struct *work)
{
	sframe_on_maintenance();
}

static DECLARE_WORK(sframe_maintenance_work, sframe_maintenance_fn);

/* Any context but NMI. */
void sframe_maintenance_schedule(void)
{
	schedule_work(&sframe_maintenance_work);
}

/* Waits until a maintenance scheduled before has finished. */
void sframe_maintenance_flush(void)
{
	flush_work(&sframe_maintenance_work);
}

/*
 * The range and address space of @vma, a mapping being freed, and whether
 * that address space still has users (munmap(), mremap(), a mapping
 * replaced, merged or split) rather than being torn down by exit_mmap().
 */
bool sframe_vma_freed(const struct vm_area_struct *vma, struct mm_struct **mm,
		      unsigned long *start, unsigned long *end)
{
	*mm = vma->vm_mm;
	*start = vma->vm_start;
	*end = vma->vm_end;
	return *mm && atomic_read(&(*mm)->mm_users) > 0;
}

/*
 * Whether every byte of [@start, @end) is still mapped as @vma, a mapping
 * being freed, mapped it: from the same file at the same offsets, or, for
 * anonymous memory, from the same anon_vma at the same page offsets (a
 * non-NULL anon_vma is shared only by mappings split from one another).
 * True when @vma was merged into a neighbour (mprotect() split and
 * restored), or is a copy that was never in the tree (a fork whose
 * dup_mmap() failed frees its copy with vm_mm still the parent's): not an
 * unmap.  The caller of vm_area_free() holds the mm's mmap_lock, which
 * find_vma() needs.
 */
bool sframe_vma_range_kept(const struct vm_area_struct *vma, unsigned long start,
			   unsigned long end)
{
	struct mm_struct *mm = vma->vm_mm;
	unsigned long bias = vma->vm_start - (vma->vm_pgoff << PAGE_SHIFT);

	if (!rwsem_is_locked(&mm->mmap_lock))
		return false;
	if (!vma->vm_file && !vma->anon_vma)
		return false;
	while (start < end) {
		struct vm_area_struct *cur = find_vma(mm, start);

		if (!cur || cur == vma || cur->vm_start > start ||
		    cur->vm_file != vma->vm_file ||
		    (!vma->vm_file && cur->anon_vma != vma->anon_vma) ||
		    cur->vm_start - (cur->vm_pgoff << PAGE_SHIFT) != bias)
			return false;
		start = cur->vm_end;
	}
	return true;
}

static void sframe_task_work_fn(struct callback_head *head)
{
	sframe_on_task_work(head);
}

/*
 * Runs sframe_on_task_work(@head) in @task before it next returns to user
 * space, or as it exits; -ESRCH if it is past running task works.
 */
int sframe_task_work_add(struct task_struct *task, struct callback_head *head)
{
	init_task_work(head, sframe_task_work_fn);
	return task_work_add(task, head, TWA_RESUME);
}

/* The value of @type in @mm's auxiliary vector (as exec built it), or 0. */
unsigned long sframe_mm_auxv(struct mm_struct *mm, unsigned long type)
{
	unsigned int i;

	for (i = 0; i + 1 < ARRAY_SIZE(mm->saved_auxv) && mm->saved_auxv[i] != AT_NULL; i += 2)
		if (mm->saved_auxv[i] == type)
			return mm->saved_auxv[i + 1];
	return 0;
}

bool sframe_current_exiting(void)
{
	return current->flags & PF_EXITING;
}

