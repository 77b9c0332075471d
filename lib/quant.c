#include "quant.h"
#include "quant_impl.h"

#include <stdio.h>
#include <strings.h>

static const struct quant_traits traits[QUANT_TYPE_COUNT] = {
	[0]  = { "F32", 1, 4, 0 },		[1]  = { "F16", 1, 2, 0 },
	[2]  = { "Q4_0", 32, 18, 0 },		[3]  = { "Q4_1", 32, 20, 0 },
	[4]  = { "Q4_2 (removed)", 0, 0, 1 },	[5]  = { "Q4_3 (removed)", 0, 0, 1 },
	[6]  = { "Q5_0", 32, 22, 0 },		[7]  = { "Q5_1", 32, 24, 0 },
	[8]  = { "Q8_0", 32, 34, 0 },		[9]  = { "Q8_1", 32, 36, 0 },
	[10] = { "Q2_K", 256, 84, 0 },		[11] = { "Q3_K", 256, 110, 0 },
	[12] = { "Q4_K", 256, 144, 0 },		[13] = { "Q5_K", 256, 176, 0 },
	[14] = { "Q6_K", 256, 210, 0 },		[15] = { "Q8_K", 256, 292, 0 },
	[16] = { "IQ2_XXS", 256, 66, 0 },	[17] = { "IQ2_XS", 256, 74, 0 },
	[18] = { "IQ3_XXS", 256, 98, 0 },	[19] = { "IQ1_S", 256, 50, 0 },
	[20] = { "IQ4_NL", 32, 18, 0 },		[21] = { "IQ3_S", 256, 110, 0 },
	[22] = { "IQ2_S", 256, 82, 0 },		[23] = { "IQ4_XS", 256, 136, 0 },
	[24] = { "I8", 1, 1, 0 },		[25] = { "I16", 1, 2, 0 },
	[26] = { "I32", 1, 4, 0 },		[27] = { "I64", 1, 8, 0 },
	[28] = { "F64", 1, 8, 0 },		[29] = { "IQ1_M", 256, 56, 0 },
	[30] = { "BF16", 1, 2, 0 },
	[31] = { "Q4_0_4_4 (removed)", 0, 0, 1 },	[32] = { "Q4_0_4_8 (removed)", 0, 0, 1 },
	[33] = { "Q4_0_8_8 (removed)", 0, 0, 1 },
	[34] = { "TQ1_0", 256, 54, 0 },		[35] = { "TQ2_0", 256, 66, 0 },
	[36] = { "IQ4_NL_4_4 (removed)", 0, 0, 1 },	[37] = { "IQ4_NL_4_8 (removed)", 0, 0, 1 },
	[38] = { "IQ4_NL_8_8 (removed)", 0, 0, 1 },
	[39] = { "MXFP4", 32, 17, 0 },		[40] = { "NVFP4", 64, 36, 0 },
	[41] = { "Q1_0", 128, 18, 0 },		[42] = { "Q2_0", 64, 18, 0 },
};

const struct quant_traits *
quant_traits(int t)
{
	if (t < 0 || t >= QUANT_TYPE_COUNT)
		return NULL;
	return &traits[t];
}

int
quant_valid(int t)
{
	return t >= 0 && t < QUANT_TYPE_COUNT && !traits[t].removed;
}

const char *
quant_name(int t)
{
	return t >= 0 && t < QUANT_TYPE_COUNT ? traits[t].name : "?";
}

int
quant_from_name(const char *name)
{
	int t;

	for (t = 0; t < QUANT_TYPE_COUNT; t++)
		if (!traits[t].removed && strcasecmp(traits[t].name, name) == 0)
			return t;
	return -1;
}

size_t
quant_row_size(int t, int64_t n)
{
	if (!quant_valid(t) || n < 0 || n % traits[t].blck != 0)
		return 0;
	return (size_t)(n / traits[t].blck) * traits[t].size;
}

int
quant_fit_block(int t, int64_t n)
{
	while (quant_valid(t) && n % traits[t].blck != 0) {
		switch (t) {
		case QUANT_Q4_K: t = QUANT_Q5_0; break;
		case QUANT_Q5_K: t = QUANT_Q5_1; break;
		case QUANT_Q6_K: case QUANT_NVFP4: case QUANT_MXFP4: t = QUANT_Q8_0; break;
		case QUANT_Q2_K: case QUANT_Q3_K: case QUANT_Q2_0: case QUANT_TQ1_0:
		case QUANT_TQ2_0: t = QUANT_Q4_0; break;
		case QUANT_IQ1_S: case QUANT_IQ1_M: case QUANT_IQ2_XXS: case QUANT_IQ2_XS:
		case QUANT_IQ2_S: case QUANT_IQ3_XXS: case QUANT_IQ3_S: case QUANT_IQ4_XS:
			t = QUANT_IQ4_NL;
			break;
		default: return QUANT_F16;
		}
	}
	return t;
}

float
quant_f16_to_f32(uint16_t h)
{
	return qi_h2f(h);
}

uint16_t
quant_f32_to_f16(float f)
{
	return qi_f2h(f);
}

float
quant_bf16_to_f32(uint16_t h)
{
	return qi_bf2f(h);
}

uint16_t
quant_f32_to_bf16(float f)
{
	return qi_f2bf(f);
}

float
quant_ue4m3_to_f32(uint8_t x)
{
	return qi_ue4m3_half(x) * 2.0f;
}

uint8_t
quant_f32_to_ue4m3(float x)
{
	return qi_f2ue4m3(x);
}

float
quant_e8m0_to_f32(uint8_t e)
{
	return qi_e8m0(e);
}
