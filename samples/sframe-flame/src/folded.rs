// SPDX-License-Identifier: GPL-2.0

//! A recording as folded stacks: `perf script` output collapsed by
//! inferno's perf folder into one line per distinct stack, root first
//! (`comm;_start;...;leaf COUNT`), which is what the flame graph draws.

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
        let mut options = Options::default();
        // The order of the lines does not matter to the graph; one thread
        // keeps the folder's output the same from run to run.
        options.nthreads = 1;
        let mut out = Vec::new();
        Folder::from(options)
            .collapse(script, &mut out)
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

    /// Frames in the deepest stack.
    pub fn deepest(&self) -> usize {
        self.stacks().map(|(d, _)| d).max().unwrap_or(0)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two samples of one deep stack and one of a broken one, as `perf
    /// script -F comm,pid,cpu,time,event,ip,sym,dso` prints them: without
    /// the period, each sample counts once.
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
\t    5555555551a0 leaf+0x10 (/usr/bin/prog)
\t               1 [unknown] ([unknown])

";

    #[test]
    fn folds_perf_script_root_first() {
        let folded = Folded::from_perf_script(SCRIPT.as_bytes()).unwrap();
        let lines: Vec<_> = folded.lines().collect();
        assert!(
            lines.contains(&"prog;_start;__libc_start_call_main;main;middle;leaf 2"),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("prog;") && l.ends_with(";leaf 1")),
            "{lines:?}"
        );
        assert_eq!(folded.samples(), 3);
        assert_eq!(folded.deepest(), 5);
        assert_eq!(folded.median_depth(), 5);
    }

    #[test]
    fn empty_script_has_no_samples() {
        let folded = Folded::from_perf_script(b"").unwrap();
        assert_eq!(folded.samples(), 0);
        assert_eq!(folded.deepest(), 0);
        assert_eq!(folded.median_depth(), 0);
    }
}
