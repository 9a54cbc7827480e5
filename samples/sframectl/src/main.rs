// SPDX-License-Identifier: GPL-2.0

//! `sframectl`: inspect and check the SFrame sections of ELF files.
//!
//! Each subcommand lives in its own module; adding one is a new variant of
//! [`Command`] and a new module.

mod check;
mod derive_pcrel;
mod dump;
mod elf;
mod kernel;
mod list;
mod maps;
mod names;
mod register;
mod run;
mod section;
mod status;

use anyhow::Result;
use clap::Parser;
use clap::Subcommand;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::ExitCode;

/// Inspect and check SFrame stack-trace information in ELF files.
#[derive(Parser)]
#[command(name = "sframectl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the SFrame header, every FDE and every FRE of an ELF file.
    Dump {
        /// Executable or shared object with a .sframe section.
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate the SFrame section of an ELF file as the kernel module would.
    Check {
        /// Executable or shared object with a .sframe section.
        file: PathBuf,
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
    /// Register every mapped object with .sframe of a running process.
    Register {
        /// The process to profile.
        #[arg(long)]
        pid: i32,
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
        /// The audit library (default: $SFRAME_AUDIT_LIB, or next to sframectl).
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

fn run(command: Command) -> Result<()> {
    match command {
        Command::Dump { file, json } => dump::run(&file, json),
        Command::Check { file } => check::run(&file),
        Command::DerivePcrel { input, output } => derive_pcrel::run(&input, &output),
        Command::Status => status::run(),
        Command::List { pid } => list::run(pid),
        Command::Register { pid } => register::register(pid),
        Command::Unregister { pid } => register::unregister(pid),
        Command::Run {
            audit_lib,
            debug,
            command,
        } => run::run(audit_lib, debug, &command),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`| head`) is not an error worth a message.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("sframectl: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let io = cause.downcast_ref::<std::io::Error>().map(|io| io.kind());
        let json = cause
            .downcast_ref::<serde_json::Error>()
            .and_then(serde_json::Error::io_error_kind);
        io.or(json) == Some(ErrorKind::BrokenPipe)
    })
}
