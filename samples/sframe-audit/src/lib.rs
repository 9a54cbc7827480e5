// SPDX-License-Identifier: GPL-2.0

//! `sframe-audit.so`: an `LD_AUDIT` library that registers the SFrame
//! section of every object glibc's loader maps (the main program, ld.so,
//! start-up libraries, `dlopen()`, `dlmopen()` namespaces) with
//! `/dev/sframe`, and removes it on `dlclose()`.
//!
//! ```text
//! LD_AUDIT=/path/to/sframe-audit.so perf record -g ./prog
//! ```
//!
//! Objects without `PT_GNU_SFRAME` get a section generated from their
//! `.eh_frame` ([`generated`]), kept in a per-user [`cache`] by
//! [`identity`].
//!
//! As a Rust library it also serves `sframectl`: [`image`] reads an object's
//! layout from memory, [`device`] wraps the ioctls, [`generated`] and
//! [`cache`] give `sframectl register --pid` the same sections.

pub mod audit;
pub mod cache;
pub mod device;
pub mod digest;
pub mod generated;
pub mod identity;
pub mod image;
pub mod pages;
