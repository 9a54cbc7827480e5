// SPDX-License-Identifier: GPL-2.0

//! SFrame decoder: `.sframe` sections (V2 and V3) to unwind rows.
//!
//! This directory is one source tree compiled twice: as the host crate
//! `sframe` (tests, fuzzing, benchmarks) and, included verbatim with
//! `#[path]`, inside the kernel module. Hence: `core` only, no allocation,
//! no `unsafe`, no panics on any input (every slice access is `get`, every
//! offset computation checked or saturating), every loop bounded by a count
//! read from the header, a binary search, or [`MAX_FRES_SCANNED`]; a walk's
//! total work by its [`Budget`].
//!
//! Use: [`Section::parse`] (O(1) header and bounds checks), then once
//! [`Section::validate`] and, for fast lookups, [`Section::build_index`]
//! and [`Section::build_table`] into buffers kept with the bytes; then per
//! PC [`Section::find_row`] on the section [`Section::with_index`] and
//! [`Section::with_table`] give. The [`unwind`] module
//! turns rows into x86-64 and AArch64 stack walks.
//!
//! Format facts were checked against binutils' `include/sframe.h` (2.46)
//! and the SFrame specification; see `rust/sframe/API.md` for the list.

#![forbid(unsafe_code)]

mod budget;
mod bytes;
mod error;
mod fde;
mod fre;
mod header;
mod hints;
mod index;
mod lookup;
mod packed;
mod table;
pub mod unwind;
mod validate;

pub use self::budget::Budget;
pub use self::error::Error;
pub use self::fde::{Fde, FdeIter, FdeType, FreType, PcType};
pub use self::fre::{CfaRule, Fre, FreIter, Reg, RegRule, Row};
pub use self::header::{
    Abi, Layout, Section, Version, FLAG_FDE_FUNC_START_PCREL, FLAG_FDE_SORTED, FLAG_FRAME_POINTER,
};
pub use self::hints::Hints;
pub use self::index::{Index, FDES_PER_BUCKET};
pub use self::lookup::{FoundRow, MAX_FRES_SCANNED};
pub use self::packed::{CommonRow, PackedForm, PackedRow};
pub use self::table::{Table, TableShape, ENTRIES_PER_BUCKET};
