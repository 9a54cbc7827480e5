// SPDX-License-Identifier: GPL-2.0

//! Why a section (or one lookup in it) was rejected.

use core::fmt;

/// A precise reason why SFrame data was rejected.
///
/// Each variant names one kind of corruption or unsupported input, so the
/// kernel can log exactly what was wrong with a registration
/// ([`Error::as_str`]) and tests can check that each corruption is caught.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The data ends before the 28-byte SFrame header does.
    Truncated,
    /// The first two bytes are not the SFrame magic `0xdee2` in either byte order.
    BadMagic,
    /// The format version is not 2 or 3 (version 1 is obsolete and rejected).
    UnsupportedVersion(u8),
    /// The ABI/arch byte is not one of the four defined identifiers.
    UnsupportedAbi(u8),
    /// The byte order of the magic does not match the one of the ABI.
    EndianMismatch,
    /// A flag bit is set that this version does not define.
    BadFlags,
    /// The auxiliary header runs past the end of the data.
    AuxHeaderOutOfBounds,
    /// The FDE array (`num_fdes` entries at `fdeoff`) runs past the end of the data.
    FdeAreaOutOfBounds,
    /// The FRE area (`fre_len` bytes at `freoff`) runs past the end of the data.
    FreAreaOutOfBounds,
    /// The FDE array and the FRE area overlap.
    AreasOverlap,
    /// An FDE index at or beyond `num_fdes` was asked for.
    FdeIndexOutOfRange,
    /// A function's start address or end address does not fit in 64 bits.
    FunctionStartOverflow,
    /// The FDEs are not sorted by function start address.
    FdesNotSorted,
    /// Two functions' address ranges overlap.
    FdesOverlap,
    /// An FDE has an unknown FRE type (start offsets of 1, 2 or 4 bytes are defined).
    BadFreType,
    /// A V3 FDE has an unknown FDE type (DEFAULT and FLEX are defined).
    BadFdeType,
    /// A PCMASK FDE has a repetition block size of zero.
    BadRepSize,
    /// An FRE, or a V3 function attribute, runs past the end of the FRE area.
    FreOutOfBounds,
    /// The FRE start offsets of a function are not strictly increasing.
    FreStartsNotIncreasing,
    /// An FRE starts beyond the end of its function (or, for PCMASK, of its block).
    FreStartBeyondFunction,
    /// An FRE's data word size field holds the undefined value 3.
    BadDataWordSize,
    /// An FRE has a number of data words its ABI and FDE type cannot interpret.
    BadDataWordCount,
    /// A FLEX control word is malformed (reserved bit set, or CFA not register based).
    BadControlWord,
    /// A FLEX control word names a register number this decoder cannot represent.
    BadRegister,
    /// The FREs of all functions do not add up to the header's `num_fres`.
    CountMismatch,
    /// The bytes used by all functions' FREs do not add up to the header's `fre_len`.
    FreLenMismatch,
    /// More FREs than fit in the FRE area, or a lookup needed to scan more
    /// than [`MAX_FRES_SCANNED`](super::MAX_FRES_SCANNED) FREs.
    TooManyFres,
    /// A lookup needed more work than its walk's
    /// [`Budget`](super::Budget) had left.
    BudgetExhausted,
    /// The ABI's rows are not decoded (s390x: parsed and validated only).
    UnsupportedRows,
    /// The buffer given for a lookup index is shorter than
    /// [`Section::index_words`](super::Section::index_words).
    IndexTooSmall,
    /// A lookup index that was not built for this section.
    BadIndex,
    /// The section's functions span 4 GiB or more: no row table.
    TableSpan,
}

impl Error {
    /// A short human explanation, suitable for a kernel log line.
    pub fn as_str(&self) -> &'static str {
        match self {
            Error::Truncated => "section shorter than the SFrame header",
            Error::BadMagic => "bad SFrame magic",
            Error::UnsupportedVersion(_) => "unsupported SFrame version (only 2 and 3)",
            Error::UnsupportedAbi(_) => "unknown SFrame ABI/arch",
            Error::EndianMismatch => "byte order of magic and ABI disagree",
            Error::BadFlags => "undefined SFrame header flags set",
            Error::AuxHeaderOutOfBounds => "auxiliary header out of bounds",
            Error::FdeAreaOutOfBounds => "FDE array out of bounds",
            Error::FreAreaOutOfBounds => "FRE area out of bounds",
            Error::AreasOverlap => "FDE array and FRE area overlap",
            Error::FdeIndexOutOfRange => "FDE index out of range",
            Error::FunctionStartOverflow => "function address overflows",
            Error::FdesNotSorted => "FDEs not sorted by address",
            Error::FdesOverlap => "functions overlap",
            Error::BadFreType => "unknown FRE type",
            Error::BadFdeType => "unknown FDE type",
            Error::BadRepSize => "PCMASK FDE with zero repetition size",
            Error::FreOutOfBounds => "FRE out of bounds",
            Error::FreStartsNotIncreasing => "FRE start offsets not increasing",
            Error::FreStartBeyondFunction => "FRE starts beyond its function",
            Error::BadDataWordSize => "undefined FRE data word size",
            Error::BadDataWordCount => "FRE data word count not valid for its ABI",
            Error::BadControlWord => "malformed FLEX control word",
            Error::BadRegister => "FLEX register number out of range",
            Error::CountMismatch => "FRE count does not match the header",
            Error::FreLenMismatch => "FRE bytes do not match the header's fre_len",
            Error::TooManyFres => "too many FREs",
            Error::BudgetExhausted => "walk work budget exhausted",
            Error::UnsupportedRows => "rows of this ABI are not decoded",
            Error::IndexTooSmall => "buffer too small for the lookup index",
            Error::BadIndex => "lookup index does not belong to the section",
            Error::TableSpan => "functions span too much for a row table",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UnsupportedVersion(v) => write!(f, "{} ({})", self.as_str(), v),
            Error::UnsupportedAbi(a) => write!(f, "{} ({})", self.as_str(), a),
            _ => f.write_str(self.as_str()),
        }
    }
}
