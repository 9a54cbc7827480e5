// SPDX-License-Identifier: GPL-2.0

//! The `/dev/sframe` ioctl ABI for user-space Rust.
//!
//! The definitions live in `abi.rs`, which the kernel module also compiles,
//! so the module and the tools cannot drift apart; `include/uapi/sframe-unwind.h`
//! is the C rendering, checked against these by a test.

#![no_std]

mod abi;
pub use abi::*;
