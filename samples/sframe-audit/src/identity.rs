// SPDX-License-Identifier: GPL-2.0

//! What names a loaded object across processes, for the cache of generated
//! sections: its build-id (`NT_GNU_BUILD_ID`, read from its `PT_NOTE`
//! segments in memory), or failing that the identity of its file (device,
//! inode, size and modification time, from `stat()`).
//!
//! A build-id names the object's contents, so it is the same in every
//! process and survives a copy of the file.  The file identity is weaker
//! (a file replaced between the mapping and the `stat()` is misnamed), so
//! it is only the fallback for the rare object linked without a build-id.

use crate::image::Layout;
use crate::image::Memory;
use std::ffi::CStr;

/// `NT_GNU_BUILD_ID`.
const NT_GNU_BUILD_ID: u32 = 3;
/// Note bytes we read per segment (a build-id note is 36 bytes; objects
/// carry a few more notes, all small).
const MAX_NOTE_BYTES: usize = 4096;
/// Note bytes read without allocating (a build-id note and the ABI and
/// property notes take about 100).
const SMALL_NOTE_BYTES: usize = 256;
/// Longest build-id we accept (SHA-1 gives 20 bytes, `--build-id=0x...`
/// any length).
const MAX_BUILD_ID: usize = 64;

/// The name of an object's generated section in the cache: only ASCII
/// letters, digits and `-`, at most 140 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity(String);

impl Identity {
    /// The object's build-id, if it has one.
    pub fn build_id(mem: &impl Memory, layout: &Layout) -> Option<Self> {
        // Real note segments fit the small buffer; zeroing 4 KiB for each
        // would cost more than reading them.
        let mut small = [0u8; SMALL_NOTE_BYTES];
        let mut large = Vec::new();
        for note in layout.notes() {
            let len = usize::try_from(note.end - note.start)
                .unwrap_or(usize::MAX)
                .min(MAX_NOTE_BYTES);
            let bytes = if len <= SMALL_NOTE_BYTES {
                small.get_mut(..len)?
            } else {
                large.resize(MAX_NOTE_BYTES, 0);
                large.get_mut(..len)?
            };
            if mem.read(note.start, bytes).is_err() {
                continue;
            }
            if let Some(id) = find_build_id(bytes) {
                return Some(Self::of_build_id(id));
            }
        }
        None
    }

    /// The key of the build-id `id`: `b-` and its bytes in lower-case hex.
    /// By hand: formatting each byte costs about as much as reading the
    /// object's headers.
    fn of_build_id(id: &[u8]) -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut key = String::with_capacity(2 + 2 * id.len());
        key.push_str("b-");
        for &b in id {
            for nibble in [b >> 4, b & 0xf] {
                key.push(char::from(HEX[usize::from(nibble)]));
            }
        }
        Self(key)
    }

    /// The identity of the file at `path`, which the object was mapped from.
    pub fn file(path: &CStr) -> Option<Self> {
        // SAFETY: An all-zero `stat` is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { core::mem::zeroed() };
        // SAFETY: `path` is NUL-terminated and `st` a writable `stat`.
        if unsafe { libc::stat(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        Some(Self(format!(
            "f-{:x}-{:x}-{:x}-{:x}.{:x}",
            st.st_dev, st.st_ino, st.st_size, st.st_mtime, st.st_mtime_nsec
        )))
    }

    /// The key, as it appears in file names and cache headers.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The descriptor of the first `NT_GNU_BUILD_ID` note named `GNU` in
/// `notes` (a `PT_NOTE` segment: 4-byte aligned entries).
fn find_build_id(notes: &[u8]) -> Option<&[u8]> {
    let word = |at: usize| -> Option<usize> {
        let b = notes.get(at..at.checked_add(4)?)?;
        usize::try_from(u32::from_ne_bytes(b.try_into().ok()?)).ok()
    };
    let align = |n: usize| n.checked_add(3).map(|n| n & !3);
    let mut at = 0usize;
    while at.checked_add(12)? <= notes.len() {
        let (namesz, descsz, kind) = (word(at)?, word(at + 4)?, word(at + 8)?);
        let name_at = at + 12;
        let desc_at = name_at.checked_add(align(namesz)?)?;
        let next = desc_at.checked_add(align(descsz)?)?;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID as usize
            && name == b"GNU\0"
            && !desc.is_empty()
            && desc.len() <= MAX_BUILD_ID
        {
            return Some(desc);
        }
        // Every note is at least 12 bytes: the walk always advances.
        at = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::this_program;
    use crate::image::OwnMemory;

    fn note(kind: u32, name: &[u8], desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        v.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(name);
        v.resize(v.len().next_multiple_of(4), 0);
        v.extend_from_slice(desc);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    #[test]
    fn finds_the_build_id_among_other_notes() {
        let mut notes = note(1, b"GNU\0", &[0; 16]);
        notes.extend(note(NT_GNU_BUILD_ID, b"XYZ\0", &[1, 2]));
        notes.extend(note(NT_GNU_BUILD_ID, b"GNU\0", &[0xab, 0xcd, 0xef]));
        assert_eq!(find_build_id(&notes), Some([0xab, 0xcd, 0xef].as_slice()));
    }

    #[test]
    fn a_build_id_key_is_its_bytes_in_lower_case_hex() {
        let id: Vec<u8> = (0..=255).collect();
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(Identity::of_build_id(&id).as_str(), format!("b-{hex}"));
        assert_eq!(Identity::of_build_id(&[0x0a, 0xf0]).as_str(), "b-0af0");
    }

    #[test]
    fn truncated_or_absurd_notes_are_no_build_id() {
        let notes = note(NT_GNU_BUILD_ID, b"GNU\0", &[7; 20]);
        for len in 0..notes.len() - 1 {
            assert_eq!(find_build_id(&notes[..len]), None, "{len}");
        }
        let mut huge = notes.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(find_build_id(&huge), None);
        huge[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(find_build_id(&huge), None);
    }

    #[test]
    fn this_test_binary_has_a_build_id_or_a_file() {
        if let Some(id) = Identity::build_id(&OwnMemory, &this_program()) {
            assert!(id.as_str().starts_with("b-"));
        }
        let file = Identity::file(c"/proc/self/exe").unwrap();
        assert!(file.as_str().starts_with("f-"));
        assert!(file
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'));
        assert_eq!(Identity::file(c"/nonexistent"), None);
        assert_eq!(Identity::file(c"/"), None);
    }
}
