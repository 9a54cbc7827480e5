// SPDX-License-Identifier: GPL-2.0

//! `sframectl list [--pid PID]`: the sections registered for one process,
//! or for every process we may look at, each with the object its text
//! belongs to (from `/proc/PID/maps`).

use crate::kernel;
use crate::maps;
use anyhow::bail;
use anyhow::Result;
use sframe_uapi::SframeSectionInfo;
use std::io;
use std::io::Write;
use std::os::fd::AsFd;

pub(crate) fn run(pid: Option<i32>) -> Result<()> {
    let dev = kernel::open()?;
    let mut out = io::stdout().lock();
    if let Some(pid) = pid {
        let auxv = kernel::open_proc(pid, "auxv", "list")?;
        let sections = dev
            .list(Some(auxv.as_fd()))
            .map_err(|err| kernel::explain(err, "list", Some(pid)))?;
        return print_process(&mut out, pid, &sections);
    }
    let (mut processes, mut total) = (0, 0);
    for pid in all_pids()? {
        // Processes come and go, and some are not ours to read: skip those,
        // but not a module that cannot list other processes at all.
        let Ok(auxv) = kernel::open_proc(pid, "auxv", "list") else {
            continue;
        };
        let sections = match dev.list(Some(auxv.as_fd())) {
            Ok(sections) => sections,
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOTTY | libc::EOPNOTSUPP)) => {
                return Err(kernel::explain(err, "list", Some(pid)));
            }
            Err(_) => continue,
        };
        if sections.is_empty() {
            continue;
        }
        print_process(&mut out, pid, &sections)?;
        processes += 1;
        total += sections.len();
    }
    writeln!(out, "{total} sections in {processes} processes")?;
    Ok(())
}

/// Every process in `/proc`, in pid order.
pub(crate) fn all_pids() -> Result<Vec<i32>> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    if pids.is_empty() {
        bail!("no processes in /proc (is it mounted?)");
    }
    Ok(pids)
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map_or_else(|_| "?".to_owned(), |c| c.trim_end().to_owned())
}

fn print_process(out: &mut impl Write, pid: i32, sections: &[SframeSectionInfo]) -> Result<()> {
    // Without read access to the maps the object column stays empty.
    let maps = maps::read(pid).unwrap_or_default();
    writeln!(
        out,
        "process {pid} ({}): {} sections",
        comm(pid),
        sections.len()
    )?;
    if sections.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "  {:>6}  {:<33}  {:<24}  {:>3}  {:>6}  {:>8}  {:>6}  {:<6}  OBJECT",
        "HANDLE", "TEXT", "SFRAME", "VER", "FDES", "KBYTES", "SHARED", "FROM"
    )?;
    for s in sections {
        let object = maps::owner(&maps, s.text_start).map_or("?", |m| m.path.as_str());
        writeln!(
            out,
            "  {:>6}  {:<33}  {:<24}  {:>3}  {:>6}  {:>8}  {:>6}  {:<6}  {object}",
            s.handle,
            format!("{:#x}-{:#x}", s.text_start, s.text_end),
            format!("{:#x}+{:#x}", s.sframe_addr, s.sframe_len),
            s.version,
            s.num_fdes,
            s.kernel_bytes.div_ceil(1024),
            s.shared,
            origin(s.flags),
        )?;
    }
    Ok(())
}

/// Who made a registration: the process (`ioctl`), the module at `execve()`
/// (`exec`), each with `+fork` when inherited from the parent.
fn origin(flags: u32) -> &'static str {
    let exec = flags & sframe_uapi::SFRAME_SECTION_EXEC != 0;
    match (exec, flags & sframe_uapi::SFRAME_SECTION_INHERITED != 0) {
        (false, false) => "ioctl",
        (true, false) => "exec",
        (false, true) => "fork",
        (true, true) => "exec+f",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_name_the_owning_object() {
        let here = rows_name_the_owning_object as *const () as u64;
        let section = SframeSectionInfo {
            handle: 7,
            text_start: here,
            text_end: here + 16,
            version: 2,
            num_fdes: 3,
            kernel_bytes: 2048,
            ..Default::default()
        };
        let mut out = Vec::new();
        print_process(&mut out, std::process::id() as i32, &[section]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let exe = std::env::current_exe().unwrap();
        assert!(text.contains(": 1 sections\n"), "{text}");
        let row = text.lines().nth(2).unwrap();
        assert!(row.trim_start().starts_with("7 "), "{row}");
        assert!(row.ends_with(exe.to_str().unwrap()), "{row}");
    }
}
