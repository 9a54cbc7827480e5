// SPDX-License-Identifier: GPL-2.0
/*
 * The end-to-end workload for perf callchains: built with
 * -O2 -fomit-frame-pointer -Wa,--gsframe, so frame-pointer unwinding breaks
 * and SFrame unwinding does not.  Each phase spins in a leaf function with
 * a distinct name under a known call path (tests/perf/chains.py holds the
 * expected paths):
 *
 *   chain      eight chain_* functions
 *   bigframe   frames of 256 B and 40 KiB
 *   vla        a variable-length array (CFA from the frame pointer)
 *   recurse    64 levels of recursion (depth=N: N levels)
 *   plt        into libsframe-workload.so through the PLT
 *   signal     a SIGPROF handler, interrupting user code
 *   threads    four threads from their start routine
 *
 *   sframe-workload [SECONDS [PHASE...] [depth=N]]   (default: 2 s, every phase)
 *
 * depth=N (1 to 1000) sets the recursion of the recurse phase: a sample
 * in its leaf has a chain of N + 6 frames, libc's three included.
 *
 * At start it registers the SFrame section of every loaded object that has
 * one (PT_GNU_SFRAME) with /dev/sframe, as a loader would; without the
 * module it says so and runs anyway (the baseline).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sframe-unwind.h"
#include "sframe-workload.h"

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

#define NOIPA __attribute__((noipa))

static int dev = -1;
static int registered;

static int register_object(struct dl_phdr_info *info, size_t size, void *data)
{
	const ElfW(Phdr) *sframe = NULL, *text = NULL;
	struct sframe_register r;

	(void)size;
	(void)data;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_GNU_SFRAME)
			sframe = ph;
		else if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X))
			text = ph;
	}
	if (!sframe || !text)
		return 0;
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.sframe_data = info->dlpi_addr + sframe->p_vaddr;
	r.sframe_len = sframe->p_memsz;
	r.sframe_addr = r.sframe_data;
	r.text_start = info->dlpi_addr + text->p_vaddr;
	r.text_end = r.text_start + text->p_memsz;
	/* EEXIST: the module registered the program itself at exec. */
	if (ioctl(dev, SFRAME_IOC_REGISTER, &r) && errno != EEXIST)
		fprintf(stderr, "sframe-workload: register %s: %s\n",
			info->dlpi_name[0] ? info->dlpi_name : "(main)", strerror(errno));
	else
		registered++;
	return 0;
}

static void register_sframes(void)
{
	dev = open("/dev/sframe", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		fprintf(stderr, "sframe-workload: no /dev/sframe: running unregistered\n");
		return;
	}
	dl_iterate_phdr(register_object, NULL);
	/* Registrations belong to the mm: the file may go (and the module with it). */
	close(dev);
	fprintf(stderr, "sframe-workload: %d objects registered\n", registered);
}

/* Phase timing: a phase runs until its deadline. */
static double phase_seconds = 0.3;
static struct timespec deadline;

static void start_phase(void)
{
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += (time_t)phase_seconds;
	deadline.tv_nsec += (long)((phase_seconds - (time_t)phase_seconds) * 1e9);
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
}

static int phase_over(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline.tv_sec ||
	       (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
}

volatile unsigned long sink;
/* Leaf calls completed: the throughput scripts/bench compares. */
static unsigned long work;

/* The work every leaf does: no calls, so the sample's PC stays in the leaf. */
#define SPIN(n) do { for (unsigned long i_ = 0; i_ < (n); i_++) sink += i_ ^ (sink >> 3); } while (0)
#define SPIN_ITERS 200000UL

/* chain: eight functions deep. */
NOIPA unsigned long chain_leaf_spin(unsigned long n) { SPIN(n); return sink; }
NOIPA unsigned long chain_hotel(unsigned long n) { return chain_leaf_spin(n) + 1; }
NOIPA unsigned long chain_golf(unsigned long n) { return chain_hotel(n) + 1; }
NOIPA unsigned long chain_foxtrot(unsigned long n) { return chain_golf(n) + 1; }
NOIPA unsigned long chain_echo(unsigned long n) { return chain_foxtrot(n) + 1; }
NOIPA unsigned long chain_delta(unsigned long n) { return chain_echo(n) + 1; }
NOIPA unsigned long chain_charlie(unsigned long n) { return chain_delta(n) + 1; }
NOIPA unsigned long chain_bravo(unsigned long n) { return chain_charlie(n) + 1; }
NOIPA unsigned long chain_alpha(unsigned long n) { return chain_bravo(n) + 1; }

NOIPA void phase_chain(void)
{
	start_phase();
	while (!phase_over()) {
		chain_alpha(SPIN_ITERS);
		work++;
	}
}

/* bigframe: a 256-byte frame above a 40 KiB one. */
NOIPA unsigned long bigframe_leaf_spin(unsigned long n) { SPIN(n); return sink; }

NOIPA unsigned long frame_40k(unsigned long n)
{
	volatile char buf[40 * 1024];

	buf[0] = (char)n;
	buf[sizeof(buf) - 1] = (char)n;
	return bigframe_leaf_spin(n) + buf[0] + buf[sizeof(buf) - 1];
}

NOIPA unsigned long frame_256b(unsigned long n)
{
	volatile char buf[256];

	buf[0] = (char)n;
	buf[sizeof(buf) - 1] = (char)n;
	return frame_40k(n) + buf[0] + buf[sizeof(buf) - 1];
}

NOIPA void phase_bigframe(void)
{
	start_phase();
	while (!phase_over()) {
		frame_256b(SPIN_ITERS);
		work++;
	}
}

/* vla: the compiler keeps a frame pointer and the CFA is based on it. */
NOIPA unsigned long vla_leaf_spin(unsigned long n) { SPIN(n); return sink; }

NOIPA unsigned long vla_frame(unsigned long n, unsigned long len)
{
	volatile char buf[len];

	buf[0] = (char)n;
	buf[len - 1] = (char)n;
	return vla_leaf_spin(n) + buf[0] + buf[len - 1];
}

NOIPA void phase_vla(void)
{
	start_phase();
	while (!phase_over()) {
		vla_frame(SPIN_ITERS, 100 + (sink & 0xff));
		work++;
	}
}

/* recurse: 64 levels, or depth=N. */
static int recurse_depth = RECURSE_DEPTH;

NOIPA unsigned long recurse_leaf_spin(unsigned long n) { SPIN(n); return sink; }

NOIPA unsigned long recurse_deep(unsigned long n, int depth)
{
	/* Read after the call: GCC would otherwise turn the recursion into a loop. */
	volatile int level = depth;

	if (depth <= 1)
		return recurse_leaf_spin(n) + level;
	return recurse_deep(n, depth - 1) + level;
}

NOIPA void phase_recurse(void)
{
	start_phase();
	while (!phase_over()) {
		recurse_deep(SPIN_ITERS, recurse_depth);
		work++;
	}
}

/* plt: the leaf is in the shared library. */
NOIPA void phase_plt(void)
{
	start_phase();
	while (!phase_over()) {
		workload_lib_entry(SPIN_ITERS);
		work++;
	}
}

/*
 * signal: SIGPROF every 2 ms of CPU time interrupts signal_interrupted_spin.
 *
 * While the timer is armed the interrupted code must be ours alone: libc
 * has no SFrame, so a handler that interrupts clock_gettime() (or a
 * process stuck there while handlers run back to back, as on a slow
 * guest where one handler takes longer than the interval) has a chain
 * that honestly ends in libc.  So the handler, not the interrupted loop,
 * watches the deadline; the loop reads the clock only when no signal
 * came during a whole bounded spin (a timer that never fires).
 */
static volatile unsigned long signals;
static volatile int signal_phase_over;
/*
 * Iterations of the handler's spin: at least about 2 ms (handler_spin()).
 * The timer's signal comes with a tick, and perf's cpu-clock samples with
 * an hrtimer whose phase against the ticks can stay the same for a whole
 * run: a handler shorter than perf's period (1 ms at -F 1000) could then
 * never be sampled (398 samples of this phase in one run of Debian's
 * arm64 kernel, every one in signal_interrupted_spin), and no walk would
 * cross a signal frame.  One longer than two periods always is.
 */
static unsigned long signal_spin = SPIN_ITERS / 4;

NOIPA unsigned long signal_leaf_spin(unsigned long n) { SPIN(n); return sink; }
/* The same spin for handler_spin(): its samples have phase_signal for a
 * caller, a path tests/perf/chains.py expects of no leaf it knows. */
NOIPA unsigned long signal_calibrate_spin(unsigned long n) { SPIN(n); return sink; }

/* Before the timer is armed (the clock is libc's): how many SPIN
 * iterations take 2 ms here, at least SPIN_ITERS / 4. */
static void handler_spin(void)
{
	struct timespec a, b;
	unsigned long n = SPIN_ITERS / 16;
	double ms;

	for (int i = 0; i < 20; i++) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		signal_calibrate_spin(n);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ms = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
		if (ms >= 1.0) {
			if (n * 2.0 / ms > signal_spin)
				signal_spin = (unsigned long)(n * 2.0 / ms);
			return;
		}
		n *= 2;
	}
}

NOIPA void signal_handler(int sig)
{
	(void)sig;
	signal_leaf_spin(signal_spin);
	signals++;
	if (phase_over())
		signal_phase_over = 1;
}

/*
 * setitimer() as one system call made here, not through libc.  A timer
 * that expires while its own arming or disarming call is in the kernel
 * (a tick that charges its whole length to the task right after the
 * arming, or the last period running out as the phase ends) has its
 * signal delivered as that call returns: into libc's setitimer(), which
 * has no SFrame, where a walk honestly stops being sure of its frames
 * (the arm64 module's frame-pointer step there skipped phase_signal and
 * main: 6 of 288 samples of one run).  Made inline, the signal
 * interrupts its caller, signal_interrupted_spin() (below).
 */
static inline long raw_setitimer(int which, const struct itimerval *value)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_setitimer), "D"((long)which), "S"(value), "d"(0L)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_setitimer;
	register long x0 __asm__("x0") = which;
	register long x1 __asm__("x1") = (long)value;
	register long x2 __asm__("x2") = 0;

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
	return x0;
#else
	return setitimer(which, value, NULL);
#endif
}

/*
 * The code the signals interrupt, the timer armed and disarmed here: every
 * signal of the phase is generated while this function runs (one pending
 * at the disarming is delivered as that call returns, here too), so the
 * frame below the trampoline is this one, called by phase_signal, in every
 * recording.  When the loop and the timer's calls were phase_signal's, a
 * signal could land in phase_signal itself (a tick right after the arming,
 * the last period as the phase ended, a signal between two calls of this
 * function), and with the handlers back to back (the handler spins at
 * least as long as the timer's interval) such a landing kept phase_signal
 * below the trampoline for tens of samples: its share then differed
 * between two recordings of the same program by timing alone (21 of 133
 * samples with -g in one CI run, 2 of 12 runs of the handler under
 * --call-graph dwarf in another), which tests/perf/chains.py's comparison
 * with DWARF could not tell from an unwinder's error.
 */
NOIPA void signal_interrupted_spin(void)
{
	static const struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	static const struct itimerval off = { { 0, 0 }, { 0, 0 } };

	raw_setitimer(ITIMER_PROF, &it);
	while (!signal_phase_over) {
		unsigned long before = signals;

		for (unsigned long i = 0; signals == before && !signal_phase_over && i < (1UL << 24); i++)
			sink += sink >> 5;
		if (signals == before && phase_over())
			break;
	}
	raw_setitimer(ITIMER_PROF, &off);
}

NOIPA void phase_signal(void)
{
	struct sigaction sa;
	unsigned long start = signals;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = signal_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGPROF, &sa, NULL);
	handler_spin();
	signal_phase_over = 0;
	start_phase();
	signal_interrupted_spin();
	if (signals == start)
		fprintf(stderr, "sframe-workload: no signal was delivered\n");
}

/* threads: four of them, each from its start routine. */
NOIPA unsigned long thread_leaf_spin(unsigned long n) { SPIN(n); return sink; }
NOIPA unsigned long thread_work(unsigned long n) { return thread_leaf_spin(n) + 1; }

NOIPA void *thread_start(void *arg)
{
	(void)arg;
	while (!phase_over()) {
		thread_work(SPIN_ITERS);
		__atomic_fetch_add(&work, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

NOIPA void phase_threads(void)
{
	pthread_t t[4];

	start_phase();
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, thread_start, NULL)) {
			perror("pthread_create");
			exit(1);
		}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

static const struct {
	const char *name;
	void (*run)(void);
} phases[] = {
	{ "chain", phase_chain },
	{ "bigframe", phase_bigframe },
	{ "vla", phase_vla },
	{ "recurse", phase_recurse },
	{ "plt", phase_plt },
	{ "signal", phase_signal },
	{ "threads", phase_threads },
};
#define NPHASES (sizeof(phases) / sizeof(phases[0]))

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	int chosen = 0;

	for (int j = 2; j < argc; j++) {
		if (!strncmp(argv[j], "depth=", 6)) {
			recurse_depth = atoi(argv[j] + 6);
			if (recurse_depth < 1 || recurse_depth > 1000) {
				fprintf(stderr, "sframe-workload: depth=%s: not 1 to 1000\n", argv[j] + 6);
				return 2;
			}
		} else {
			chosen++;
		}
	}
	register_sframes();
	phase_seconds = seconds / (chosen ? chosen : (int)NPHASES);
	for (size_t i = 0; i < NPHASES; i++) {
		int run = !chosen;

		for (int j = 2; j < argc; j++)
			run |= !strcmp(argv[j], phases[i].name);
		if (run)
			phases[i].run();
	}
	printf("sframe-workload: done: work %lu signals %lu\n", work, signals);
	return 0;
}
