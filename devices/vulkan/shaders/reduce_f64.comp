#version 450
// reduce_f64.comp — float64 reductions (see reduce64.glsl).
#define VT double
#define IS_FLOAT 1
#include "reduce64.glsl"
