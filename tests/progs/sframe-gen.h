/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Valid SFrame V2 sections (little endian, of the architecture this is
 * built for: AMD64 or AArch64) and ELF programs that carry one, built from
 * nothing, for tests/progs/hardening.c.
 *
 * A section describes NFUNC functions of FSIZE bytes each, back to back
 * from FUNC0, for a section mapped at ADDR; each function has FRES_PER
 * FREs, all the row of a function's entry (FRE starts 0, 1, 2, ...): on
 * x86-64 "CFA = SP + 8", return address at CFA - 8 (the header's fixed
 * offset: the call pushed it); on AArch64 "CFA = SP + 0", no offset for
 * the return address, which is still in the link register (the header has
 * no fixed one: AArch64 tracks it per row).  Both are one 1-byte word, so
 * a section's length does not depend on the architecture; the module
 * takes only its own architecture's sections.  A non-zero TAG goes in a
 * 4-byte auxiliary header, which decoders skip: sections of different
 * tags are distinct bytes with the same rows.  The module validates every byte
 * (rust/sframe/src/decoder/validate.rs, Documentation/sframe-format.rst):
 * FDEs sorted and not overlapping, FRE starts increasing inside the
 * function, counts and lengths adding up.
 */
#ifndef SFRAME_GEN_H
#define SFRAME_GEN_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__x86_64__)
#define SFG_ABI		3	/* SFRAME_ABI_AMD64_ENDIAN_LITTLE */
#define SFG_FIXED_RA	(-8)	/* return address at CFA - 8 */
#define SFG_CFA_OFF	8
#elif defined(__aarch64__) && defined(__AARCH64EL__)
#define SFG_ABI		2	/* SFRAME_ABI_AARCH64_ENDIAN_LITTLE */
#define SFG_FIXED_RA	0	/* none: tracked per row */
#define SFG_CFA_OFF	0
#else
#error "sframe-gen.h: SFrame sections for x86-64 and little-endian AArch64 only"
#endif

#define SFG_HEADER	28
#define SFG_FDE		20
#define SFG_FRE		3	/* 1-byte start, info, 1-byte CFA offset */

struct sframe_spec {
	uint64_t addr;		/* where the section is mapped */
	uint64_t func0;		/* the first function */
	uint32_t nfunc;
	uint32_t fsize;		/* bytes per function, at most 255 */
	uint32_t fres_per;	/* FREs per function, at most fsize */
	uint32_t tag;		/* non-zero: a 4-byte auxiliary header */
};

static inline void sfg_put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void sfg_put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void sfg_put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static inline size_t sframe_len(const struct sframe_spec *s)
{
	return SFG_HEADER + (s->tag ? 4 : 0) + (size_t)s->nfunc * SFG_FDE +
	       (size_t)s->nfunc * s->fres_per * SFG_FRE;
}

/* The most functions of FRES_PER FREs that fit in LEN bytes. */
static inline uint32_t sframe_funcs_for(size_t len, uint32_t fres_per, int tagged)
{
	size_t head = SFG_HEADER + (tagged ? 4 : 0);

	return len <= head ? 0 : (uint32_t)((len - head) / (SFG_FDE + (size_t)fres_per * SFG_FRE));
}

/* Writes the section S describes to BUF (sframe_len(S) bytes). */
static inline void sframe_build(uint8_t *buf, const struct sframe_spec *s)
{
	size_t aux = s->tag ? 4 : 0;
	uint8_t *fde = buf + SFG_HEADER + aux;
	uint8_t *fre = fde + (size_t)s->nfunc * SFG_FDE;
	uint32_t nfres = s->nfunc * s->fres_per;

	sfg_put16(buf, 0xdee2);
	buf[2] = 2;			/* version 2 */
	buf[3] = 1;			/* SFRAME_F_FDE_SORTED */
	buf[4] = SFG_ABI;
	buf[5] = 0;			/* no fixed FP offset */
	buf[6] = (uint8_t)SFG_FIXED_RA;
	buf[7] = (uint8_t)aux;
	sfg_put32(buf + 8, s->nfunc);
	sfg_put32(buf + 12, nfres);
	sfg_put32(buf + 16, nfres * SFG_FRE);
	sfg_put32(buf + 20, 0);		/* FDEs right after the header */
	sfg_put32(buf + 24, s->nfunc * SFG_FDE);
	if (aux)
		sfg_put32(buf + SFG_HEADER, s->tag);
	for (uint32_t i = 0; i < s->nfunc; i++, fde += SFG_FDE) {
		uint64_t start = s->func0 + (uint64_t)i * s->fsize;

		/* Function starts are relative to the section's address. */
		sfg_put32(fde, (uint32_t)(int32_t)(int64_t)(start - s->addr));
		sfg_put32(fde + 4, s->fsize);
		sfg_put32(fde + 8, i * s->fres_per * SFG_FRE);
		sfg_put32(fde + 12, s->fres_per);
		fde[16] = 0;		/* 1-byte FRE starts, PCINC */
		fde[17] = 0;
		sfg_put16(fde + 18, 0);
		for (uint32_t j = 0; j < s->fres_per; j++, fre += SFG_FRE) {
			fre[0] = (uint8_t)j;
			fre[1] = 0x03;	/* CFA = SP + offset, one 1-byte word */
			fre[2] = SFG_CFA_OFF;
		}
	}
}

/* A new buffer holding the section S describes; its length in *LEN. */
static inline uint8_t *sframe_new(const struct sframe_spec *s, size_t *len)
{
	uint8_t *buf;

	*len = sframe_len(s);
	buf = malloc(*len);
	if (buf)
		sframe_build(buf, s);
	return buf;
}

/*
 * A static ELF program (ET_EXEC, no libc) whose PT_GNU_SFRAME lies at file
 * offset SFRAME_OFF, mapped read-only at ELF_SFRAME_VADDR + SFRAME_OFF, and
 * whose TEXT_SEGS executable PT_LOAD segments of one page each follow the
 * headers' read-only page at ELF_BASE: exec registration registers the
 * section once per executable segment (at most 4 count).  The section describes functions from
 * ELF_BASE on, SFRAME_BYTES long (filled with functions of FSIZE bytes).
 * The file between the last text page and SFRAME_OFF is a hole.
 *
 * The program: with one argument or more it sleeps in pause() until
 * killed; without, it exits 0 at once.
 */
#define ELF_BASE		0x400000ULL
#define ELF_SFRAME_VADDR	0x10000000ULL
#define ELF_PAGE		4096ULL

/*
 * The entry point's code, at the first text page, and what fills the rest
 * of the text: an instruction that traps.
 */
#if defined(__x86_64__)
#define ELF_MACHINE		62	/* EM_X86_64 */
static const uint8_t elf_code[] = {
	0x48, 0x8b, 0x04, 0x24,		/* mov (%rsp), %rax: argc */
	0x48, 0x83, 0xf8, 0x01,		/* cmp $1, %rax */
	0x74, 0x09,			/* je exit */
	0xb8, 0x22, 0x00, 0x00, 0x00,	/* 1: mov $34, %eax: pause */
	0x0f, 0x05,			/* syscall */
	0xeb, 0xf7,			/* jmp 1b */
	0xb8, 0x3c, 0x00, 0x00, 0x00,	/* exit: mov $60, %eax */
	0x31, 0xff,			/* xor %edi, %edi */
	0x0f, 0x05,			/* syscall */
};

static inline void elf_fill_trap(uint8_t *p, size_t len)
{
	memset(p, 0xcc, len);		/* int3 */
}
#else
#define ELF_MACHINE		183	/* EM_AARCH64 */
/* A64 instructions, little endian; arm64 has no pause(): ppoll() of nothing. */
static const uint32_t elf_code[] = {
	0xf94003e0,			/* ldr x0, [sp]: argc */
	0xf100041f,			/* cmp x0, #1 */
	0x54000120,			/* b.eq exit */
	0xd2800000,			/* 1: mov x0, #0: no descriptors */
	0xd2800001,			/* mov x1, #0 */
	0xd2800002,			/* mov x2, #0: no timeout */
	0xd2800003,			/* mov x3, #0: no signal mask */
	0xd2800004,			/* mov x4, #0 */
	0xd2800928,			/* mov x8, #73: ppoll */
	0xd4000001,			/* svc #0 */
	0x17fffff9,			/* b 1b */
	0xd2800000,			/* exit: mov x0, #0 */
	0xd2800ba8,			/* mov x8, #93: exit */
	0xd4000001,			/* svc #0 */
};

static inline void elf_fill_trap(uint8_t *p, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i += 4)
		sfg_put32(p + i, 0xd4200000);	/* brk #0 */
}
#endif

struct elf_phdr_spec {
	uint32_t type, flags;
	uint64_t off, vaddr, filesz, memsz, align;
};

static inline void elf_put_phdr(uint8_t *p, const struct elf_phdr_spec *ph)
{
	sfg_put32(p, ph->type);
	sfg_put32(p + 4, ph->flags);
	sfg_put64(p + 8, ph->off);
	sfg_put64(p + 16, ph->vaddr);
	sfg_put64(p + 24, ph->vaddr);
	sfg_put64(p + 32, ph->filesz);
	sfg_put64(p + 40, ph->memsz);
	sfg_put64(p + 48, ph->align);
}

/*
 * Writes the program to PATH (mode 0755); returns the section's length,
 * or 0 on failure (errno set).
 */
static inline size_t elf_write(const char *path, unsigned int text_segs, uint64_t sframe_off,
			       size_t sframe_bytes, uint32_t fsize)
{
	enum { PT_LOAD_ = 1, PT_PHDR_ = 6, PT_GNU_STACK_ = 0x6474e551, PT_GNU_SFRAME_ = 0x6474e554 };
	enum { PF_X_ = 1, PF_W_ = 2, PF_R_ = 4 };
	uint8_t head[ELF_PAGE];
	struct elf_phdr_spec ph[16];
	unsigned int n = 0, i;
	struct sframe_spec s = {
		.addr = ELF_SFRAME_VADDR + sframe_off,
		.func0 = ELF_BASE,
		.fsize = fsize,
		.fres_per = 1,
	};
	uint8_t *sec, *page;
	size_t len;
	FILE *f;

	if (text_segs < 1 || text_segs > 8 || sframe_off % ELF_PAGE ||
	    sframe_off < (1 + text_segs) * ELF_PAGE) {
		errno = EINVAL;
		return 0;
	}
	s.nfunc = sframe_funcs_for(sframe_bytes, 1, 0);
	sec = sframe_new(&s, &len);
	page = calloc(1, ELF_PAGE);
	if (!sec || !page)
		return 0;
	memset(head, 0, sizeof(head));
	ph[n++] = (struct elf_phdr_spec){ PT_PHDR_, PF_R_, 64, ELF_BASE + 64, 0, 0, 8 };
	/* The headers' page (read-only), then the text pages. */
	for (i = 0; i <= text_segs; i++)
		ph[n++] = (struct elf_phdr_spec){ PT_LOAD_, i ? PF_R_ | PF_X_ : PF_R_, i * ELF_PAGE,
						  ELF_BASE + i * ELF_PAGE, ELF_PAGE, ELF_PAGE, ELF_PAGE };
	ph[n++] = (struct elf_phdr_spec){ PT_LOAD_, PF_R_, sframe_off, ELF_SFRAME_VADDR + sframe_off,
					  len, len, ELF_PAGE };
	ph[n++] = (struct elf_phdr_spec){ PT_GNU_SFRAME_, PF_R_, sframe_off,
					  ELF_SFRAME_VADDR + sframe_off, len, len, 8 };
	ph[n++] = (struct elf_phdr_spec){ PT_GNU_STACK_, PF_R_ | PF_W_, 0, 0, 0, 0, 16 };
	ph[0].filesz = ph[0].memsz = n * 56;
	memcpy(head, "\x7f" "ELF", 4);
	head[4] = 2;			/* ELFCLASS64 */
	head[5] = 1;			/* ELFDATA2LSB */
	head[6] = 1;			/* EV_CURRENT */
	sfg_put16(head + 16, 2);	/* ET_EXEC */
	sfg_put16(head + 18, ELF_MACHINE);
	sfg_put32(head + 20, 1);
	sfg_put64(head + 24, ELF_BASE + ELF_PAGE);	/* entry: the first text page */
	sfg_put64(head + 32, 64);	/* program headers right after */
	sfg_put16(head + 52, 64);
	sfg_put16(head + 54, 56);
	sfg_put16(head + 56, (uint16_t)n);
	for (i = 0; i < n; i++)
		elf_put_phdr(head + 64 + 56 * i, &ph[i]);
	/* The text pages: the code, then traps. */
	elf_fill_trap(page, ELF_PAGE);
	memcpy(page, elf_code, sizeof(elf_code));
	f = fopen(path, "w");
	if (!f)
		goto fail;
	if (fwrite(head, ELF_PAGE, 1, f) != 1)
		goto fail_file;
	for (i = 0; i < text_segs; i++) {
		if (fwrite(page, ELF_PAGE, 1, f) != 1)
			goto fail_file;
		elf_fill_trap(page, sizeof(elf_code));
	}
	if (fseek(f, (long)sframe_off, SEEK_SET) || fwrite(sec, len, 1, f) != 1)
		goto fail_file;
	if (fclose(f) || chmod(path, 0755))
		goto fail;
	free(sec);
	free(page);
	return len;
fail_file:
	fclose(f);
fail:
	free(sec);
	free(page);
	return 0;
}

#endif /* SFRAME_GEN_H */
