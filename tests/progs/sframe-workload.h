/* SPDX-License-Identifier: GPL-2.0 */
/* The end-to-end workload's shared library (libsframe-workload.so). */
#ifndef SFRAME_WORKLOAD_H
#define SFRAME_WORKLOAD_H

#define RECURSE_DEPTH 64

unsigned long workload_lib_entry(unsigned long n);

#endif
