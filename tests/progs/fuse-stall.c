// SPDX-License-Identifier: GPL-2.0
/*
 * A FUSE file system that stops answering: it serves one executable file,
 * "prog" (the bytes of FILE), and leaves every READ at or beyond STALL
 * bytes without a reply, as a server that hangs would.  Written directly
 * on /dev/fuse (no libfuse), for tests/guest/38-hardening.sh: an exec of
 * MOUNTPOINT/prog reads the headers (served), and whoever then faults on
 * a page beyond STALL waits until the server goes: killing it closes
 * /dev/fuse, which aborts the connection, and the waiting reads fail.
 *
 *   fuse-stall MOUNTPOINT FILE STALL
 *
 * Runs as root, until killed.  Prints "mounted" once mounted, and
 * "stalled OFFSET" (flushed) for each READ it leaves unanswered.
 * Readahead is off (max_readahead 0 in the INIT reply), so the kernel
 * asks for the pages it needs and no more.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define ROOT_ID		FUSE_ROOT_ID
#define FILE_ID		2
#define NAME		"prog"
#define BUF_SIZE	(1 << 20)
#define VALID_S		3600

static int dev;
static int backing;
static uint64_t file_size, stall;

#define die(...) do { fprintf(stderr, "fuse-stall: " __VA_ARGS__); \
	fputc('\n', stderr); exit(1); } while (0)

/* A reply to request UNIQUE: ERROR (a negative errno) or LEN bytes of DATA. */
static void reply(uint64_t unique, int error, const void *data, size_t len)
{
	struct fuse_out_header h = {
		.len = (uint32_t)(sizeof(h) + (error ? 0 : len)),
		.error = error,
		.unique = unique,
	};
	struct iovec iov[2] = {
		{ &h, sizeof(h) },
		{ (void *)data, error ? 0 : len },
	};

	/* ENOENT: the request was interrupted and is gone; nothing to do. */
	if (writev(dev, iov, 2) < 0 && errno != ENOENT)
		die("write /dev/fuse: %s", strerror(errno));
}

static void fill_attr(struct fuse_attr *a, uint64_t node)
{
	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->blksize = 4096;
	if (node == ROOT_ID) {
		a->mode = S_IFDIR | 0755;
		a->nlink = 2;
	} else {
		a->mode = S_IFREG | 0755;
		a->nlink = 1;
		a->size = file_size;
		a->blocks = (file_size + 511) / 512;
	}
}

static void do_init(const struct fuse_in_header *in, const struct fuse_init_in *arg)
{
	struct fuse_init_out out;

	if (arg->major != FUSE_KERNEL_VERSION)
		die("kernel speaks FUSE %u.%u", arg->major, arg->minor);
	memset(&out, 0, sizeof(out));
	out.major = FUSE_KERNEL_VERSION;
	out.minor = FUSE_KERNEL_MINOR_VERSION;
	out.max_readahead = 0;	/* only the pages asked for */
	out.max_background = 16;
	out.congestion_threshold = 12;
	out.max_write = 4096;
	out.time_gran = 1;
	reply(in->unique, 0, &out, sizeof(out));
}

static void do_lookup(const struct fuse_in_header *in, const char *name)
{
	struct fuse_entry_out out;

	if (in->nodeid != ROOT_ID || strcmp(name, NAME)) {
		reply(in->unique, -ENOENT, NULL, 0);
		return;
	}
	memset(&out, 0, sizeof(out));
	out.nodeid = FILE_ID;
	out.generation = 1;
	out.entry_valid = VALID_S;
	out.attr_valid = VALID_S;
	fill_attr(&out.attr, FILE_ID);
	reply(in->unique, 0, &out, sizeof(out));
}

static void do_getattr(const struct fuse_in_header *in)
{
	struct fuse_attr_out out;

	memset(&out, 0, sizeof(out));
	out.attr_valid = VALID_S;
	fill_attr(&out.attr, in->nodeid);
	reply(in->unique, 0, &out, sizeof(out));
}

static void do_open(const struct fuse_in_header *in)
{
	struct fuse_open_out out;

	memset(&out, 0, sizeof(out));
	out.fh = in->nodeid;
	reply(in->unique, 0, &out, sizeof(out));
}

static void do_read(const struct fuse_in_header *in, const struct fuse_read_in *arg, char *buf)
{
	uint64_t len = arg->size;
	ssize_t n;

	if (arg->offset >= stall) {
		/* Never answered: the reader waits until the connection goes. */
		printf("stalled %llu\n", (unsigned long long)arg->offset);
		fflush(stdout);
		return;
	}
	if (arg->offset >= file_size)
		len = 0;
	else if (len > file_size - arg->offset)
		len = file_size - arg->offset;
	if (len > BUF_SIZE)
		len = BUF_SIZE;
	n = pread(backing, buf, len, (off_t)arg->offset);
	if (n < 0) {
		reply(in->unique, -EIO, NULL, 0);
		return;
	}
	reply(in->unique, 0, buf, (size_t)n);
}

static void serve(void)
{
	char *req = malloc(BUF_SIZE + 4096), *data = malloc(BUF_SIZE);

	if (!req || !data)
		die("out of memory");
	for (;;) {
		ssize_t n = read(dev, req, BUF_SIZE + 4096);
		const struct fuse_in_header *in = (const void *)req;
		const void *arg = req + sizeof(*in);

		if (n < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			if (errno == ENODEV)	/* unmounted */
				exit(0);
			die("read /dev/fuse: %s", strerror(errno));
		}
		if ((size_t)n < sizeof(*in))
			die("short request");
		switch (in->opcode) {
		case FUSE_INIT:
			do_init(in, arg);
			break;
		case FUSE_LOOKUP:
			do_lookup(in, arg);
			break;
		case FUSE_GETATTR:
			do_getattr(in);
			break;
		case FUSE_OPEN:
		case FUSE_OPENDIR:
			do_open(in);
			break;
		case FUSE_READ:
			do_read(in, arg, data);
			break;
		case FUSE_READDIR:	/* an empty listing */
		case FUSE_RELEASE:
		case FUSE_RELEASEDIR:
		case FUSE_FLUSH:
		case FUSE_ACCESS:
			reply(in->unique, 0, NULL, 0);
			break;
		case FUSE_STATFS: {
			struct fuse_statfs_out out;

			memset(&out, 0, sizeof(out));
			out.st.bsize = out.st.frsize = 4096;
			out.st.namelen = 255;
			reply(in->unique, 0, &out, sizeof(out));
			break;
		}
		case FUSE_FORGET:
		case FUSE_BATCH_FORGET:
		case FUSE_INTERRUPT:	/* no reply expected */
			break;
		default:
			reply(in->unique, -ENOSYS, NULL, 0);
			break;
		}
	}
}

int main(int argc, char **argv)
{
	char opts[128];
	struct stat st;

	if (argc != 4)
		die("usage: fuse-stall MOUNTPOINT FILE STALL");
	backing = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (backing < 0 || fstat(backing, &st))
		die("%s: %s", argv[2], strerror(errno));
	file_size = (uint64_t)st.st_size;
	stall = strtoull(argv[3], NULL, 0);
	dev = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		die("open /dev/fuse: %s", strerror(errno));
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", dev);
	if (mount("fuse-stall", argv[1], "fuse", MS_NOSUID | MS_NODEV, opts))
		die("mount %s: %s", argv[1], strerror(errno));
	printf("mounted\n");
	fflush(stdout);
	serve();
	return 0;
}
