// SPDX-License-Identifier: GPL-2.0

//! Thin safe abstractions over the C APIs that the `kernel` crate lacks,
//! and the bindings and C helpers behind them.
//!
//! Every `unsafe` block of the module outside `arch/`, `unwind/`'s and
//! `lifecycle/`'s own C-facing files lives here, each with its `// SAFETY:`
//! reasoning.  Nothing here knows the registry, the unwinder or SFrame:
//! these files depend on the `kernel` crate and on each other only, so the
//! module logic above them (`registry/`, `device/ioctl.rs`, the walk) can be
//! compiled with `unsafe_code` denied.
//!
//! Contexts are per item; the rule of thumb: what reads (an RCU tree
//! lookup, the fast clock, a ratelimit check) may run in any context, NMI
//! included; what writes or waits runs in process context.

pub(crate) mod arc_list;
pub(crate) mod atomic_aref;
pub(crate) mod compat;
pub(crate) mod cred;
pub(crate) mod fast_clock;
pub(crate) mod ffi;
pub(crate) mod ftrace;
pub(crate) mod keyed_hash;
pub(crate) mod miscdev;
pub(crate) mod nowait_mem;
pub(crate) mod percpu_counters;
pub(crate) mod ratelimit;
pub(crate) mod rcu_maple;
pub(crate) mod sched;
pub(crate) mod user_mem;
