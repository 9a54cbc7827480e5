// SPDX-License-Identifier: GPL-2.0

//! The unwinder: perf's two user-stack paths, replaced for the tasks that
//! have SFrame sections.
//!
//! - [`walk`](self::walk): which calls go to the SFrame unwinder, and the
//!   two replacements (the logic, without `unsafe`).
//! - `hooks`: the two ftrace hooks, installed at load and removed safely
//!   at unload; `targets`: the two replaced functions seen from safe Rust.
//! - `perf`, `deferred_trace`: the two outputs (perf's callchain store,
//!   `unwind_user()`'s trace); `current_task`: what the decision asks of
//!   `current`.  The user stack is read with `abstractions::user_mem`.
//! - `counters`: `SFRAME_IOC_STATS.unwind[]`.
//!
//! Contexts: the sample path runs in NMI or IRQ context, the deferred path
//! in task context with faults allowed; neither takes a sleeping lock, and
//! rows come from the registry's walk-time lookup only
//! ([`crate::registry::lookup`], RCU).  Only [`hooks::Hooks`]'s
//! installation and removal (module load and unload) sleep.

mod counters;
mod current_task;
mod deferred_trace;
mod hooks;
mod perf;
mod targets;
mod walk;

pub(crate) use counters::snapshot as counters_snapshot;
pub(crate) use hooks::Hooks;
pub(crate) use walk::{
    set_fp_only,
    DeferredHook,
    SampleHook, //
};
