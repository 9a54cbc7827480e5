// SPDX-License-Identifier: GPL-2.0

//! The C header for loader authors and the Rust definitions must describe
//! the same ABI: compile a C program against `include/uapi/sframe-unwind.h`
//! that prints every size, field offset and constant, and compare.

use sframe_uapi::*;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

macro_rules! layout {
    ($out:ident, $rust:ty, $c:literal, [$($field:ident),* $(,)?]) => {
        $out.push((format!("sizeof {}", $c), core::mem::size_of::<$rust>() as u64));
        $(
            $out.push((
                format!("offsetof {}.{}", $c, stringify!($field)),
                core::mem::offset_of!($rust, $field) as u64,
            ));
        )*
    };
}

fn rust_values() -> Vec<(String, u64)> {
    let mut v = Vec::new();
    layout!(
        v,
        SframeVersion,
        "sframe_version",
        [size, abi_version, module_version, reserved, features]
    );
    layout!(
        v,
        SframeRegister,
        "sframe_register",
        [
            size,
            flags,
            pidfd,
            reserved,
            sframe_data,
            sframe_len,
            sframe_addr,
            text_start,
            text_end,
            handle,
            tag
        ]
    );
    layout!(
        v,
        SframeUnregister,
        "sframe_unregister",
        [size, flags, pidfd, reserved, handle, addr]
    );
    layout!(
        v,
        SframeSectionInfo,
        "sframe_section_info",
        [
            handle,
            text_start,
            text_end,
            sframe_addr,
            sframe_len,
            kernel_bytes,
            version,
            num_fdes,
            shared,
            flags
        ]
    );
    layout!(
        v,
        SframeList,
        "sframe_list",
        [size, flags, pidfd, entry_size, entries, capacity, count]
    );
    layout!(
        v,
        SframeStats,
        "sframe_stats",
        [
            size,
            scope,
            sections,
            copies,
            bytes,
            mms,
            registered,
            unregistered,
            failures,
            unwind,
            kept_copies,
            kept_bytes,
            kept_reused,
            by_tag,
        ]
    );
    layout!(
        v,
        SframeControl,
        "sframe_control",
        [size, mask, value, reserved]
    );
    let consts: &[(&str, u64)] = &[
        ("SFRAME_IOC_MAGIC", SFRAME_IOC_MAGIC.into()),
        ("SFRAME_ABI_VERSION", SFRAME_ABI_VERSION.into()),
        ("SFRAME_IOC_VERSION", SFRAME_IOC_VERSION.into()),
        ("SFRAME_IOC_REGISTER", SFRAME_IOC_REGISTER.into()),
        ("SFRAME_IOC_UNREGISTER", SFRAME_IOC_UNREGISTER.into()),
        ("SFRAME_IOC_LIST", SFRAME_IOC_LIST.into()),
        ("SFRAME_IOC_STATS", SFRAME_IOC_STATS.into()),
        ("SFRAME_IOC_CONTROL", SFRAME_IOC_CONTROL.into()),
        ("SFRAME_VERSION_SIZE_VER0", SFRAME_VERSION_SIZE_VER0.into()),
        (
            "SFRAME_REGISTER_SIZE_VER0",
            SFRAME_REGISTER_SIZE_VER0.into(),
        ),
        (
            "SFRAME_UNREGISTER_SIZE_VER0",
            SFRAME_UNREGISTER_SIZE_VER0.into(),
        ),
        (
            "SFRAME_SECTION_INFO_SIZE_VER0",
            SFRAME_SECTION_INFO_SIZE_VER0.into(),
        ),
        ("SFRAME_LIST_SIZE_VER0", SFRAME_LIST_SIZE_VER0.into()),
        ("SFRAME_STATS_SIZE_VER0", SFRAME_STATS_SIZE_VER0.into()),
        ("SFRAME_STATS_SIZE_VER1", SFRAME_STATS_SIZE_VER1.into()),
        ("SFRAME_STATS_SIZE_VER2", SFRAME_STATS_SIZE_VER2.into()),
        (
            "SFRAME_REGISTER_SIZE_VER1",
            SFRAME_REGISTER_SIZE_VER1.into(),
        ),
        ("SFRAME_CONTROL_SIZE_VER0", SFRAME_CONTROL_SIZE_VER0.into()),
        ("SFRAME_FEAT_V2", SFRAME_FEAT_V2),
        ("SFRAME_FEAT_V3", SFRAME_FEAT_V3),
        ("SFRAME_FEAT_STATS_SCOPE", SFRAME_FEAT_STATS_SCOPE),
        ("SFRAME_FEAT_TAG", SFRAME_FEAT_TAG),
        (
            "SFRAME_STATS_SCOPE_MODULE",
            SFRAME_STATS_SCOPE_MODULE.into(),
        ),
        ("SFRAME_STATS_SCOPE_OWN", SFRAME_STATS_SCOPE_OWN.into()),
        ("SFRAME_F_PIDFD", SFRAME_F_PIDFD.into()),
        ("SFRAME_F_BY_ADDR", SFRAME_F_BY_ADDR.into()),
        ("SFRAME_F_PROCFD", SFRAME_F_PROCFD.into()),
        ("SFRAME_F_TAGGED", SFRAME_F_TAGGED.into()),
        ("SFRAME_F_BY_TAG", SFRAME_F_BY_TAG.into()),
        ("SFRAME_CTL_HOOK_SAMPLE", SFRAME_CTL_HOOK_SAMPLE.into()),
        ("SFRAME_CTL_HOOK_DEFERRED", SFRAME_CTL_HOOK_DEFERRED.into()),
        ("SFRAME_CTL_EXEC", SFRAME_CTL_EXEC.into()),
        ("SFRAME_CTL_FORK", SFRAME_CTL_FORK.into()),
        ("SFRAME_SECTION_EXEC", SFRAME_SECTION_EXEC.into()),
        ("SFRAME_SECTION_INHERITED", SFRAME_SECTION_INHERITED.into()),
        ("SFRAME_FAIL_FORMAT", SFRAME_FAIL_FORMAT as u64),
        ("SFRAME_FAIL_ARGUMENT", SFRAME_FAIL_ARGUMENT as u64),
        ("SFRAME_FAIL_FAULT", SFRAME_FAIL_FAULT as u64),
        ("SFRAME_FAIL_OVERLAP", SFRAME_FAIL_OVERLAP as u64),
        ("SFRAME_FAIL_NOT_TEXT", SFRAME_FAIL_NOT_TEXT as u64),
        ("SFRAME_FAIL_TOO_BIG", SFRAME_FAIL_TOO_BIG as u64),
        ("SFRAME_FAIL_LIMIT", SFRAME_FAIL_LIMIT as u64),
        ("SFRAME_FAIL_PERMISSION", SFRAME_FAIL_PERMISSION as u64),
        ("SFRAME_FAIL_NOT_FOUND", SFRAME_FAIL_NOT_FOUND as u64),
        ("SFRAME_FAIL_NOMEM", SFRAME_FAIL_NOMEM as u64),
        ("SFRAME_FAIL_COUNT", SFRAME_FAIL_COUNT as u64),
        (
            "SFRAME_UNWIND_WALKS_SAMPLE",
            SFRAME_UNWIND_WALKS_SAMPLE as u64,
        ),
        (
            "SFRAME_UNWIND_WALKS_DEFERRED",
            SFRAME_UNWIND_WALKS_DEFERRED as u64,
        ),
        (
            "SFRAME_UNWIND_FRAMES_SFRAME",
            SFRAME_UNWIND_FRAMES_SFRAME as u64,
        ),
        ("SFRAME_UNWIND_FRAMES_FP", SFRAME_UNWIND_FRAMES_FP as u64),
        (
            "SFRAME_UNWIND_FRAMES_ENTRY",
            SFRAME_UNWIND_FRAMES_ENTRY as u64,
        ),
        (
            "SFRAME_UNWIND_FRAMES_SIGNAL",
            SFRAME_UNWIND_FRAMES_SIGNAL as u64,
        ),
        (
            "SFRAME_UNWIND_END_OUTERMOST",
            SFRAME_UNWIND_END_OUTERMOST as u64,
        ),
        (
            "SFRAME_UNWIND_END_MAX_FRAMES",
            SFRAME_UNWIND_END_MAX_FRAMES as u64,
        ),
        (
            "SFRAME_UNWIND_END_BAD_STEP",
            SFRAME_UNWIND_END_BAD_STEP as u64,
        ),
        ("SFRAME_UNWIND_END_FAULT", SFRAME_UNWIND_END_FAULT as u64),
        (
            "SFRAME_UNWIND_END_NO_COVERAGE",
            SFRAME_UNWIND_END_NO_COVERAGE as u64,
        ),
        ("SFRAME_UNWIND_NS_SAMPLE", SFRAME_UNWIND_NS_SAMPLE as u64),
        (
            "SFRAME_UNWIND_NS_DEFERRED",
            SFRAME_UNWIND_NS_DEFERRED as u64,
        ),
        (
            "SFRAME_UNWIND_FRAMES_SAMPLE",
            SFRAME_UNWIND_FRAMES_SAMPLE as u64,
        ),
        (
            "SFRAME_UNWIND_FRAMES_DEFERRED",
            SFRAME_UNWIND_FRAMES_DEFERRED as u64,
        ),
        ("SFRAME_UNWIND_END_BUDGET", SFRAME_UNWIND_END_BUDGET as u64),
        (
            "SFRAME_UNWIND_END_SIGNAL_LIMIT",
            SFRAME_UNWIND_END_SIGNAL_LIMIT as u64,
        ),
        ("SFRAME_UNWIND_COUNT", SFRAME_UNWIND_COUNT as u64),
    ];
    for (name, value) in consts {
        v.push((format!("const {name}"), *value));
    }
    v
}

/// Builds the C program: one `printf` per value Rust knows.
fn c_program(values: &[(String, u64)]) -> String {
    let mut src = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"sframe-unwind.h\"\nint main(void)\n{\n",
    );
    for (key, _) in values {
        let expr = if let Some(t) = key.strip_prefix("sizeof ") {
            format!("sizeof(struct {t})")
        } else if let Some(f) = key.strip_prefix("offsetof ") {
            let (t, field) = f.split_once('.').expect("struct.field");
            format!("offsetof(struct {t}, {field})")
        } else {
            key.strip_prefix("const ").expect("const").to_string()
        };
        src.push_str(&format!(
            "\tprintf(\"%s=%llu\\n\", \"{key}\", (unsigned long long)({expr}));\n"
        ));
    }
    src.push_str("\treturn 0;\n}\n");
    src
}

#[test]
fn c_header_matches_rust_definitions() {
    let values = rust_values();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("abi_layout.c");
    let exe = dir.join("abi_layout");
    std::fs::write(&src, c_program(&values)).expect("write C source");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(root.join("include/uapi"))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("run the C compiler");
    assert!(status.success(), "the C header does not compile");
    let out = Command::new(&exe).output().expect("run the layout program");
    assert!(out.status.success());
    let c: BTreeMap<String, u64> = String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().expect("number")))
        .collect();
    assert_eq!(c.len(), values.len(), "C printed a different set of values");
    let mismatches: Vec<String> = values
        .iter()
        .filter(|(k, v)| c.get(k) != Some(v))
        .map(|(k, v)| format!("{k}: Rust {v}, C {:?}", c.get(k)))
        .collect();
    assert!(
        mismatches.is_empty(),
        "ABI mismatch:\n{}",
        mismatches.join("\n")
    );
}

#[test]
fn version_0_sizes_are_the_struct_sizes() {
    // Version 0 is what the structures are today; a later field appended
    // without a new *_SIZE_VER* constant would break older callers.
    assert_eq!(
        core::mem::size_of::<SframeVersion>() as u32,
        SFRAME_VERSION_SIZE_VER0
    );
    assert_eq!(
        core::mem::size_of::<SframeRegister>() as u32,
        SFRAME_REGISTER_SIZE_VER1
    );
    assert_eq!(
        core::mem::size_of::<SframeUnregister>() as u32,
        SFRAME_UNREGISTER_SIZE_VER0
    );
    assert_eq!(
        core::mem::size_of::<SframeSectionInfo>() as u32,
        SFRAME_SECTION_INFO_SIZE_VER0
    );
    assert_eq!(
        core::mem::size_of::<SframeList>() as u32,
        SFRAME_LIST_SIZE_VER0
    );
    assert_eq!(
        core::mem::size_of::<SframeStats>() as u32,
        SFRAME_STATS_SIZE_VER2
    );
    assert_eq!(
        core::mem::size_of::<SframeControl>() as u32,
        SFRAME_CONTROL_SIZE_VER0
    );
}
