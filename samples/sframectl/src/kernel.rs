// SPDX-License-Identifier: GPL-2.0

//! Talking to the module: opening `/dev/sframe`, naming another process by
//! an open `/proc/PID/mem` or `/proc/PID/auxv`, and turning the module's
//! errno values into messages a user can act on.

use anyhow::anyhow;
use anyhow::Error;
use anyhow::Result;
use sframe_audit::device::Device;
use std::fs::File;
use std::io;

/// The module's name in `/proc/modules`.
pub(crate) const MODULE_NAME: &str = "sframe_unwind";

/// Whether `/proc/modules` lists the module (`None`: cannot tell).
pub(crate) fn module_loaded() -> Option<bool> {
    let modules = std::fs::read_to_string("/proc/modules").ok()?;
    Some(
        modules
            .lines()
            .any(|line| line.split(' ').next() == Some(MODULE_NAME)),
    )
}

/// Opens `/dev/sframe`, explaining the usual failures.
pub(crate) fn open() -> Result<Device> {
    Device::open().map_err(|err| match err.raw_os_error() {
        Some(libc::ENOENT | libc::ENXIO | libc::ENODEV) => anyhow!(
            "the {MODULE_NAME} module is not loaded (no /dev/sframe): load it with \
             `insmod sframe_unwind.ko` (see Documentation/usage.rst)"
        ),
        Some(libc::EACCES | libc::EPERM) => {
            anyhow!("permission denied opening /dev/sframe (the module creates it mode 0666: check its permissions)")
        }
        _ => Error::new(err).context("cannot open /dev/sframe"),
    })
}

/// Opens `/proc/PID/FILE` (`mem` to register or unregister, `auxv` to
/// list), the descriptor that names process `pid` to the module: opening it
/// is where the kernel checks that we may ptrace the process, for `what`.
pub(crate) fn open_proc(pid: i32, file: &str, what: &str) -> Result<File> {
    let path = format!("/proc/{pid}/{file}");
    File::open(&path).map_err(|err| match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => explain(err, what, Some(pid)),
        Some(libc::ENOENT | libc::ESRCH) => anyhow!("no process {pid}"),
        _ => Error::new(err).context(format!("cannot open {path}")),
    })
}

/// Explains an error the module returned for `what` (an operation, e.g.
/// "register"), done on process `pid` if given.
pub(crate) fn explain(err: io::Error, what: &str, pid: Option<i32>) -> Error {
    let target = pid.map_or_else(|| "this process".to_owned(), |pid| format!("process {pid}"));
    match err.raw_os_error() {
        Some(libc::ENOTTY) => {
            anyhow!("the loaded module does not implement {what} (an older module?)")
        }
        Some(libc::EOPNOTSUPP) => anyhow!(
            "the loaded module cannot {what} for another process (it found no /proc when \
             it was loaded); start the program with `sframectl run` instead"
        ),
        Some(libc::EPERM | libc::EACCES) => anyhow!(
            "permission denied: {what} on {target} needs the right to ptrace it \
             (same user and kernel.yama.ptrace_scope, or root)"
        ),
        Some(libc::ESRCH) => anyhow!("{target} has exited or executed another program"),
        _ => Error::new(err).context(format!("{what} on {target}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(errno: i32, pid: Option<i32>) -> String {
        explain(io::Error::from_raw_os_error(errno), "register", pid).to_string()
    }

    #[test]
    fn errors_say_what_to_do() {
        assert!(message(libc::EPERM, Some(42)).contains("ptrace"));
        assert!(message(libc::EPERM, Some(42)).contains("process 42"));
        assert!(message(libc::EOPNOTSUPP, Some(42)).contains("sframectl run"));
        assert!(message(libc::ENOTTY, None).contains("does not implement register"));
        assert!(message(libc::EINVAL, None).contains("register on this process"));
    }

    #[test]
    fn proc_file_of_a_missing_process() {
        // PIDs are below 2^22: this one never exists.
        let err = open_proc(0x7fff_fff0, "mem", "register").unwrap_err();
        assert!(err.to_string().contains("no process"), "{err}");
        assert!(open_proc(std::process::id() as i32, "mem", "register").is_ok());
        assert!(open_proc(std::process::id() as i32, "auxv", "list").is_ok());
    }
}
