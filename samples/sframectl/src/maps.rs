// SPDX-License-Identifier: GPL-2.0

//! `/proc/PID/maps`: which object a range of a process belongs to, and
//! where each object's ELF header is mapped.

use std::io;
use std::ops::Range;

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// The addresses mapped.
    pub(crate) range: Range<u64>,
    /// `rwxp`-style permissions.
    pub(crate) perms: String,
    /// Offset in the file of `range.start`.
    pub(crate) offset: u64,
    /// Device and inode of the file (0 for anonymous memory).
    pub(crate) inode: u64,
    /// The path, `[vdso]`-style name, or empty.
    pub(crate) path: String,
}

impl Mapping {
    /// Whether this maps a file's start, where an ELF object keeps its
    /// header: one candidate per loaded object (the vDSO included).
    pub(crate) fn maps_file_start(&self) -> bool {
        self.offset == 0 && (self.path.starts_with('/') || self.path == "[vdso]")
    }
}

/// Parses one line; `None` for a line that is not a mapping.
fn parse_line(line: &str) -> Option<Mapping> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.to_owned();
    let offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let _dev = fields.next()?;
    let inode = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("").trim_start().to_owned();
    Some(Mapping {
        range: u64::from_str_radix(start, 16).ok()?..u64::from_str_radix(end, 16).ok()?,
        perms,
        offset,
        inode,
        path,
    })
}

/// Parses the text of a maps file.
pub(crate) fn parse(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_line).collect()
}

/// Reads `/proc/PID/maps`.
pub(crate) fn read(pid: i32) -> io::Result<Vec<Mapping>> {
    Ok(parse(&std::fs::read_to_string(format!(
        "/proc/{pid}/maps"
    ))?))
}

/// The mapping containing `addr`.
pub(crate) fn owner(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    maps.iter().find(|m| m.range.contains(&addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:01 1234                       /usr/bin/prog
55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:01 1234                       /usr/bin/prog
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7f1000000000-7f1000001000 r--p 00000000 fe:01 99                         /opt/my lib/libx.so (deleted)
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
";

    #[test]
    fn parses_paths_with_spaces_and_anonymous_mappings() {
        let maps = parse(MAPS);
        assert_eq!(maps.len(), 6);
        assert_eq!(maps[1].range, 0x55d0_c0a0_1000..0x55d0_c0a0_2000);
        assert_eq!(maps[1].perms, "r-xp");
        assert_eq!(maps[1].offset, 0x1000);
        assert_eq!(maps[1].inode, 1234);
        assert_eq!(maps[2].path, "");
        assert_eq!(maps[3].path, "/opt/my lib/libx.so (deleted)");
    }

    #[test]
    fn object_starts_and_owners() {
        let maps = parse(MAPS);
        let starts: Vec<_> = maps
            .iter()
            .filter(|m| m.maps_file_start())
            .map(|m| m.path.as_str())
            .collect();
        assert_eq!(
            starts,
            ["/usr/bin/prog", "/opt/my lib/libx.so (deleted)", "[vdso]"]
        );
        assert_eq!(
            owner(&maps, 0x55d0_c0a0_1800).map(|m| m.path.as_str()),
            Some("/usr/bin/prog")
        );
        assert_eq!(owner(&maps, 0x10), None);
    }

    #[test]
    fn ignores_malformed_lines() {
        assert!(parse("garbage\n\n1-2 r--p zz 00:00 0\n").is_empty());
    }

    #[test]
    fn reads_our_own_maps() {
        let maps = read(std::process::id() as i32).unwrap();
        let here = reads_our_own_maps as *const () as u64;
        assert!(owner(&maps, here).is_some_and(|m| m.perms.contains('x')));
    }
}
