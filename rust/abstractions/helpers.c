// SPDX-License-Identifier: GPL-2.0
/*
 * Out-of-line wrappers for static inline kernel functions that Rust cannot
 * call.  Each is a one-line forward; the Rust side documents the rules.
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/ratelimit.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>

#include "../bindings/helpers.h"

struct mm_struct *sframe_current_mm(void)
{
	return current->mm;
}

/* Unwinder: rust/abstractions/ftrace.rs, rust/unwind/. */
#include <linux/ftrace.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/perf_event.h>
#include <linux/ptrace.h>
#include <linux/sched/task_stack.h>
#include <linux/uaccess.h>
#include <linux/uprobes.h>

unsigned long sframe_ftrace_regs_get_argument(struct ftrace_regs *fregs, unsigned int n)
{
	return ftrace_regs_get_argument(fregs, n);
}

void sframe_ftrace_regs_set_ip(struct ftrace_regs *fregs, unsigned long ip)
{
	ftrace_regs_set_instruction_pointer(fregs, ip);
}

/*
 * Whether @addr lies where modules are loaded: a function there is a
 * module's, not the core kernel's (ftrace filters by name, and a module may
 * have a function of the same name).
 */
bool sframe_in_module_area(unsigned long addr)
{
	return addr >= MODULES_VADDR && addr < MODULES_END;
}

struct pt_regs *sframe_current_user_regs(void)
{
	return task_pt_regs(current);
}

bool sframe_current_is_kthread(void)
{
	return current->flags & PF_KTHREAD;
}

/*
 * current->mm if the hooks may walk the current task, in one call: NULL
 * for a kernel thread, inside a uprobe handler (perf_callchain_user() has
 * a rule for that), and while the task runs a KVM guest (the original
 * reports nothing for guest samples; perf_guest_state() is a static call
 * modules cannot use, and PF_VCPU is set for exactly the time a vCPU task
 * is in guest mode).
 */
struct mm_struct *sframe_current_walkable_mm(void)
{
	if (current->flags & (PF_KTHREAD | PF_VCPU))
		return NULL;
#ifdef CONFIG_UPROBES
	if (current->utask && current->utask->auprobe)
		return NULL;
#endif
	return current->mm;
}

/*
 * Page faults may be taken here: task context (not NMI, hard or soft
 * interrupt) without pagefault_disable().  Both are macros or inlines.
 */
bool sframe_may_fault(void)
{
	return in_task() && !pagefault_disabled();
}

/* preemptible() is a macro: false without CONFIG_PREEMPT_COUNT. */
bool sframe_preemptible(void)
{
	return preemptible();
}

void sframe_might_fault(void)
{
	might_fault();
}

/*
 * The sample path's window on user memory (rust/abstractions/user_mem.rs):
 * page faults stay disabled from open to close, as around perf's own
 * frame-pointer walk.  Open says whether user memory may be read with the
 * plain reads below (the architecture's answer, for a walk whose user SP
 * is @probe); where not, the walk reads through
 * sframe_read_user_checked(), which checks again for every read.
 */
bool sframe_user_window_open(unsigned long probe)
{
	bool okay = sframe_arch_user_access_okay(probe);

	pagefault_disable();
	return okay;
}

void sframe_user_window_close(void)
{
	pagefault_enable();
}

/*
 * Reads @len bytes at user address @addr into @dst, inside the window:
 * only a user range, never faulting a page in.  Returns the bytes not
 * read.
 */
unsigned long sframe_read_user_inatomic(void *dst, unsigned long addr, unsigned long len)
{
	const void __user *src = (const void __user *)addr;

	if (!access_ok(src, len))
		return len;
	return __copy_from_user_inatomic(dst, src, len);
}

/*
 * The word at user address @addr into @word, inside the window (or where
 * page faults are allowed: a fault then pages the word in): with
 * get_user(), whose own range check is the whole check (x86-64 clamps a
 * kernel address to a guard page, with no speculation barrier; arm64's
 * __get_user() is get_user() and checks the range itself, so a check
 * here would be made twice).  Returns 0, or -EFAULT if it is not
 * readable.
 */
int sframe_read_user_word(unsigned long addr, u64 *word)
{
	const u64 __user *p = (const u64 __user *)addr;

	return get_user(*word, p) ? -EFAULT : 0;
}

/*
 * The words at user addresses @a and @b into @words[0] and @words[1],
 * inside the window (or where page faults are allowed): both in one user
 * access section, as perf's own walk reads a frame record with two
 * __get_user() calls, but with one speculation barrier and no call per
 * word.  Returns 0, or -EFAULT if either is not readable.
 */
int sframe_read_user_words(unsigned long a, unsigned long b, u64 *words)
{
	const u64 __user *pa = (const u64 __user *)a;
	const u64 __user *pb = (const u64 __user *)b;
	u64 wa, wb;

	if (!access_ok(pb, sizeof(u64)) || !user_read_access_begin(pa, sizeof(u64)))
		return -EFAULT;
	unsafe_get_user(wa, pa, fault);
	unsafe_get_user(wb, pb, fault);
	user_read_access_end();
	words[0] = wa;
	words[1] = wb;
	return 0;
fault:
	user_read_access_end();
	return -EFAULT;
}

/*
 * One past the highest user address: 2^47 or 2^56 less a guard page,
 * depending on whether this machine runs with 5-level paging.
 */
unsigned long sframe_task_size_max(void)
{
	return TASK_SIZE_MAX;
}

void sframe_ratelimit_init(struct ratelimit_state *rs, int interval_ms, int burst)
{
	ratelimit_state_init(rs, msecs_to_jiffies(interval_ms), burst);
}

void sframe_cond_resched(void)
{
	cond_resched();
}

void sframe_msleep(unsigned int ms)
{
	msleep(ms);
}

/*
 * Whether reads of @vma's file are served by a process (FUSE, fusermount
 * being set-user-ID): such a server can stop answering, and FUSE without
 * async reads does even its readahead in the caller, FOLL_NOWAIT or not.
 */
static bool sframe_user_served(struct vm_area_struct *vma)
{
	return vma && vma->vm_file &&
	       !strncmp(file_inode(vma->vm_file)->i_sb->s_type->name, "fuse", 4);
}

/*
 * Reads @len bytes at @addr of @mm into @buf without waiting for I/O
 * (rust/abstractions/nowait_mem.rs): a page that must be read from its file
 * has its read started (FOLL_NOWAIT) and -EAGAIN is returned, so that the
 * caller can wait in a way it can abandon.  -EFAULT where nothing is
 * mapped readable, -EINTR if a fatal signal came while waiting for the
 * mmap_lock, -ESHUTDOWN if the module is being unloaded; otherwise @len.
 *
 * A page of a file that a process serves (sframe_user_served()) may still
 * be read here, waiting for that process: the module is pinned meanwhile,
 * so that rmmod is refused at once ("in use") instead of waiting for it.
 */
long sframe_read_user_nowait(struct mm_struct *mm, unsigned long addr, void *buf,
			     unsigned long len)
{
	unsigned long done = 0;
	bool pinned = false;
	long ret = 0;

	if (mmap_read_lock_killable(mm))
		return -EINTR;
	while (done < len) {
		unsigned long at = addr + done;
		unsigned long off = offset_in_page(at);
		unsigned long n = min(len - done, PAGE_SIZE - off);
		struct page *page;
		long got;

		if (!pinned && sframe_user_served(vma_lookup(mm, at))) {
			if (!try_module_get(THIS_MODULE)) {
				ret = -ESHUTDOWN;
				break;
			}
			pinned = true;
		}
		got = get_user_pages_remote(mm, at, 1, FOLL_NOWAIT, &page, NULL);
		if (got != 1) {
			ret = (got == 0 || got == -EBUSY || got == -EAGAIN) ? -EAGAIN : -EFAULT;
			break;
		}
		memcpy_from_page(buf + done, page, off, n);
		put_page(page);
		done += n;
	}
	mmap_read_unlock(mm);
	if (pinned)
		module_put(THIS_MODULE);
	return ret ? ret : (long)done;
}

/*
 * Counters added to in any context, NMI included, one set per CPU
 * (rust/abstractions/percpu_counters.rs): a CPU adds to its own set, so
 * the walks of different CPUs share no cache line; a reader sums every
 * possible CPU's, as vmstat's event counters are read.
 */
#include <linux/percpu.h>

struct sframe_percpu_counters {
	u64 n[SFRAME_PERCPU_COUNTERS];
};
static DEFINE_PER_CPU(struct sframe_percpu_counters, sframe_percpu_counters);

/*
 * The set of the CPU this runs on, for atomic adds: raw_cpu_ptr(), as a
 * preemptible caller that moves to another CPU before it adds still adds
 * atomically, to the set it found.
 */
u64 *sframe_percpu_counters_here(void)
{
	return raw_cpu_ptr(&sframe_percpu_counters)->n;
}

void sframe_percpu_counters_read(u64 *out, unsigned int count)
{
	unsigned int i, slots = min_t(unsigned int, count, SFRAME_PERCPU_COUNTERS);
	int cpu;

	for (i = 0; i < count; i++)
		out[i] = 0;
	for_each_possible_cpu(cpu) {
		const struct sframe_percpu_counters *c =
			per_cpu_ptr(&sframe_percpu_counters, cpu);

		for (i = 0; i < slots; i++)
			out[i] += READ_ONCE(c->n[i]);
	}
}

/* The registry's RCU maple tree (rust/abstractions/rcu_maple.rs). */
#include <linux/maple_tree.h>

/*
 * mtree_erase(), and whether the entry it returns really left the tree:
 * before 7.x, mas_erase() returned the entry but left it in place when it
 * could not allocate.  Checked under the tree lock, so no other writer comes
 * between the erase and the check.
 */
void *sframe_mt_erase(struct maple_tree *mt, unsigned long index, bool *erased)
{
	MA_STATE(mas, mt, index, index);
	void *entry;

	mtree_lock(mt);
	entry = mas_erase(&mas);
	*erased = true;
	if (entry) {
		mas_set(&mas, index);
		*erased = mas_walk(&mas) != entry;
	}
	mtree_unlock(mt);
	return entry;
}

/*
 * Empties a tree without allocating: calls take() on every entry under the
 * tree lock, then frees the nodes (through RCU in RCU mode) under the same
 * lock, so no other writer sees a half-emptied tree.  The loop is bounded by
 * the tree's size, which the module limits (max_sections_per_mm).
 */
void sframe_mt_take_all(struct maple_tree *mt, void (*take)(void *entry, void *arg), void *arg)
{
	MA_STATE(mas, mt, 0, 0);
	void *entry;

	mtree_lock(mt);
	mas_for_each(&mas, entry, ULONG_MAX)
		take(entry, arg);
	__mt_destroy(mt);
	mtree_unlock(mt);
}

/* Registry accounting (rust/abstractions/keyed_hash.rs, cred.rs). */
#include <linux/cred.h>
#include <linux/siphash.h>
#include <linux/user_namespace.h>

u64 sframe_siphash(const void *data, size_t len, u64 k0, u64 k1)
{
	const siphash_key_t key = { { k0, k1 } };

	return siphash(data, len, &key);
}

/*
 * The user that @cred's resources are charged to: its real user ID in the
 * initial user namespace, or, for a task in a user namespace, the owner of
 * the outermost namespace above it: the real user who made the
 * container, however many IDs are mapped into it.
 */
static u32 sframe_account_of(const struct cred *cred)
{
	const struct user_namespace *ns = cred->user_ns;

	if (ns == &init_user_ns)
		return __kuid_val(cred->uid);
	while (ns->parent && ns->parent != &init_user_ns)
		ns = ns->parent;
	return __kuid_val(ns->owner);
}

u32 sframe_current_account(void)
{
	return sframe_account_of(current_cred());
}

/*
 * The account of the process that holds @mm: its owner task's (the
 * memory cgroup's notion of the mm's owner), or the caller's where the
 * kernel keeps no owner (no CONFIG_MEMCG) or it has none left.
 */
u32 sframe_mm_account(struct mm_struct *mm)
{
#ifdef CONFIG_MEMCG
	struct task_struct *owner;
	u32 account;

	rcu_read_lock();
	owner = rcu_dereference(mm->owner);
	if (owner) {
		account = sframe_account_of(__task_cred(owner));
		rcu_read_unlock();
		return account;
	}
	rcu_read_unlock();
#endif
	return sframe_current_account();
}

/*
 * Fault injection for the KUnit tests: fail the Nth fault-injection site
 * the current task reaches (as /proc/self/fail-nth does).  False if the
 * kernel has no CONFIG_FAULT_INJECTION.
 */
bool sframe_set_fail_nth(unsigned int n)
{
#ifdef CONFIG_FAULT_INJECTION
	WRITE_ONCE(current->fail_nth, n);
	return true;
#else
	return false;
#endif
}

unsigned int sframe_fail_nth(void)
{
#ifdef CONFIG_FAULT_INJECTION
	return READ_ONCE(current->fail_nth);
#else
	return 0;
#endif
}

/*
 * Without CONFIG_TASKS_RCU (kernels without preemption) this is a macro
 * for synchronize_rcu(), which then waits long enough: a task can only
 * leave a CPU in module text by switching voluntarily.
 */
void sframe_synchronize_rcu_tasks(void)
{
	synchronize_rcu_tasks();
}

/*
 * SRCU for a kernel crate without kernel::sync::Srcu (rust/abstractions/compat.rs):
 * init_srcu_struct() is a macro under lockdep, the read side is inline.
 */
#include <linux/srcu.h>

int sframe_init_srcu_struct(struct srcu_struct *ssp, const char *name,
			    struct lock_class_key *key)
{
#ifdef CONFIG_DEBUG_LOCK_ALLOC
	return __init_srcu_struct(ssp, name, key);
#else
	return init_srcu_struct(ssp);
#endif
}

int sframe_srcu_read_lock(struct srcu_struct *ssp)
{
	return srcu_read_lock(ssp);
}

void sframe_srcu_read_unlock(struct srcu_struct *ssp, int idx)
{
	srcu_read_unlock(ssp, idx);
}

/* Other processes: rust/device/permission.rs. */
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

