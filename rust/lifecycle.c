// SPDX-License-Identifier: GPL-2.0
/*
 * Registrations that follow the process (rust/lifecycle.rs): the exec and
 * fork tracepoint probes and the task work they queue, which call into the
 * Rust side directly.  Only in sframe_unwind.ko.
 */
#include <linux/binfmts.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/delay.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>

#include "bindings/helpers.h"

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

void sframe_msleep(unsigned int ms)
{
	msleep(ms);
}
