// SPDX-License-Identifier: GPL-2.0

//! The daemon's run directory (`/run/sframe-unwind`, or
//! `$SFRAME_RUN_DIR`): how `status` tells whether a daemon runs, and what
//! it has done.
//!
//! - `daemon.lock`: the daemon holds an exclusive `flock()` on it while it
//!   runs, and writes its pid into it.  The kernel drops the lock when the
//!   daemon dies however it dies, so a stale file says nothing: `status`
//!   asks for a shared lock, and is refused exactly while a daemon runs
//!   (and a daemon starting while a `status` holds it tries again).
//! - `daemon.state`: the daemon's counters, `name: value` lines, replaced
//!   whole (written under a temporary name, then renamed).

use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::io::Read;
use std::io::Seek;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

const LOCK: &str = "daemon.lock";
const STATE: &str = "daemon.state";
/// How long a starting daemon tries for the lock: `status` holds a shared
/// lock on it for an instant, and a daemon starting in that instant must
/// not take it for another daemon.  One that runs is still refused.
const LOCK_TRIES: u32 = 40;
const LOCK_RETRY: Duration = Duration::from_millis(25);

/// The run directory: `$SFRAME_RUN_DIR`, else `/run/sframe-unwind`.
pub(crate) fn default_dir() -> PathBuf {
    std::env::var_os("SFRAME_RUN_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/run/sframe-unwind"))
}

fn flock(file: &File, op: i32) -> io::Result<()> {
    // SAFETY: flock() on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The running daemon's hold on the run directory.
pub(crate) struct Lock {
    dir: PathBuf,
    _file: File,
}

impl Lock {
    /// Creates the directory if needed and takes the lock; fails if another
    /// daemon holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let path = dir.join(LOCK);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let mut tries = 1;
        let mut locked = flock(&file, libc::LOCK_EX);
        while tries < LOCK_TRIES
            && matches!(&locked, Err(err) if err.raw_os_error() == Some(libc::EWOULDBLOCK))
        {
            std::thread::sleep(LOCK_RETRY);
            tries += 1;
            locked = flock(&file, libc::LOCK_EX);
        }
        if let Err(err) = locked {
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let pid = read_pid(&mut file).map_or_else(|| "?".into(), |p| p.to_string());
                return Err(anyhow!(
                    "another daemon is running (pid {pid}, lock {})",
                    path.display()
                ));
            }
            return Err(anyhow::Error::new(err).context(format!("cannot lock {}", path.display())));
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        // A dead daemon's counters are not ours.
        match std::fs::remove_file(dir.join(STATE)) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err.into()),
            _ => {}
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            _file: file,
        })
    }

    /// Replaces the state file with `text`.
    pub(crate) fn publish(&self, text: &str) -> io::Result<()> {
        let tmp = self.dir.join(format!("{STATE}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, self.dir.join(STATE))
    }
}

fn read_pid(file: &mut File) -> Option<i32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// What `status` finds in the run directory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Daemon {
    /// No daemon holds the lock.
    NotRunning,
    /// A daemon runs, with this pid and these counters (empty until it has
    /// published them).
    Running { pid: Option<i32>, state: String },
}

/// Whether a daemon holds `dir`'s lock, and its counters.
pub(crate) fn probe(dir: &Path) -> Daemon {
    let Ok(mut file) = File::open(dir.join(LOCK)) else {
        return Daemon::NotRunning;
    };
    match flock(&file, libc::LOCK_SH) {
        // We got it: nobody holds it.  Dropping the file releases it.
        Ok(()) => Daemon::NotRunning,
        Err(_) => Daemon::Running {
            pid: read_pid(&mut file),
            state: std::fs::read_to_string(dir.join(STATE)).unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_tells_a_running_daemon_from_a_stale_file() {
        let dir = std::env::temp_dir().join(format!("sframe-run-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(probe(&dir), Daemon::NotRunning);
        let lock = Lock::acquire(&dir).unwrap();
        let err = Lock::acquire(&dir).err().unwrap();
        assert!(err.to_string().contains("another daemon"), "{err}");
        lock.publish("objects registered: 3\n").unwrap();
        drop(lock);
        let lock = Lock::acquire(&dir).unwrap();
        assert_eq!(
            probe(&dir),
            Daemon::Running {
                pid: Some(std::process::id() as i32),
                state: String::new()
            },
            "the last daemon's state is gone"
        );
        lock.publish("objects registered: 3\n").unwrap();
        let me = Some(std::process::id() as i32);
        assert_eq!(
            probe(&dir),
            Daemon::Running {
                pid: me,
                state: "objects registered: 3\n".into()
            }
        );
        drop(lock);
        // The files stay; the lock went with the daemon.
        assert!(dir.join(LOCK).exists());
        assert_eq!(probe(&dir), Daemon::NotRunning);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `status` that holds its shared lock while a daemon starts (seen in
    /// the arm64 guest: "another daemon is running (pid ?)", with none).
    #[test]
    fn a_daemon_starting_during_a_status_gets_the_lock() {
        let dir = std::env::temp_dir().join(format!("sframe-run-dir-st-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        drop(Lock::acquire(&dir).unwrap());
        let prober = File::open(dir.join(LOCK)).unwrap();
        flock(&prober, libc::LOCK_SH).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(LOCK_RETRY * 4);
            drop(prober);
        });
        let lock = Lock::acquire(&dir);
        releaser.join().unwrap();
        assert!(lock.is_ok(), "{:?}", lock.err());
        drop(lock);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
