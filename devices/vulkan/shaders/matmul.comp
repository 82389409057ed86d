#version 450
// matmul.comp — float32 C[b] = A[b] @ B[b] in 64x64 tiles through shared memory, each thread
// making a 4x4 block of C. A and B may have any strides (transposed views need no copy) and
// batch dims that broadcast (stride 0). C is contiguous [batch..., M, N].
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Params {
    uint M, N, K, nbatch;
    int a_sm, a_sk, b_sk, b_sn;
    int a_base, b_base, ndb, pad0;
    int bshape[8], a_bst[8], b_bst[8]; // batch dims, innermost first
} P;
layout(std430, binding = 1) buffer Out { float c[]; };
layout(std430, binding = 2) readonly buffer A { float a[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };

// tiles as vec4s: a thread reads its 4 rows of A and 4 columns of B with one access each
shared vec4 As[16][16]; // As[k][m / 4][m % 4]
shared vec4 Bs[16][16]; // Bs[k][n / 4][n % 4]

void main()
{
    uint lid = gl_LocalInvocationID.x;
    uint tx = lid % 16u, ty = lid / 16u;
    uint n0 = gl_WorkGroupID.x * 64u, m0 = gl_WorkGroupID.y * 64u, batch = gl_WorkGroupID.z;
    int ab = P.a_base, bb = P.b_base;
    uint rest = batch;
    for (int d = 0; d < P.ndb; d++) {
        uint s = uint(P.bshape[d]);
        int k = int(rest % s);
        rest /= s;
        ab += k * P.a_bst[d];
        bb += k * P.b_bst[d];
    }
    vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0));
    for (uint k0 = 0u; k0 < P.K; k0 += 16u) {
        for (uint l = 0u; l < 4u; l++) {
            uint idx = lid + l * 256u;
            uint am = idx / 16u, ak = idx % 16u; // A tile: 64 rows x 16
            uint gm = m0 + am, gk = k0 + ak;
            float va = 0.0, vb = 0.0; // if, not ?:, so out-of-range elements are not loaded
            if (gm < P.M && gk < P.K)
                va = a[ab + int(gm) * P.a_sm + int(gk) * P.a_sk];
            As[ak][am >> 2][am & 3u] = va;
            uint bk = idx / 64u, bn = idx % 64u; // B tile: 16 x 64 columns
            uint hk = k0 + bk, hn = n0 + bn;
            if (hk < P.K && hn < P.N)
                vb = b[bb + int(hk) * P.b_sk + int(hn) * P.b_sn];
            Bs[bk][bn >> 2][bn & 3u] = vb;
        }
        barrier();
        for (uint k = 0u; k < 16u; k++) {
            vec4 av = As[k][ty];
            vec4 bv = Bs[k][tx];
            acc[0] += av.x * bv;
            acc[1] += av.y * bv;
            acc[2] += av.z * bv;
            acc[3] += av.w * bv;
        }
        barrier();
    }
    uint cb = batch * P.M * P.N;
    for (uint i = 0u; i < 4u; i++) {
        uint m = m0 + ty * 4u + i;
        if (m >= P.M) continue;
        for (uint j = 0u; j < 4u; j++) {
            uint n = n0 + tx * 4u + j;
            if (n < P.N) c[cb + m * P.N + n] = acc[i][j];
        }
    }
}
