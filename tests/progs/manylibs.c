// SPDX-License-Identifier: GPL-2.0
/*
 * manylibs: a program linked against 50 shared libraries (libmany01.so ..
 * libmany50.so, all with SFrame), to measure what the audit library adds
 * to start-up: each is mapped, handed to la_objopen, and registered.
 *
 * manylibs chain SECONDS: for SECONDS, a chain of calls through every
 * library in turn (many_link_01 in libmany01.so calls many_link_02 in
 * libmany02.so, and so on), the last spinning: 50 frames in 50 objects
 * under main, for the unwinder's walks that cross more objects than it
 * keeps at once.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

int many_01(int);
int many_02(int);
int many_03(int);
int many_04(int);
int many_05(int);
int many_06(int);
int many_07(int);
int many_08(int);
int many_09(int);
int many_10(int);
int many_11(int);
int many_12(int);
int many_13(int);
int many_14(int);
int many_15(int);
int many_16(int);
int many_17(int);
int many_18(int);
int many_19(int);
int many_20(int);
int many_21(int);
int many_22(int);
int many_23(int);
int many_24(int);
int many_25(int);
int many_26(int);
int many_27(int);
int many_28(int);
int many_29(int);
int many_30(int);
int many_31(int);
int many_32(int);
int many_33(int);
int many_34(int);
int many_35(int);
int many_36(int);
int many_37(int);
int many_38(int);
int many_39(int);
int many_40(int);
int many_41(int);
int many_42(int);
int many_43(int);
int many_44(int);
int many_45(int);
int many_46(int);
int many_47(int);
int many_48(int);
int many_49(int);
int many_50(int);

typedef int many_link(const void *links, int i, long spins);
many_link many_link_01;
many_link many_link_02;
many_link many_link_03;
many_link many_link_04;
many_link many_link_05;
many_link many_link_06;
many_link many_link_07;
many_link many_link_08;
many_link many_link_09;
many_link many_link_10;
many_link many_link_11;
many_link many_link_12;
many_link many_link_13;
many_link many_link_14;
many_link many_link_15;
many_link many_link_16;
many_link many_link_17;
many_link many_link_18;
many_link many_link_19;
many_link many_link_20;
many_link many_link_21;
many_link many_link_22;
many_link many_link_23;
many_link many_link_24;
many_link many_link_25;
many_link many_link_26;
many_link many_link_27;
many_link many_link_28;
many_link many_link_29;
many_link many_link_30;
many_link many_link_31;
many_link many_link_32;
many_link many_link_33;
many_link many_link_34;
many_link many_link_35;
many_link many_link_36;
many_link many_link_37;
many_link many_link_38;
many_link many_link_39;
many_link many_link_40;
many_link many_link_41;
many_link many_link_42;
many_link many_link_43;
many_link many_link_44;
many_link many_link_45;
many_link many_link_46;
many_link many_link_47;
many_link many_link_48;
many_link many_link_49;
many_link many_link_50;

static many_link *const links[] = {
	many_link_01,
	many_link_02,
	many_link_03,
	many_link_04,
	many_link_05,
	many_link_06,
	many_link_07,
	many_link_08,
	many_link_09,
	many_link_10,
	many_link_11,
	many_link_12,
	many_link_13,
	many_link_14,
	many_link_15,
	many_link_16,
	many_link_17,
	many_link_18,
	many_link_19,
	many_link_20,
	many_link_21,
	many_link_22,
	many_link_23,
	many_link_24,
	many_link_25,
	many_link_26,
	many_link_27,
	many_link_28,
	many_link_29,
	many_link_30,
	many_link_31,
	many_link_32,
	many_link_33,
	many_link_34,
	many_link_35,
	many_link_36,
	many_link_37,
	many_link_38,
	many_link_39,
	many_link_40,
	many_link_41,
	many_link_42,
	many_link_43,
	many_link_44,
	many_link_45,
	many_link_46,
	many_link_47,
	many_link_48,
	many_link_49,
	many_link_50,
	NULL,
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The chain through every library, again and again, for `seconds`. */
static int chain(double seconds)
{
	double end = now() + seconds;
	int depth = 0;

	while (now() < end)
		depth = links[0](links, 0, 100000);
	return depth == 50 ? 0 : 1;
}

int main(int argc, char **argv)
{
	int x = 0;

	if (argc == 3 && !strcmp(argv[1], "chain"))
		return chain(atof(argv[2]));

	x = many_01(x);
	x = many_02(x);
	x = many_03(x);
	x = many_04(x);
	x = many_05(x);
	x = many_06(x);
	x = many_07(x);
	x = many_08(x);
	x = many_09(x);
	x = many_10(x);
	x = many_11(x);
	x = many_12(x);
	x = many_13(x);
	x = many_14(x);
	x = many_15(x);
	x = many_16(x);
	x = many_17(x);
	x = many_18(x);
	x = many_19(x);
	x = many_20(x);
	x = many_21(x);
	x = many_22(x);
	x = many_23(x);
	x = many_24(x);
	x = many_25(x);
	x = many_26(x);
	x = many_27(x);
	x = many_28(x);
	x = many_29(x);
	x = many_30(x);
	x = many_31(x);
	x = many_32(x);
	x = many_33(x);
	x = many_34(x);
	x = many_35(x);
	x = many_36(x);
	x = many_37(x);
	x = many_38(x);
	x = many_39(x);
	x = many_40(x);
	x = many_41(x);
	x = many_42(x);
	x = many_43(x);
	x = many_44(x);
	x = many_45(x);
	x = many_46(x);
	x = many_47(x);
	x = many_48(x);
	x = many_49(x);
	x = many_50(x);
	return x == 50 ? 0 : 1;
}
