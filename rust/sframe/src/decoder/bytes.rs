// SPDX-License-Identifier: GPL-2.0

//! Bounds-checked reads of target-endian integers.
//!
//! Every read returns `None` instead of panicking when it would leave the
//! slice, so the callers turn a short read into the error that fits where
//! they read.
//!
//! The lookup path reads whole fixed-size records with one bounds check
//! ([`array_at`]) and decodes them with a [`ByteOrder`] chosen once per
//! lookup, so its loops test neither bounds nor byte order per field.

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

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.data.len()
    }

    /// The bytes themselves, for the record readers of the lookup path.
    #[inline]
    pub(super) fn as_slice(&self) -> &'a [u8] {
        self.data
    }

    /// Whether multi-byte values are big endian.
    #[inline]
    pub(super) fn big_endian(&self) -> bool {
        self.big_endian
    }

    pub(super) fn u8(&self, off: usize) -> Option<u8> {
        self.data.get(off).copied()
    }

    pub(super) fn u16(&self, off: usize) -> Option<u16> {
        let b = array_at(self.data, off)?;
        Some(if self.big_endian {
            Be::u16(b)
        } else {
            Le::u16(b)
        })
    }

    pub(super) fn u32(&self, off: usize) -> Option<u32> {
        let b = array_at(self.data, off)?;
        Some(if self.big_endian {
            Be::u32(b)
        } else {
            Le::u32(b)
        })
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
}

/// The `N` bytes at `off` of `data`, with a single bounds check.
#[inline(always)]
pub(super) fn array_at<const N: usize>(data: &[u8], off: usize) -> Option<[u8; N]> {
    let end = off.checked_add(N)?;
    let bytes = data.get(off..end)?;
    <[u8; N]>::try_from(bytes).ok()
}

/// A byte order, as a type: code generic over it is compiled once per
/// order, so a loop decodes fields without testing the order each time.
pub(super) trait ByteOrder: Copy {
    /// Decodes a `u16`.
    fn u16(b: [u8; 2]) -> u16;
    /// Decodes a `u32`.
    fn u32(b: [u8; 4]) -> u32;
    /// Decodes a `u64`.
    fn u64(b: [u8; 8]) -> u64;

    /// Decodes an `i32`.
    #[inline(always)]
    fn i32(b: [u8; 4]) -> i32 {
        i32::from_ne_bytes(Self::u32(b).to_ne_bytes())
    }

    /// Decodes an `i64`.
    #[inline(always)]
    fn i64(b: [u8; 8]) -> i64 {
        i64::from_ne_bytes(Self::u64(b).to_ne_bytes())
    }
}

/// Little endian.
#[derive(Clone, Copy, Debug)]
pub(super) struct Le;

/// Big endian.
#[derive(Clone, Copy, Debug)]
pub(super) struct Be;

impl ByteOrder for Le {
    #[inline(always)]
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_le_bytes(b)
    }
    #[inline(always)]
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_le_bytes(b)
    }
    #[inline(always)]
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_le_bytes(b)
    }
}

impl ByteOrder for Be {
    #[inline(always)]
    fn u16(b: [u8; 2]) -> u16 {
        u16::from_be_bytes(b)
    }
    #[inline(always)]
    fn u32(b: [u8; 4]) -> u32 {
        u32::from_be_bytes(b)
    }
    #[inline(always)]
    fn u64(b: [u8; 8]) -> u64 {
        u64::from_be_bytes(b)
    }
}

/// Widens a `u32` offset or count; on a (hypothetical) 16-bit target the
/// result saturates so that the following bounds check fails instead.
#[inline(always)]
pub(super) fn usize_from(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}
