/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Out-of-line wrappers for static inline kernel functions:
 * rust/abstractions/helpers.c, and rust/arch/<arch>/helpers.c below.
 */
#ifndef SFRAME_HELPERS_H
#define SFRAME_HELPERS_H

#include <linux/types.h>

struct mm_struct;
struct ratelimit_state;

/* current->mm, or NULL for kernel threads. */
struct mm_struct *sframe_current_mm(void);

/* Unwinder (rust/abstractions/ftrace.rs, rust/unwind/). */
struct ftrace_regs;
struct perf_callchain_entry_ctx;
struct pt_regs;

unsigned long sframe_ftrace_regs_get_argument(struct ftrace_regs *fregs, unsigned int n);
void sframe_ftrace_regs_set_ip(struct ftrace_regs *fregs, unsigned long ip);
/* rust/arch/<arch>/helpers.c: the argument registers ftrace restores. */
void sframe_ftrace_regs_set_argument(struct ftrace_regs *fregs, unsigned int n,
				     unsigned long val);
bool sframe_in_module_area(unsigned long addr);
struct pt_regs *sframe_current_user_regs(void);
bool sframe_current_is_kthread(void);
struct mm_struct *sframe_current_walkable_mm(void);
bool sframe_may_fault(void);
bool sframe_preemptible(void);
void sframe_might_fault(void);
bool sframe_user_window_open(unsigned long probe);
void sframe_user_window_close(void);
unsigned long sframe_read_user_inatomic(void *dst, unsigned long addr, unsigned long len);
int sframe_read_user_word(unsigned long addr, u64 *word);
int sframe_read_user_words(unsigned long a, unsigned long b, u64 *words);
unsigned long sframe_task_size_max(void);

/*
 * Counters added to in any context, one set of SFRAME_PERCPU_COUNTERS
 * per CPU (rust/abstractions/percpu_counters.rs).
 */
#define SFRAME_PERCPU_COUNTERS 32
u64 *sframe_percpu_counters_here(void);
void sframe_percpu_counters_read(u64 *out, unsigned int count);

/* ratelimit_state_init() with the interval in milliseconds. */
void sframe_ratelimit_init(struct ratelimit_state *rs, int interval_ms, int burst);

/* cond_resched() is a macro. */
void sframe_cond_resched(void);

/* The RCU maple tree (rust/abstractions/rcu_maple.rs). */
struct maple_tree;
void *sframe_mt_erase(struct maple_tree *mt, unsigned long index, bool *erased);
void sframe_mt_take_all(struct maple_tree *mt, void (*take)(void *entry, void *arg), void *arg);

/* Registry accounting (rust/abstractions/keyed_hash.rs, cred.rs). */
u64 sframe_siphash(const void *data, size_t len, u64 k0, u64 k1);
u32 sframe_current_account(void);
u32 sframe_mm_account(struct mm_struct *mm);

/* Reading another mm without waiting for I/O (rust/abstractions/nowait_mem.rs). */
long sframe_read_user_nowait(struct mm_struct *mm, unsigned long addr, void *buf,
			     unsigned long len);

/* Fault injection for KUnit (current->fail_nth). */
bool sframe_set_fail_nth(unsigned int n);
unsigned int sframe_fail_nth(void);

/* synchronize_rcu_tasks() is a macro without CONFIG_TASKS_RCU. */
void sframe_synchronize_rcu_tasks(void);

/* SRCU for a kernel crate without it (rust/abstractions/compat.rs). */
struct lock_class_key;
struct srcu_struct;

int sframe_init_srcu_struct(struct srcu_struct *ssp, const char *name,
			    struct lock_class_key *key);
int sframe_srcu_read_lock(struct srcu_struct *ssp);
void sframe_srcu_read_unlock(struct srcu_struct *ssp, int idx);

/* Other processes (rust/device/permission.rs). */
struct file;

bool sframe_proc_self_file(struct file *file, const char *name);

/* Registrations that follow the process (rust/lifecycle/). */
struct callback_head;
struct task_struct;

int sframe_lifecycle_probes_register(void);
void sframe_lifecycle_probes_unregister(void);
int sframe_task_work_add(struct task_struct *task, struct callback_head *head);
unsigned long sframe_mm_auxv(struct mm_struct *mm, unsigned long type);
bool sframe_current_exiting(void);
void sframe_msleep(unsigned int ms);

/* Address-space lifetime (rust/registry/, rust/lifecycle/). */
struct vm_area_struct;

int sframe_teardown_probe_register(void);
void sframe_teardown_probe_unregister(void);
void sframe_maintenance_schedule(void);
void sframe_maintenance_flush(void);
bool sframe_vma_freed(const struct vm_area_struct *vma, struct mm_struct **mm,
		      unsigned long *start, unsigned long *end);
bool sframe_vma_range_kept(const struct vm_area_struct *vma, unsigned long start,
			   unsigned long end);

/* Implemented in Rust, called by the C probes and works. */
void sframe_on_fork(struct mm_struct *parent_mm, struct task_struct *child);
void sframe_on_exec(void);
void sframe_on_task_work(struct callback_head *head);
void sframe_on_exit_mmap(struct mm_struct *mm);
void sframe_on_maintenance(void);

/* The architecture's own (rust/arch/<arch>/helpers.c). */
#define SFRAME_REGS_KERNEL 0
#define SFRAME_REGS_USER64 1
#define SFRAME_REGS_USER_OTHER 2
int sframe_regs_mode(struct pt_regs *regs);
bool sframe_arch_user_access_okay(unsigned long probe);
unsigned long sframe_read_user_checked(void *dst, unsigned long addr, unsigned long len);
#ifdef CONFIG_X86_64
bool sframe_current_addr32(void);
#endif
#ifdef CONFIG_ARM64
/* The registers an unwind starts from, copied out of a struct pt_regs. */
struct sframe_arm64_regs {
	unsigned long pc;
	unsigned long sp;
	unsigned long fp;
	unsigned long lr;
};
void sframe_arm64_read_regs(struct pt_regs *regs, struct sframe_arm64_regs *out);
bool sframe_current_compat(void);
#endif

#endif
