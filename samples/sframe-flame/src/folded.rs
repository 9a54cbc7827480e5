// SPDX-License-Identifier: GPL-2.0

//! A recording as folded stacks: `perf script` output collapsed by
//! inferno's perf folder into one line per distinct stack, root first
//! (`comm;_start;...;leaf COUNT`), which is what the flame graph draws.
//!
//! Only the user frames: `perf script` runs away from the recorded kernel
//! (in the guest's root, on the host), so it would name the kernel's
//! frames from the host's symbols, and the chains shown are the user's.
//! And a chain ends at its first address outside every mapping (perf's
//! `[unknown] ([unknown])`): there the unwinder lost the stack, and what it
//! returned past it is not frames (a frame-pointer walk through code
//! built without frame pointers can follow garbage for a hundred of them,
//! which drawn would tower over every real stack).

use anyhow::Context;
use anyhow::Result;
use inferno::collapse::perf::Folder;
use inferno::collapse::perf::Options;
use inferno::collapse::Collapse;

/// The folded stacks of one recording.
pub struct Folded {
    lines: Vec<String>,
}

impl Folded {
    /// Folds the text `perf script` printed for a recording.
    pub fn from_perf_script(script: &[u8]) -> Result<Self> {
        let script = user_frames(script);
        let mut options = Options::default();
        // The order of the lines does not matter to the graph; one thread
        // keeps the folder's output the same from run to run.
        options.nthreads = 1;
        let mut out = Vec::new();
        Folder::from(options)
            .collapse(script.as_slice(), &mut out)
            .context("folding perf script output")?;
        let text = String::from_utf8(out).context("folded stacks are not UTF-8")?;
        Ok(Self {
            lines: text.lines().map(str::to_owned).collect(),
        })
    }

    /// The folded lines, as inferno's flame graph reads them.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }

    /// `(frames, samples)` of each stack; the frames without the process
    /// name the folder puts at the root.
    fn stacks(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.lines.iter().filter_map(|line| {
            let (stack, count) = line.rsplit_once(' ')?;
            let count = count.parse().ok()?;
            Some((stack.split(';').count().saturating_sub(1), count))
        })
    }

    /// Samples in the recording.
    pub fn samples(&self) -> u64 {
        self.stacks().map(|(_, n)| n).sum()
    }

    /// Frames in the stack of the median sample: half of the samples
    /// have stacks at least this deep.
    pub fn median_depth(&self) -> usize {
        let mut stacks: Vec<_> = self.stacks().collect();
        stacks.sort_unstable();
        let half = self.samples().div_ceil(2);
        let mut seen = 0;
        for (depth, n) in stacks {
            seen += n;
            if seen >= half {
                return depth;
            }
        }
        0
    }
}

/// `script` without its kernel frames (frame lines, an address then the
/// symbol, whose address is in the upper half, the kernel's on x86-64)
/// and without the frames after a sample's first unmapped one.
fn user_frames(script: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(script.len());
    let mut lost = false;
    for line in script.split_inclusive(|&b| b == b'\n') {
        let is_frame = line.first().is_some_and(u8::is_ascii_whitespace)
            && line.iter().any(|b| !b.is_ascii_whitespace());
        if !is_frame {
            lost = false;
        } else if lost {
            continue;
        }
        let start = line
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(line.len());
        let address = line[start..]
            .split(u8::is_ascii_whitespace)
            .next()
            .unwrap_or_default();
        let kernel = is_frame
            && std::str::from_utf8(address)
                .ok()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
                .is_some_and(|a| a >= 1 << 63);
        if !kernel {
            out.extend_from_slice(line);
            lost = is_frame
                && String::from_utf8_lossy(line)
                    .trim_end()
                    .ends_with("([unknown])");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two samples of one deep stack and one of a broken one taken in the
    /// kernel (past the break, what looks like frames), as `perf script -F
    /// comm,pid,tid,time,event,ip,sym,dso` prints them: without the period,
    /// each sample counts once.
    const SCRIPT: &str = "\
prog   100 [000]   10.000001: cpu-clock:
\t    5555555551a0 leaf+0x10 (/usr/bin/prog)
\t    5555555551b0 middle+0x20 (/usr/bin/prog)
\t    5555555551c0 main+0x30 (/usr/bin/prog)
\t    7ffff7c2a1ca __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t    555555555080 _start+0x21 (/usr/bin/prog)

prog   100 [000]   10.001001: cpu-clock:
\t    5555555551a0 leaf+0x10 (/usr/bin/prog)
\t    5555555551b0 middle+0x20 (/usr/bin/prog)
\t    5555555551c0 main+0x30 (/usr/bin/prog)
\t    7ffff7c2a1ca __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t    555555555080 _start+0x21 (/usr/bin/prog)

prog   100 [000]   10.002001: cpu-clock:
\t    ffffffff810000ac entry_SYSCALL_64+0x2c ([kernel.kallsyms])
\t    5555555551a0 leaf+0x10 (/usr/bin/prog)
\t          a0b1c2 [unknown] ([unknown])
\t    5555555551c0 main+0x30 (/usr/bin/prog)
\t          a0b1c2 [unknown] ([unknown])

";

    #[test]
    fn folds_perf_script_root_first() {
        let folded = Folded::from_perf_script(SCRIPT.as_bytes()).unwrap();
        let lines: Vec<_> = folded.lines().collect();
        assert!(
            lines.contains(&"prog;_start;__libc_start_call_main;main;middle;leaf 2"),
            "{lines:?}"
        );
        // The kernel's frame is left out: the leaf is the user's; the
        // chain ends where it was lost.
        assert!(lines.contains(&"prog;[unknown];leaf 1"), "{lines:?}");
        assert!(
            !lines.iter().any(|l| l.contains("entry_SYSCALL_64")),
            "{lines:?}"
        );
        assert_eq!(folded.samples(), 3);
        assert_eq!(folded.median_depth(), 5);
    }

    #[test]
    fn empty_script_has_no_samples() {
        let folded = Folded::from_perf_script(b"").unwrap();
        assert_eq!(folded.samples(), 0);
        assert_eq!(folded.median_depth(), 0);
    }
}
