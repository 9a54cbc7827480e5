/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C declarations the `kernel` crate does not expose, for bindgen
 * (see Kbuild: the output is rust/generated/bindings.rs, included by
 * rust/abstractions/ffi.rs).  Static inline functions Rust cannot call
 * have an out-of-line wrapper in rust/abstractions/helpers.c or
 * rust/arch/<arch>/helpers.c, declared in helpers.h.
 */
#include <linux/capability.h>
#include <linux/ftrace.h>
#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/perf_event.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/srcu.h>
#include <linux/uaccess.h>
#include <linux/unwind_user.h>

#include "helpers.h"
