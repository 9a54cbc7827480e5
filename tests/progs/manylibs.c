// SPDX-License-Identifier: GPL-2.0
/*
 * manylibs: a program linked against 50 shared libraries (libmany01.so ..
 * libmany50.so, all with SFrame), to measure what the audit library adds
 * to start-up: each is mapped, handed to la_objopen, and registered.
 */

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

int main(void)
{
	int x = 0;

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
