// SPDX-License-Identifier: GPL-2.0

//! A keyed hash with a key chosen at random: SipHash-2-4 (`siphash()`).
//!
//! C headers: [`include/linux/siphash.h`](srctree/include/linux/siphash.h),
//! [`include/linux/random.h`](srctree/include/linux/random.h).
//!
//! With a secret key, no user can choose inputs whose hashes collide:
//! tables keyed by such a hash see collisions by chance only.

use super::ffi;

/// A SipHash key.
#[derive(Clone, Copy)]
pub(crate) struct KeyedHash {
    k0: u64,
    k1: u64,
}

impl KeyedHash {
    /// A new random key.  Process context.
    pub(crate) fn random() -> Self {
        // SAFETY: No preconditions.
        let (k0, k1) = unsafe { (ffi::get_random_u64(), ffi::get_random_u64()) };
        Self { k0, k1 }
    }

    /// The hash of `bytes`, chained from `seed` (the first chunk's key is
    /// this key's first half mixed with `seed`): hashing a long input in
    /// chunks gives one value for the whole.
    pub(crate) fn hash(&self, seed: u64, bytes: &[u8]) -> u64 {
        // SAFETY: `bytes` is valid for reads of its length.
        unsafe { ffi::sframe_siphash(bytes.as_ptr().cast(), bytes.len(), seed, self.k1) }
    }

    /// The seed of a chain whose first input is `value` (a user ID).
    pub(crate) fn seed(&self, value: u64) -> u64 {
        self.k0 ^ value
    }
}
