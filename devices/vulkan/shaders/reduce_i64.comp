#version 450
// reduce_i64.comp — integer reductions (see reduce64.glsl).
#define VT int64_t
#include "reduce64.glsl"
