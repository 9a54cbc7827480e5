// SPDX-License-Identifier: GPL-2.0

//! `sframectl`: inspect and check the SFrame sections of ELF files.
//!
//! Each subcommand lives in its own module; adding one is a new variant of
//! [`Command`] (`cli.rs`) and a new module.

mod check;
mod cli;
mod coverage;
mod daemon;
mod derive_pcrel;
mod dump;
mod elf;
mod fill_cache;
mod generator_thread;
mod kernel;
mod list;
mod maps;
mod mmap_events;
mod names;
mod register;
mod run;
mod run_dir;
mod section;
mod section_lru;
mod status;
mod synth;
#[cfg(test)]
mod test_process;

use anyhow::Result;
use clap::Parser;
use cli::Cli;
use cli::Command;
use std::ffi::OsString;
use std::io::ErrorKind;
use std::process::ExitCode;

fn run(command: Command) -> Result<()> {
    match command {
        Command::Dump { file, json, base } => dump::run(&file, base, json),
        Command::Check { file, base } => check::run(&file, base),
        Command::Synth { file, output, v2 } => synth::run(&file, output, v2),
        Command::DerivePcrel { input, output } => derive_pcrel::run(&input, &output),
        Command::Status => status::run(),
        Command::List { pid } => list::run(pid),
        Command::Register {
            pid,
            no_synth,
            no_cache,
        } => register::register(
            pid,
            register::Fallback {
                synth: !no_synth,
                cache: !no_cache,
            },
        ),
        Command::Daemon {
            cache_mb,
            ring_pages,
            run_dir,
            no_synth,
            verbose,
        } => daemon::run(daemon::Options {
            cache_mb,
            ring_pages,
            run_dir: run_dir.unwrap_or_else(run_dir::default_dir),
            synth: !no_synth,
            verbose,
        }),
        Command::FillCache {
            paths,
            no_programs,
            dir,
            verbose,
        } => fill_cache::run(paths, dir, !no_programs, verbose),
        Command::Unregister { pid } => register::unregister(pid),
        Command::Run {
            audit_lib,
            debug,
            command,
        } => run::run(audit_lib, debug, &command),
    }
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let command = match run::quick_parse(&args) {
        Some(command) => command,
        None => Cli::parse_from(args).command,
    };
    match run(command) {
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
