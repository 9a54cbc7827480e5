// SPDX-License-Identifier: GPL-2.0

//! New executable mappings, system-wide, as `perf record` follows them:
//! one software dummy event per CPU (it counts nothing, it only carries
//! side-band records) with `mmap2`, `comm` (exec) and `task` (exit)
//! records, each CPU's into its own ring buffer, read when `epoll` says
//! one has data.
//!
//! Each record carries its time (`sample_id_all` with `PERF_SAMPLE_TIME`,
//! on `CLOCK_MONOTONIC`), so the daemon can tell how long after the
//! `mmap()` it registered the object.
//!
//! The records' build-ids (`attr.build_id`) are not asked for: the daemon
//! reads each object's headers through `/proc/PID/mem` anyway (its load
//! bias and text ranges are not in the record), and the build-id with
//! them, so the kernel's copy would only cost it a page walk per mapping.

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::fence;
use std::sync::atomic::Ordering;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_ATTR_SIZE_VER8`.
const ATTR_SIZE: u32 = 136;

/// Bits of `perf_event_attr`'s flag word.
const ATTR_MMAP: u64 = 1 << 8;
const ATTR_COMM: u64 = 1 << 9;
const ATTR_TASK: u64 = 1 << 13;
const ATTR_WATERMARK: u64 = 1 << 14;
const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;
const ATTR_MMAP2: u64 = 1 << 23;
const ATTR_COMM_EXEC: u64 = 1 << 24;
const ATTR_USE_CLOCKID: u64 = 1 << 25;

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_EXIT: u32 = 4;
const PERF_RECORD_MMAP2: u32 = 10;
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;

/// Offset of `data_head` in `struct perf_event_mmap_page`; `data_tail`,
/// `data_offset` and `data_size` follow.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// `struct perf_event_attr` up to `config3` (`PERF_ATTR_SIZE_VER8`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_watermark: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    aux_action: u32,
    sig_data: u64,
    config3: u64,
}

const _: () = assert!(core::mem::size_of::<PerfEventAttr>() == ATTR_SIZE as usize);

/// One record the daemon acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    /// Process `pid` mapped `addr..addr+len` executable, at `time`
    /// (`CLOCK_MONOTONIC`, ns).
    Mmap {
        pid: i32,
        addr: u64,
        len: u64,
        time: u64,
    },
    /// Process `pid` executed a new program.
    Exec { pid: i32 },
    /// Process `pid` (its last thread) exited.
    Exit { pid: i32 },
    /// The kernel dropped `count` records: the ring was full.
    Lost { count: u64 },
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `PROT_EXEC` in an `mmap2` record's `prot`.
const PROT_EXEC: u32 = 4;

/// Parses one whole record (header included); `None` for records the
/// daemon does not act on, or malformed ones.
pub(crate) fn parse(rec: &[u8]) -> Option<Record> {
    let kind = u32_at(rec, 0)?;
    let misc = u16_at(rec, 4)?;
    // The sample_id trailer is {u64 time}: the record's last 8 bytes.
    let time = || u64_at(rec, rec.len().checked_sub(8)?);
    match kind {
        PERF_RECORD_MMAP2 => {
            let prot = u32_at(rec, 64)?;
            if prot & PROT_EXEC == 0 {
                return None;
            }
            Some(Record::Mmap {
                pid: u32_at(rec, 8)? as i32,
                addr: u64_at(rec, 16)?,
                len: u64_at(rec, 24)?,
                time: time()?,
            })
        }
        PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 => Some(Record::Exec {
            pid: u32_at(rec, 8)? as i32,
        }),
        PERF_RECORD_EXIT => {
            let (pid, tid) = (u32_at(rec, 8)?, u32_at(rec, 16)?);
            (pid == tid).then_some(Record::Exit { pid: pid as i32 })
        }
        PERF_RECORD_LOST => Some(Record::Lost {
            count: u64_at(rec, 16)?,
        }),
        _ => None,
    }
}

/// One CPU's event and its ring buffer.
struct Ring {
    fd: OwnedFd,
    page: NonNull<u8>,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
}

impl Ring {
    fn open(cpu: i32, data_pages: usize) -> io::Result<Self> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: ATTR_SIZE,
            config: PERF_COUNT_SW_DUMMY,
            sample_type: PERF_SAMPLE_TIME,
            flags: ATTR_MMAP
                | ATTR_MMAP2
                | ATTR_COMM
                | ATTR_COMM_EXEC
                | ATTR_TASK
                | ATTR_SAMPLE_ID_ALL
                | ATTR_USE_CLOCKID
                | ATTR_WATERMARK,
            // Woken at every record: the point is to register within
            // milliseconds, and epoll batches whatever piled up meanwhile.
            wakeup_watermark: 1,
            clockid: libc::CLOCK_MONOTONIC,
            ..Default::default()
        };
        // SAFETY: `attr` is a valid perf_event_attr of the size it says,
        // which the kernel only reads; the other arguments are integers.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                core::ptr::from_ref(&attr),
                -1 as libc::pid_t,
                cpu,
                -1 as libc::c_int,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: perf_event_open() returned a new descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        // SAFETY: sysconf() has no preconditions.
        let page_size = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let map_len = page_size * (1 + data_pages);
        // SAFETY: a new shared mapping of the event's ring buffer; nothing
        // else in this process refers to the range.
        let page = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let page = NonNull::new(page.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        let mut ring = Self {
            fd,
            page,
            map_len,
            data_offset: page_size,
            data_size: map_len - page_size,
        };
        // Kernels since 4.1 say where the data is; older ones leave zeros.
        let (offset, size) = (ring.word(DATA_OFFSET), ring.word(DATA_SIZE));
        if offset != 0 && size != 0 {
            ring.data_offset = offset as usize;
            ring.data_size = size as usize;
        }
        Ok(ring)
    }

    /// A u64 of the control page.
    fn word(&self, at: usize) -> u64 {
        // SAFETY: `at` is one of the control page's aligned u64 fields,
        // inside the mapping, which lives as long as `self`; the kernel
        // writes it concurrently, hence the volatile read.
        unsafe { self.page.as_ptr().add(at).cast::<u64>().read_volatile() }
    }

    /// Appends every whole record waiting in the ring to `out`, and frees
    /// their space for the kernel.
    fn drain(&self, out: &mut Vec<Record>) {
        let head = self.word(DATA_HEAD);
        // The records up to `head` are written before it (the kernel's
        // smp_store_release pairs with this).
        fence(Ordering::Acquire);
        let mut tail = self.word(DATA_TAIL);
        // SAFETY: the data area lies inside the mapping (checked by the
        // kernel's own data_offset/data_size, or our page-size layout).
        let data = unsafe {
            core::slice::from_raw_parts(self.page.as_ptr().add(self.data_offset), self.data_size)
        };
        let mut rec = Vec::new();
        while tail < head {
            let at = (tail % self.data_size as u64) as usize;
            let mut header = [0u8; 8];
            copy_wrapped(data, at, &mut header);
            let size = u16::from_ne_bytes([header[6], header[7]]) as usize;
            if size < header.len() || (head - tail) < size as u64 {
                // A corrupt size would spin here forever: give up on the
                // rest, the kernel overwrites nothing we have not freed.
                tail = head;
                break;
            }
            rec.resize(size, 0);
            copy_wrapped(data, at, &mut rec);
            out.extend(parse(&rec));
            tail += size as u64;
        }
        // Our reads are done before the kernel may reuse the space.
        fence(Ordering::Release);
        // SAFETY: `data_tail` is ours to write, an aligned u64 in the
        // mapping.
        unsafe {
            self.page
                .as_ptr()
                .add(DATA_TAIL)
                .cast::<u64>()
                .write_volatile(tail);
        }
    }
}

/// Copies `out.len()` bytes from the circular `data` starting at `at`.
fn copy_wrapped(data: &[u8], at: usize, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = data.get((at + i) % data.len()).copied().unwrap_or(0);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping was made in `open` with this length and no
        // reference into it outlives `self`.
        unsafe {
            libc::munmap(self.page.as_ptr().cast(), self.map_len);
        }
    }
}

/// The rings of every online CPU.
pub(crate) struct MmapEvents {
    rings: Vec<Ring>,
}

/// The online CPUs, from `/sys/devices/system/cpu/online` ("0-3,5").
fn online_cpus() -> io::Result<Vec<i32>> {
    let text = fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(text.trim()).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

fn parse_cpu_list(text: &str) -> Option<Vec<i32>> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (i32, i32) = (a.parse().ok()?, b.parse().ok()?);
        if b < a || b - a > 65536 {
            return None;
        }
        cpus.extend(a..=b);
    }
    Some(cpus)
}

impl MmapEvents {
    /// One event and ring of `data_pages` pages (a power of two) per online
    /// CPU.
    pub(crate) fn open(data_pages: usize) -> io::Result<Self> {
        let mut rings = Vec::new();
        for cpu in online_cpus()? {
            match Ring::open(cpu, data_pages) {
                Ok(ring) => rings.push(ring),
                // Went offline meanwhile.
                Err(err) if err.raw_os_error() == Some(libc::ENODEV) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(Self { rings })
    }

    /// The descriptors to wait on (readable when a ring has data).
    pub(crate) fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        self.rings.iter().map(|r| r.fd.as_raw_fd())
    }

    /// How many CPUs are followed.
    pub(crate) fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Every record waiting in any ring.
    pub(crate) fn drain(&self, out: &mut Vec<Record>) {
        for ring in &self.rings {
            ring.drain(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&kind.to_ne_bytes());
        r.extend_from_slice(&misc.to_ne_bytes());
        r.extend_from_slice(&((8 + body.len() + 8) as u16).to_ne_bytes());
        r.extend_from_slice(body);
        r.extend_from_slice(&1234u64.to_ne_bytes());
        r
    }

    fn mmap2(prot: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&42u32.to_ne_bytes());
        b.extend_from_slice(&43u32.to_ne_bytes());
        b.extend_from_slice(&0x7000u64.to_ne_bytes());
        b.extend_from_slice(&0x1000u64.to_ne_bytes());
        b.extend_from_slice(&0u64.to_ne_bytes());
        b.extend_from_slice(&[0; 24]);
        b.extend_from_slice(&prot.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(b"/usr/lib/libc.so.6\0\0\0\0\0\0");
        record(PERF_RECORD_MMAP2, 0, &b)
    }

    #[test]
    fn parses_the_records_acted_on() {
        assert_eq!(
            parse(&mmap2(5)),
            Some(Record::Mmap {
                pid: 42,
                addr: 0x7000,
                len: 0x1000,
                time: 1234
            })
        );
        assert_eq!(parse(&mmap2(1)), None, "not executable");
        let comm = record(
            PERF_RECORD_COMM,
            PERF_RECORD_MISC_COMM_EXEC,
            &[7, 0, 0, 0, 7, 0, 0, 0],
        );
        assert_eq!(parse(&comm), Some(Record::Exec { pid: 7 }));
        let rename = record(PERF_RECORD_COMM, 0, &[7, 0, 0, 0, 7, 0, 0, 0]);
        assert_eq!(parse(&rename), None);
        let mut exit = Vec::new();
        for v in [9u32, 1, 9, 1] {
            exit.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(
            parse(&record(PERF_RECORD_EXIT, 0, &exit)),
            Some(Record::Exit { pid: 9 })
        );
        exit[8..12].copy_from_slice(&10u32.to_ne_bytes());
        assert_eq!(parse(&record(PERF_RECORD_EXIT, 0, &exit)), None, "a thread");
        let mut lost = 1u64.to_ne_bytes().to_vec();
        lost.extend_from_slice(&17u64.to_ne_bytes());
        assert_eq!(
            parse(&record(PERF_RECORD_LOST, 0, &lost)),
            Some(Record::Lost { count: 17 })
        );
    }

    #[test]
    fn truncated_records_are_ignored() {
        let m = mmap2(5);
        for len in 0..60 {
            assert_eq!(parse(&m[..len]), None, "{len}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5"), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn copies_across_the_end_of_the_ring() {
        let data = [1, 2, 3, 4];
        let mut out = [0; 3];
        copy_wrapped(&data, 3, &mut out);
        assert_eq!(out, [4, 1, 2]);
    }
}
