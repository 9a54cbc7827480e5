//! Host build of the SFrame decoder.
//!
//! The decoder itself lives in `decoder/`, which the kernel module includes
//! verbatim as a module; this file only makes it a `no_std` host crate so it
//! can be tested, fuzzed and benchmarked with Cargo.

#![no_std]

mod decoder;

pub use decoder::*;
