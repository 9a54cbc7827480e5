// SPDX-License-Identifier: GPL-2.0
/* The helpers again, for the test module (an object may belong to one module only). */
#include "helpers.c"
