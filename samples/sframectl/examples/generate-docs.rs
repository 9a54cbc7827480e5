// SPDX-License-Identifier: GPL-2.0

//! `sframectl`'s man pages and shell completions, made from its clap
//! definitions at build time (the Debian package's `debian/rules` runs
//! this), so that they never drift from `--help`:
//!
//! ```text
//! cargo run --example generate-docs -p sframectl -- OUT
//! ```
//!
//! writes `OUT/man/sframectl.1` and one `OUT/man/sframectl-SUB.1` per
//! subcommand (hidden ones left out), and `OUT/completions/` with
//! `sframectl.bash`, `_sframectl` (zsh) and `sframectl.fish`.  The pages
//! are dated from `SOURCE_DATE_EPOCH` when it is set (dpkg-buildpackage
//! sets it from `debian/changelog`), so that a build is reproducible.

#[path = "../src/cli.rs"]
mod cli;

use clap::CommandFactory;
use clap_complete::Shell;
use std::io::Error;
use std::io::ErrorKind;
use std::path::Path;
use std::path::PathBuf;

/// The manual every page belongs to, in its header.
const MANUAL: &str = "sframe-unwind";

/// `YYYY-MM-DD` of a time in seconds since the epoch (UTC).
fn date_of(epoch: u64) -> String {
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let days = (epoch / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The page of `cmd`, then of each visible subcommand, into `dir`.
fn man_pages(cmd: &clap::Command, date: &str, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut written = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written.extend(man_pages(sub, date, dir)?);
    }
    let page = clap_mangen::Man::new(cmd.clone())
        .date(date)
        .source(concat!("sframectl ", env!("CARGO_PKG_VERSION")))
        .manual(MANUAL);
    written.push(page.generate_to(dir)?);
    Ok(written)
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args_os().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "usage: generate-docs OUT-DIR",
        ));
    };
    let out = PathBuf::from(out);
    let date = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(s) => date_of(s.parse().map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("SOURCE_DATE_EPOCH={s}: {e}"),
            )
        })?),
        Err(_) => String::new(),
    };

    // Built, the subcommands know their full names (`sframectl-dump`),
    // which name their pages; no `help` subcommand, which has no page.
    let mut cmd = cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let man = out.join("man");
    std::fs::create_dir_all(&man)?;
    for page in man_pages(&cmd, &date, &man)? {
        println!("{}", page.display());
    }

    let completions = out.join("completions");
    std::fs::create_dir_all(&completions)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let file = clap_complete::generate_to(shell, &mut cmd, "sframectl", &completions)?;
        println!("{}", file.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(951_782_400), "2000-02-29");
        assert_eq!(date_of(1_796_428_799), "2026-12-04");
    }
}
