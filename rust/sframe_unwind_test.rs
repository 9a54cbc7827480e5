// SPDX-License-Identifier: GPL-2.0

//! KUnit tests for sframe-unwind.
//!
//! A module of its own, so the shipped module neither runs tests at every
//! `insmod` nor depends on `CONFIG_KUNIT`.  Loading it runs the suites
//! (`CONFIG_KUNIT_DEFAULT_ENABLED`); results are in
//! `/sys/kernel/debug/kunit/<suite>/results`.  The code under test is
//! compiled here from the same sources as the module, with the kernel's
//! compiler flags (overflow checks included), mounted at the same paths as
//! in the module; each suite is the `kunit.rs` of the folder whose code it
//! tests.

use kernel::prelude::*;

#[path = "uapi/src/abi.rs"]
#[expect(dead_code, reason = "the ABI also defines what only user space uses")]
#[allow(unreachable_pub, reason = "the ABI's items are public for user space")]
mod uapi;

#[path = "sframe/src/decoder/mod.rs"]
pub mod sframe;

// The abstractions over C, whole, and their suite (the RCU maple tree).
#[allow(
    dead_code,
    unused_imports,
    unused_macros,
    reason = "only some of them are under test"
)]
mod abstractions;
#[path = "abstractions/kunit.rs"]
mod abstractions_kunit;

// The architecture's part, whole, and its suite (the call-site check).
#[allow(dead_code, unused_imports, reason = "only some of it is under test")]
mod arch;
#[cfg(CONFIG_X86_64)]
#[path = "arch/x86_64/kunit.rs"]
mod arch_kunit;
#[cfg(CONFIG_ARM64)]
#[path = "arch/arm64/kunit.rs"]
mod arch_kunit;

// The switches the hooks turn on.
#[allow(dead_code, reason = "the lifecycle's bits are not under test")]
mod switches;

// The ioctl ABI's encoding.
mod device {
    mod kunit;
}

// The unwinder's counters, perf's callchain store, the deferred trace, the
// hooks' installation against a busy target, and what the hooks ask of the
// current task.
mod unwind {
    #[expect(dead_code, reason = "the module-wide counters are not under test")]
    mod counters;
    #[allow(dead_code, reason = "only the task's checks are under test")]
    mod current_task;
    mod deferred_trace;
    #[allow(
        dead_code,
        reason = "the deferred guard and the capability check are not under test"
    )]
    mod hooks;
    mod kunit;
    mod perf;
}

// Where an exec'd program keeps its SFrame section.
mod lifecycle {
    #[expect(dead_code, reason = "the log's wording is not under test")]
    mod exec_image;
    mod kunit;
}

// The decoder as registration uses it, and a copy's lookup index.
mod registry {
    #[allow(dead_code, reason = "why a build failed is not under test")]
    mod copy_index;
    mod kunit;
}

module! {
    type: SframeUnwindTest,
    name: "sframe_unwind_test",
    authors: ["The sframe-unwind developers"],
    description: "KUnit tests for sframe-unwind",
    license: "GPL",
}

struct SframeUnwindTest;

impl kernel::Module for SframeUnwindTest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(SframeUnwindTest)
    }
}
