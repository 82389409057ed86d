/* dtype.c — dtype names and sizes, and PyTorch's type promotion (written down in README.md). */
#include <string.h>

#include "half.h"
#include "tensor.h"

const size_t td_dtype_sizes[TIDE_NUM_DTYPES] = {4, 8, 4, 8, 1, 1, 2, 2};
static const char *const dtype_names[TIDE_NUM_DTYPES] = {
    "float32", "float64", "int32", "int64", "uint8", "bool", "float16", "bfloat16"};

const char *tide_dtype_name(tide_dtype dtype)
{
    return td_dtype_valid(dtype) ? dtype_names[dtype] : "invalid";
}

size_t tide_dtype_size(tide_dtype dtype) { return td_dtype_valid(dtype) ? td_dtype_sizes[dtype] : 0; }

int tide_dtype_from_name(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < TIDE_NUM_DTYPES; i++)
        if (strcmp(name, dtype_names[i]) == 0)
            return i;
    /* The aliases PyTorch users type. */
    static const struct { const char *alias; tide_dtype dtype; } aliases[] = {
        {"float", TIDE_FLOAT32}, {"double", TIDE_FLOAT64}, {"int", TIDE_INT32},
        {"long", TIDE_INT64},    {"byte", TIDE_UINT8},     {"half", TIDE_FLOAT16},
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0)
            return aliases[i].dtype;
    return -1;
}

bool tide_dtype_is_floating(tide_dtype dtype)
{
    return dtype == TIDE_FLOAT32 || dtype == TIDE_FLOAT64 || td_dtype_is_half(dtype);
}

/* 0 bool, 1 integer, 2 floating: the categories promotion compares across tiers. */
static int category(tide_dtype d)
{
    return d == TIDE_BOOL ? 0 : tide_dtype_is_floating(d) ? 2 : 1;
}

tide_dtype tide_promote_types(tide_dtype a, tide_dtype b)
{
    if (!td_dtype_valid(a) || !td_dtype_valid(b))
        return TIDE_FLOAT32;
    if (a == b)
        return a;
    if (a == TIDE_BOOL)
        return b;
    if (b == TIDE_BOOL)
        return a;
    int ca = category(a), cb = category(b);
    if (ca != cb)
        return ca > cb ? a : b;
    if (ca == 2) /* the wider wins; float16 with bfloat16 is float32, which holds both */
        return (a == TIDE_FLOAT64 || b == TIDE_FLOAT64) ? TIDE_FLOAT64 : TIDE_FLOAT32;
    /* Integers: uint8 with a signed type gives that signed type (all are wider than 8 bits). */
    if (a == TIDE_UINT8)
        return b;
    if (b == TIDE_UINT8)
        return a;
    return (a == TIDE_INT64 || b == TIDE_INT64) ? TIDE_INT64 : TIDE_INT32;
}

/*
 * PyTorch's three tiers (c10's ResultTypeState): tensors with dims, 0-dim tensors, and wrapped
 * numbers (a float number counts as the default dtype float32, an int number as int64). A lower
 * tier changes the result only when it brings a higher category:
 * result = combine(dims, combine(zero_dim, numbers)).
 */
static int combine(int higher, int lower) /* -1 stands for "no operand in this tier" */
{
    if (higher < 0)
        return lower;
    if (lower < 0)
        return higher;
    if (category((tide_dtype)higher) == 2)
        return higher;
    if (higher == TIDE_BOOL || category((tide_dtype)lower) == 2)
        return tide_promote_types((tide_dtype)higher, (tide_dtype)lower);
    return higher;
}

tide_dtype td_result_type(tide_tensor *const *ts, int n)
{
    int tier[3] = {-1, -1, -1};
    for (int i = 0; i < n; i++) {
        const tide_tensor *t = ts[i];
        int k = (t->flags & TD_WRAPPED_NUMBER) ? 2 : t->ndim == 0 ? 1 : 0;
        tide_dtype d = (tide_dtype)t->dtype;
        if (k == 2 && d != TIDE_BOOL)
            d = tide_dtype_is_floating(d) ? TIDE_FLOAT32 : TIDE_INT64;
        tier[k] = tier[k] < 0 ? (int)d : (int)tide_promote_types((tide_dtype)tier[k], d);
    }
    int r = combine(tier[0], combine(tier[1], tier[2]));
    return r < 0 ? TIDE_FLOAT32 : (tide_dtype)r;
}

float tide_float16_to_float(uint16_t bits) { return td_f16_to_f32(bits); }
uint16_t tide_float_to_float16(float value) { return td_f32_to_f16(value); }
float tide_bfloat16_to_float(uint16_t bits) { return td_bf16_to_f32(bits); }
uint16_t tide_float_to_bfloat16(float value) { return td_f32_to_bf16(value); }
