// SPDX-License-Identifier: GPL-2.0

//! Bounds-checked reads of target-endian integers.
//!
//! Every read returns `None` instead of panicking when it would leave the
//! slice, so the callers turn a short read into the error that fits where
//! they read.

/// A byte slice and the byte order of the section it came from.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bytes<'a> {
    data: &'a [u8],
    big_endian: bool,
}

impl<'a> Bytes<'a> {
    pub(super) fn new(data: &'a [u8], big_endian: bool) -> Self {
        Bytes { data, big_endian }
    }

    pub(super) fn len(&self) -> usize {
        self.data.len()
    }

    /// The `len` bytes at `off`, as a new reader with the same byte order.
    pub(super) fn sub(&self, off: usize, len: usize) -> Option<Bytes<'a>> {
        let end = off.checked_add(len)?;
        let data = self.data.get(off..end)?;
        Some(Bytes {
            data,
            big_endian: self.big_endian,
        })
    }

    fn array<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        let end = off.checked_add(N)?;
        let bytes = self.data.get(off..end)?;
        <[u8; N]>::try_from(bytes).ok()
    }

    pub(super) fn u8(&self, off: usize) -> Option<u8> {
        self.data.get(off).copied()
    }

    pub(super) fn u16(&self, off: usize) -> Option<u16> {
        let b = self.array::<2>(off)?;
        Some(if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        })
    }

    pub(super) fn u32(&self, off: usize) -> Option<u32> {
        let b = self.array::<4>(off)?;
        Some(if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    }

    pub(super) fn u64(&self, off: usize) -> Option<u64> {
        let b = self.array::<8>(off)?;
        Some(if self.big_endian {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    /// An unsigned value of 1, 2 or 4 bytes, widened to `u32`.
    pub(super) fn unsigned(&self, off: usize, size: usize) -> Option<u32> {
        match size {
            1 => self.u8(off).map(u32::from),
            2 => self.u16(off).map(u32::from),
            4 => self.u32(off),
            _ => None,
        }
    }

    /// A signed value of 1, 2 or 4 bytes, sign-extended to `i32`.
    pub(super) fn signed(&self, off: usize, size: usize) -> Option<i32> {
        match size {
            1 => self.u8(off).map(|v| i32::from(i8::from_ne_bytes([v]))),
            2 => self
                .u16(off)
                .map(|v| i32::from(i16::from_ne_bytes(v.to_ne_bytes()))),
            4 => self.u32(off).map(|v| i32::from_ne_bytes(v.to_ne_bytes())),
            _ => None,
        }
    }
}

/// Widens a `u32` offset or count; on a (hypothetical) 16-bit target the
/// result saturates so that the following bounds check fails instead.
pub(super) fn usize_from(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}
