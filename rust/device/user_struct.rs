// SPDX-License-Identifier: GPL-2.0

//! The ioctls' extensible argument structures, copied by the
//! `copy_struct_from_user()` rules: the first `u32` is the caller's size of
//! the structure; fields the caller does not know keep their default,
//! bytes the module does not know must be zero, and what is written back is
//! truncated to the caller's size.
//!
//! Contexts: process context (an ioctl); every read and write may fault.

#![deny(unsafe_code)]

use kernel::{
    prelude::*,
    transmute::{
        AsBytes,
        FromBytes, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// The largest argument structure a caller may pass, unknown tail included.
pub(super) const MAX_STRUCT_SIZE: u32 = 4096;

/// An argument structure read from user space, with the size the caller gave.
pub(super) struct UserStruct<T> {
    pub(super) value: T,
    user_size: u32,
    addr: usize,
}

/// Reads `T` from `addr` by the `copy_struct_from_user()` rules: the first
/// `u32` is the caller's size of the structure, at least `min_size`; fields
/// the caller does not know keep their default; bytes the module does not
/// know must be zero.
pub(super) fn read_struct<T: FromBytes + AsBytes + Default>(
    addr: usize,
    min_size: u32,
) -> Result<UserStruct<T>> {
    let user_size: u32 = UserSlice::new(UserPtr::from_addr(addr), 4)
        .reader()
        .read()?;
    if user_size < min_size {
        return Err(EINVAL);
    }
    if user_size > MAX_STRUCT_SIZE {
        return Err(E2BIG);
    }
    let known = core::mem::size_of::<T>();
    let mut value = T::default();
    let mut reader = UserSlice::new(UserPtr::from_addr(addr), user_size as usize).reader();
    let copied = known.min(user_size as usize);
    reader.read_slice(value.as_bytes_mut().get_mut(..copied).ok_or(EINVAL)?)?;
    let mut chunk = [0u8; 64];
    while !reader.is_empty() {
        let n = reader.len().min(chunk.len());
        let part = chunk.get_mut(..n).ok_or(EINVAL)?;
        reader.read_slice(part)?;
        if part.iter().any(|&b| b != 0) {
            return Err(E2BIG);
        }
    }
    Ok(UserStruct {
        value,
        user_size,
        addr,
    })
}

impl<T> UserStruct<T> {
    /// The size of the structure as the caller knows it.
    pub(super) fn user_size(&self) -> u32 {
        self.user_size
    }
}

/// Writes `s.value` back, truncated to the caller's size (a longer caller
/// structure has a zero tail, checked by [`read_struct`]).
pub(super) fn write_struct<T: AsBytes>(s: &UserStruct<T>) -> Result {
    let bytes = s.value.as_bytes();
    let n = bytes.len().min(s.user_size as usize);
    UserSlice::new(UserPtr::from_addr(s.addr), n)
        .writer()
        .write_slice(bytes.get(..n).ok_or(EINVAL)?)
}
