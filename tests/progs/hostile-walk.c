// SPDX-License-Identifier: GPL-2.0
/*
 * The costliest stack a process can offer the unwinder, for
 * scripts/bench-walk: it registers an SFrame section that gives one 4 KiB
 * block of its own text FRES FREs (two bytes apart, all "CFA = SP + 8,
 * return address at SP"), points its stack pointer at an array whose
 * every word returns just after the last FRE, and spins there.  Every
 * perf sample then walks up the array, and every caller's lookup decodes
 * all FRES FREs, until a limit of the walk ends it.
 *
 *   hostile-walk SECONDS FRES
 *
 * The spinning child is killed after SECONDS; prints "frames F" (the
 * frames its stack offers).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include "sframe-unwind.h"

#define TEXT_SIZE	4096
#define SPIN_OFF	3072
#define MAX_FRES	1500
#define STACK_WORDS	8192

/* The block: never executed but at SPIN_OFF, where the stack switches. */
extern char hw_text[];
extern void hw_spin(uint64_t *sp) __attribute__((noreturn));
asm(".pushsection .text\n"
    ".p2align 12\n"
    "hw_text:\n"
    ".fill 3072, 1, 0xcc\n"
    "hw_spin:\n"
    "	mov %rdi, %rsp\n"
    "1:	jmp 1b\n"
    ".fill 4096 - 3072 - 5, 1, 0xcc\n"
    ".popsection\n");

static uint8_t section[28 + 20 + 4 * MAX_FRES];
static uint64_t stack[STACK_WORDS];

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* SFrame V2, little endian, one FDE over the block with `fres` FREs. */
static size_t build(unsigned int fres)
{
	uint8_t *h = section, *fde = section + 28, *fre = section + 48;
	int32_t start = (int32_t)((intptr_t)hw_text - (intptr_t)section);

	put16(h, 0xdee2);
	h[2] = 2;		/* version */
	h[3] = 1;		/* SFRAME_F_FDE_SORTED */
	h[4] = 3;		/* AMD64 little endian */
	h[5] = 0;		/* no fixed FP offset */
	h[6] = (uint8_t)-8;	/* RA at CFA - 8 */
	h[7] = 0;		/* no auxiliary header */
	put32(h + 8, 1);	/* FDEs */
	put32(h + 12, fres);	/* FREs */
	put32(h + 16, 4 * fres);
	put32(h + 20, 0);	/* FDE offset */
	put32(h + 24, 20);	/* FRE offset */
	put32(fde, (uint32_t)start);
	put32(fde + 4, TEXT_SIZE);
	put32(fde + 8, 0);
	put32(fde + 12, fres);
	fde[16] = 1;		/* 2-byte FRE starts, PCINC */
	fde[17] = 0;
	put16(fde + 18, 0);
	for (unsigned int i = 0; i < fres; i++) {
		put16(fre + 4 * i, (uint16_t)(2 * i));
		fre[4 * i + 2] = 0x03;	/* CFA = SP + off, one 1-byte word */
		fre[4 * i + 3] = 8;
	}
	return 48 + 4 * fres;
}

int main(int argc, char **argv)
{
	unsigned int seconds = argc > 1 ? atoi(argv[1]) : 4;
	unsigned int fres = argc > 2 ? atoi(argv[2]) : 512;
	pid_t child;

	if (fres < 1 || fres > MAX_FRES || 2 * fres > SPIN_OFF) {
		fprintf(stderr, "hostile-walk: FRES must be 1..%d\n", SPIN_OFF / 2);
		return 2;
	}
	printf("frames %d\n", STACK_WORDS);
	fflush(stdout);
	child = fork();
	if (child < 0) {
		perror("hostile-walk: fork");
		return 1;
	}
	if (child == 0) {
		struct sframe_register r;
		int dev = open("/dev/sframe", O_RDWR | O_CLOEXEC);

		memset(&r, 0, sizeof(r));
		r.size = sizeof(r);
		r.sframe_data = (uintptr_t)section;
		r.sframe_len = build(fres);
		r.sframe_addr = (uintptr_t)section;
		r.text_start = (uintptr_t)hw_text;
		r.text_end = (uintptr_t)hw_text + TEXT_SIZE;
		if (dev < 0 || ioctl(dev, SFRAME_IOC_REGISTER, &r)) {
			perror("hostile-walk: register");
			_exit(1);
		}
		/* Return addresses just after the last FRE: looked up there. */
		for (int i = 0; i < STACK_WORDS; i++)
			stack[i] = (uintptr_t)hw_text + 2 * (fres - 1) + 1;
		hw_spin(stack);
	}
	sleep(seconds);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	return 0;
}
