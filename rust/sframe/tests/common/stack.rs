// SPDX-License-Identifier: GPL-2.0

//! Hand-made stacks for walk tests: sparse memory and rows from a section.

use std::collections::BTreeMap;

use sframe::unwind::{Lookup, Memory};
use sframe::{Row, Section};

/// Sparse little-endian memory.
#[derive(Default)]
pub struct Mem(pub BTreeMap<u64, u8>);

impl Mem {
    pub fn put64(&mut self, addr: u64, v: u64) {
        for (i, b) in v.to_le_bytes().iter().enumerate() {
            self.0.insert(addr + i as u64, *b);
        }
    }
    pub fn put(&mut self, addr: u64, bytes: &[u8]) {
        for (i, b) in bytes.iter().enumerate() {
            self.0.insert(addr + i as u64, *b);
        }
    }
}

impl Memory for Mem {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b).then(|| u64::from_le_bytes(b))
    }
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        for (i, out) in buf.iter_mut().enumerate() {
            match addr.checked_add(i as u64).and_then(|a| self.0.get(&a)) {
                Some(b) => *out = *b,
                None => return false,
            }
        }
        true
    }
}

pub struct SecLookup<'a>(pub Section<'a>);

impl Lookup for SecLookup<'_> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.0.find_row(pc).ok().flatten()
    }
}
