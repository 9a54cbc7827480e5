// SPDX-License-Identifier: GPL-2.0

//! The command line: every subcommand and option, with the help text
//! that `--help`, the man pages and the shell completions are made from
//! (`examples/generate-docs.rs` includes this file on its own).

use clap::Parser;
use clap::Subcommand;
use std::path::PathBuf;

/// Inspect and check SFrame stack-trace information in ELF files.
#[derive(Parser)]
#[command(name = "sframectl", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug, PartialEq)]
pub(crate) enum Command {
    /// Print the SFrame header, every FDE and every FRE of an ELF file
    /// or a raw SFrame section.
    Dump {
        /// Executable or shared object with a .sframe section, or a raw
        /// section (as `synth` writes).
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// For a raw section: the address it is placed at (what `synth`
        /// printed); function starts are relative to it.
        #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = "0")]
        base: u64,
    },
    /// Validate the SFrame section of an ELF file (or a raw section) as the
    /// kernel module would; for an ELF file, also report what `synth`
    /// would generate from its .eh_frame.
    Check {
        /// Executable or shared object, or a raw SFrame section.
        file: PathBuf,
        /// For a raw section: the address it is placed at.
        #[arg(long, value_name = "ADDR", value_parser = parse_addr, default_value = "0")]
        base: u64,
    },
    /// Generate an SFrame section from an ELF file's .eh_frame and write it
    /// as a raw section; prints the base address its function starts are
    /// relative to, and what was covered.
    Synth {
        /// Executable or shared object (x86-64 or AArch64).
        file: PathBuf,
        /// Where to write the section (default: FILE.sframe).
        #[arg(short, long, value_name = "OUT")]
        output: Option<PathBuf>,
        /// Write SFrame version 2 (default: version 3).
        #[arg(long)]
        v2: bool,
    },
    /// Rewrite an SFrame V2 section to use PC-relative function starts
    /// (SFRAME_F_FDE_FUNC_START_PCREL), as binutils 2.45 emits: test fixtures.
    #[command(hide = true)]
    DerivePcrel {
        /// ELF file with an SFrame V2 section without the PCREL flag.
        input: PathBuf,
        /// Where to write the modified copy.
        output: PathBuf,
    },
    /// Show whether the module is loaded, its version and its counters.
    Status,
    /// List registered sections and the object each belongs to.
    List {
        /// Only this process (default: every process you may inspect).
        #[arg(long)]
        pid: Option<i32>,
    },
    /// Register every mapped object of a running process: its own .sframe,
    /// or one generated from its .eh_frame (kept in the same cache as the
    /// audit library's).
    Register {
        /// The process to profile.
        #[arg(long)]
        pid: i32,
        /// Register only objects with their own .sframe.
        #[arg(long)]
        no_synth: bool,
        /// Generate without reading or writing the cache.
        #[arg(long)]
        no_cache: bool,
    },
    /// Register every process, and follow new executable mappings
    /// system-wide, so that `perf record -a -g` needs no wrapper (runs in
    /// the foreground, logs to stderr; needs root, or CAP_PERFMON and
    /// CAP_SYS_PTRACE).
    Daemon {
        /// Memory for generated sections held for reuse, in MiB.
        #[arg(long, value_name = "MIB", default_value = "64")]
        cache_mb: u64,
        /// Ring-buffer pages per CPU (a power of two).
        #[arg(long, value_name = "PAGES", default_value = "128")]
        ring_pages: usize,
        /// Directory for the lock and the state file (default:
        /// $SFRAME_RUN_DIR, else /run/sframe-unwind).
        #[arg(long, value_name = "DIR")]
        run_dir: Option<PathBuf>,
        /// Register only objects with their own .sframe.
        #[arg(long)]
        no_synth: bool,
        /// Log every section registered, with the CLOCK_MONOTONIC time
        /// of its registration (the clock of `perf record -k
        /// CLOCK_MONOTONIC`).
        #[arg(short, long)]
        verbose: bool,
    },
    /// Generate the sections of the system's libraries and programs ahead
    /// of time, into the system's cache, which the audit library and the
    /// daemon read before the user's own: the first start of a program
    /// then generates none (run as root; the Debian package runs it when
    /// installed and when packages install libraries or programs).
    FillCache {
        /// Objects, or directories whose objects to take (not their
        /// subdirectories); default: every library `ldconfig -p` lists,
        /// every program in /usr/bin, /usr/sbin and /usr/libexec (and its
        /// subdirectories), the audit library and the running kernel's
        /// vDSO, and the files of those the last such run found and this
        /// one does not are removed (objects added by path stay).
        #[arg(value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Without a path: leave the programs out (the libraries, the
        /// audit library and the vDSO only).
        #[arg(long, conflicts_with = "paths")]
        no_programs: bool,
        /// The cache directory (default: $SFRAME_SYSTEM_CACHE, else
        /// /var/cache/sframe-unwind/system).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Print what became of each object.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Remove every registration of a process.
    Unregister {
        /// The process.
        #[arg(long)]
        pid: i32,
    },
    /// Run a command with the audit library, which registers every object
    /// the command loads.
    Run {
        /// The audit library (default: $SFRAME_AUDIT_LIB, else
        /// sframe-audit.so beside sframectl, or from its directory in
        /// ../lib/ARCH-linux-gnu/sframe-unwind/ (the Debian package's),
        /// ../lib/sframe-unwind/ or ../lib/).
        #[arg(long, value_name = "PATH")]
        audit_lib: Option<PathBuf>,
        /// Let the audit library log what it does (SFRAME_AUDIT_DEBUG=1).
        #[arg(long)]
        debug: bool,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<std::ffi::OsString>,
    },
}

/// An address in hexadecimal (`0x...`) or decimal.
fn parse_addr(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.map_err(|e| format!("{s}: {e}"))
}
