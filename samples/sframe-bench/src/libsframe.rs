// SPDX-License-Identifier: GPL-2.0

//! binutils' libsframe, loaded at run time: the reference decoder.
//!
//! Only the few entry points the benchmark needs are declared, from
//! binutils' `include/sframe-api.h` (2.41 to 2.45, `libsframe.so.1` and
//! `.so.2`). The FRE out-parameter is an opaque buffer larger than any
//! version's `sframe_frame_row_entry` (20 bytes in 2.44), so the layout is
//! never assumed.
//!
//! `libsframe.so.3` (binutils 2.46+, SFrame V3) changed the API: the PC is
//! 64 bits wide and the FRE accessors take more arguments. Only
//! `sframe_find_fre` is used with it, so its rows are not compared.

use crate::Cfa;
use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use libloading::Library as Dl;
use std::ffi::c_char;
use std::ffi::c_int;
use std::ffi::c_uint;
use std::ffi::c_void;
use std::ptr::NonNull;

/// Room for `sframe_frame_row_entry`, whatever its version.
#[repr(C, align(8))]
struct FreBuf([u8; 128]);

type DecodeFn = unsafe extern "C" fn(*const c_char, usize, *mut c_int) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut *mut c_void);
type FindFreFn = unsafe extern "C" fn(*mut c_void, i32, *mut FreBuf) -> c_int;
type FindFre3Fn = unsafe extern "C" fn(*mut c_void, i64, *mut FreBuf) -> c_int;
type BaseRegFn = unsafe extern "C" fn(*mut FreBuf, *mut c_int) -> c_uint;
type CfaOffsetFn = unsafe extern "C" fn(*mut c_void, *mut FreBuf, *mut c_int) -> i32;

/// The lookup entry points of one libsframe ABI.
enum Lookup {
    /// `libsframe.so.1` and `.so.2`.
    V2 {
        find_fre: FindFreFn,
        base_reg: BaseRegFn,
        cfa_offset: CfaOffsetFn,
    },
    /// `libsframe.so.3`: lookups only.
    V3 { find_fre: FindFre3Fn },
}

/// The loaded library and its entry points.
pub(crate) struct Library {
    name: String,
    decode: DecodeFn,
    free: FreeFn,
    lookup: Lookup,
    // Last: the function pointers above are valid while this is loaded.
    _dl: Dl,
}

impl Library {
    /// Loads `name`, or the first libsframe soname found.
    pub(crate) fn open(name: Option<&str>) -> Result<Self> {
        let names = match name {
            Some(name) => vec![name],
            None => vec!["libsframe.so.1", "libsframe.so.2", "libsframe.so.3"],
        };
        let mut last = anyhow!("no libsframe name given");
        for name in names {
            // SAFETY: libsframe's initialisers only set up its own state.
            match unsafe { Dl::new(name) } {
                Ok(dl) => return Self::bind(name, dl),
                Err(err) => last = anyhow!("{name}: {err}"),
            }
        }
        Err(last)
    }

    fn bind(name: &str, dl: Dl) -> Result<Self> {
        // SAFETY: each type matches the prototype in binutils'
        // `sframe-api.h` for the soname's ABI; the pointers are used only
        // while `dl` is alive, as it is stored in the same struct.
        unsafe {
            let lookup = if name.ends_with(".so.3") {
                Lookup::V3 {
                    find_fre: *dl.get(b"sframe_find_fre\0").context("sframe_find_fre")?,
                }
            } else {
                Lookup::V2 {
                    find_fre: *dl.get(b"sframe_find_fre\0").context("sframe_find_fre")?,
                    base_reg: *dl
                        .get(b"sframe_fre_get_base_reg_id\0")
                        .context("sframe_fre_get_base_reg_id")?,
                    cfa_offset: *dl
                        .get(b"sframe_fre_get_cfa_offset\0")
                        .context("sframe_fre_get_cfa_offset")?,
                }
            };
            Ok(Self {
                name: name.to_string(),
                decode: *dl.get(b"sframe_decode\0").context("sframe_decode")?,
                free: *dl
                    .get(b"sframe_decoder_free\0")
                    .context("sframe_decoder_free")?,
                lookup,
                _dl: dl,
            })
        }
    }

    /// Decodes a section (libsframe copies it).
    pub(crate) fn decode(&self, section: &[u8]) -> Result<Decoder<'_>> {
        let mut err: c_int = 0;
        // SAFETY: the pointer and length describe `section`, which
        // libsframe only reads (and copies) during the call.
        let ctx = unsafe { (self.decode)(section.as_ptr().cast(), section.len(), &mut err) };
        let ctx = NonNull::new(ctx)
            .ok_or_else(|| anyhow!("{}: sframe_decode failed (error {err})", self.name))?;
        Ok(Decoder { lib: self, ctx })
    }
}

/// A decoded section.
pub(crate) struct Decoder<'a> {
    lib: &'a Library,
    ctx: NonNull<c_void>,
}

impl Decoder<'_> {
    pub(crate) fn library_name(&self) -> &str {
        &self.lib.name
    }

    /// Whether [`Self::find_cfa`] returns real CFA rules (else only
    /// whether a row was found).
    pub(crate) fn gives_rows(&self) -> bool {
        matches!(self.lib.lookup, Lookup::V2 { .. })
    }

    /// `sframe_find_fre` for a PC given relative to the section start (how
    /// libsframe takes it), then the FRE's CFA rule. With `libsframe.so.3`
    /// a found row is reported as CFA `r0+0`.
    pub(crate) fn find_cfa(&self, pc: i64) -> Option<Cfa> {
        let mut fre = FreBuf([0; 128]);
        let mut err: c_int = 0;
        let ctx = self.ctx.as_ptr();
        // SAFETY: `ctx` came from `sframe_decode` and is not freed before
        // `self` is dropped; `fre` is larger than the structure written.
        unsafe {
            match self.lib.lookup {
                Lookup::V3 { find_fre } => {
                    (find_fre(ctx, pc, &mut fre) == 0).then_some(Cfa { reg: 0, offset: 0 })
                }
                Lookup::V2 {
                    find_fre,
                    base_reg,
                    cfa_offset,
                } => {
                    if find_fre(ctx, i32::try_from(pc).ok()?, &mut fre) != 0 {
                        return None;
                    }
                    let base = base_reg(&mut fre, &mut err);
                    let offset = cfa_offset(ctx, &mut fre, &mut err);
                    if err != 0 {
                        return None;
                    }
                    // libsframe's base register ids: 0 FP, 1 SP.
                    let reg = if base == 1 { 7 } else { 6 };
                    Some(Cfa {
                        reg,
                        offset: offset.into(),
                    })
                }
            }
        }
    }
}

impl Drop for Decoder<'_> {
    fn drop(&mut self) {
        let mut ctx = self.ctx.as_ptr();
        // SAFETY: `ctx` came from `sframe_decode` and is freed once.
        unsafe { (self.lib.free)(&mut ctx) };
    }
}
