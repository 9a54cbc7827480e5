// SPDX-License-Identifier: GPL-2.0

//! sframe-unwind: complete user-space callchains for perf on programs built
//! without frame pointers, by unwinding with SFrame (`.sframe`) data.
//!
//! The module creates `/dev/sframe`, whose ioctls register SFrame sections
//! for a process (see `Documentation/ioctl.rst`).

#[cfg(CONFIG_HAVE_UNWIND_USER_SFRAME)]
compile_error!("this kernel unwinds with SFrame natively; sframe-unwind is not needed");

use abstractions::compat::param;
use kernel::prelude::*;

mod abstractions;
mod arch;
mod device;
mod lifecycle;
mod registry;
#[path = "sframe/src/decoder/mod.rs"]
pub mod sframe;
mod switches;
#[path = "uapi/src/abi.rs"]
#[expect(dead_code, reason = "the ABI also defines what only user space uses")]
#[allow(unreachable_pub, reason = "the ABI's items are public for user space")]
mod uapi;
mod unwind;

module! {
    type: SframeModule,
    name: "sframe_unwind",
    authors: ["The sframe-unwind developers"],
    description: "SFrame user-space unwinding for perf",
    license: "GPL",
    params: {
        max_section_bytes: u64 {
            default: 16777216,
            description: "Largest SFrame section accepted, in bytes (E2BIG above)",
        },
        max_sections_per_mm: u32 {
            default: 4096,
            description: "Most registered sections per process (ENOSPC beyond)",
        },
        max_total_bytes: u64 {
            default: 268435456,
            description: "Most kernel bytes held for distinct sections, module-wide (ENOSPC beyond)",
        },
        max_total_sections: u64 {
            default: 262144,
            description: "Most registered sections, module-wide (ENOSPC beyond)",
        },
        max_bytes_per_user: u64 {
            default: 33554432,
            description: "Most kernel bytes held for one user's sections (ENOSPC beyond)",
        },
        max_sections_per_user: u32 {
            default: 16384,
            description: "Most registered sections of one user (ENOSPC beyond)",
        },
        max_kept_bytes: u64 {
            default: 67108864,
            description: "Most kernel bytes kept for copies no registration uses, for the next start (a quarter per user; 0: none)",
        },
        unwind_fp_only: u32 {
            default: 0,
            description: "Benchmarks only: ignore SFrame rows, unwind by frame pointers",
        },
    },
}

/// Fields drop in declaration order: the hooks first (no unwinder runs
/// after), then the device (no new ioctl), then the probes and the unmap
/// watch (no task work or maintenance runs after), the registry last.
#[pin_data]
struct SframeModule {
    #[pin]
    _hooks: unwind::Hooks<unwind::SampleHook, unwind::DeferredHook>,
    #[pin]
    _device: device::Device,
    #[pin]
    _lifecycle: lifecycle::Lifecycle,
    _registry: registry::RegistryHandle,
}

impl kernel::InPlaceModule for SframeModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!(
            "sframe-unwind {}.{}.{} loaded\n",
            device::MODULE_VERSION >> 16,
            (device::MODULE_VERSION >> 8) & 0xff,
            device::MODULE_VERSION & 0xff
        );
        let limits = registry::Limits {
            max_section_bytes: param(&module_parameters::max_section_bytes),
            max_sections_per_mm: param(&module_parameters::max_sections_per_mm),
            max_total_bytes: param(&module_parameters::max_total_bytes),
            max_total_sections: param(&module_parameters::max_total_sections),
            max_bytes_per_user: param(&module_parameters::max_bytes_per_user),
            max_sections_per_user: param(&module_parameters::max_sections_per_user),
            max_kept_bytes: param(&module_parameters::max_kept_bytes),
        };
        // Before the device: an ioctl may name another process at once.
        device::init();
        // The registry exists before the device: an ioctl may come at once.
        try_pin_init!(Self {
            _registry: registry::RegistryHandle::new(limits)?,
            // Registers from the next exec or fork on.
            _lifecycle <- lifecycle::Lifecycle::new(),
            _device <- device::register(module),
            // Last: the unwinder uses the registry from the first sample on.
            _hooks <- {
                unwind::set_fp_only(param(&module_parameters::unwind_fp_only) != 0);
                unwind::Hooks::new()
            },
        })
    }
}
