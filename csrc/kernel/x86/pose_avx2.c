/* pose_avx2.c: local-to-model for one block of 8 instances with AVX2 + FMA.
 *
 * The 8 lanes are 8 instances of the same skeleton, so every register holds
 * one matrix element (or TRS component) for 8 instances and the joint loop
 * runs without shuffles. The local matrix is built in registers from the
 * quaternion (never stored), multiplied by the parent's 3x4 model matrix
 * kept in the scratch (structure of arrays), and the result is transposed
 * into the 4x4 column-major output with two 8x8 transposes. */
#include "pose.h"
#include "simd.h"

#if LMB_HAVE_X86

LMB_AVX2 void lmb_l2m_block_avx2(lmb_pose *p, uint32_t block, uint32_t start) {
    const uint32_t J = p->joint_count;
    const uint16_t *parent = p->skel->parent;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();

    /* the block's root matrices, 3x4, structure of arrays */
    float rootf[12 * LMB_LANES] __attribute__((aligned(32)));
    for (uint32_t l = 0; l < LMB_LANES; l++) {
        const float *R = p->root + (size_t)(block * LMB_LANES + l) * 16;
        for (uint32_t c = 0; c < 4; c++)
            for (uint32_t r = 0; r < 3; r++)
                rootf[(c * 3 + r) * LMB_LANES + l] = R[c * 4 + r];
    }
    float *model0 = p->model + (size_t)block * LMB_LANES * J * 16;
    const size_t lane_stride = (size_t)J * 16;

    for (uint32_t j = start; j < J; j++) {
        const float *L = p->local + ((size_t)block * J + j) * (LMB_TRS_FLOATS * LMB_LANES);
        float *S = p->scratch + (size_t)j * 12 * LMB_LANES;
        uint32_t pj = parent[j];
        const float *P = pj == LMB_NO_PARENT ? rootf : p->scratch + (size_t)pj * 12 * LMB_LANES;

        __m256 tx = _mm256_load_ps(L + 0 * 8), ty = _mm256_load_ps(L + 1 * 8);
        __m256 tz = _mm256_load_ps(L + 2 * 8);
        __m256 x = _mm256_load_ps(L + 3 * 8), y = _mm256_load_ps(L + 4 * 8);
        __m256 z = _mm256_load_ps(L + 5 * 8), w = _mm256_load_ps(L + 6 * 8);
        __m256 sx = _mm256_load_ps(L + 7 * 8), sy = _mm256_load_ps(L + 8 * 8);
        __m256 sz = _mm256_load_ps(L + 9 * 8);

        __m256 x2 = _mm256_add_ps(x, x), y2 = _mm256_add_ps(y, y), z2 = _mm256_add_ps(z, z);
        __m256 xx = _mm256_mul_ps(x, x2), yy = _mm256_mul_ps(y, y2), zz = _mm256_mul_ps(z, z2);
        __m256 xy = _mm256_mul_ps(x, y2), xz = _mm256_mul_ps(x, z2), yz = _mm256_mul_ps(y, z2);
        __m256 wx = _mm256_mul_ps(w, x2), wy = _mm256_mul_ps(w, y2), wz = _mm256_mul_ps(w, z2);

        /* local columns (rotation * scale); column 3 is the translation */
        __m256 a00 = _mm256_mul_ps(_mm256_sub_ps(one, _mm256_add_ps(yy, zz)), sx);
        __m256 a01 = _mm256_mul_ps(_mm256_add_ps(xy, wz), sx);
        __m256 a02 = _mm256_mul_ps(_mm256_sub_ps(xz, wy), sx);
        __m256 a10 = _mm256_mul_ps(_mm256_sub_ps(xy, wz), sy);
        __m256 a11 = _mm256_mul_ps(_mm256_sub_ps(one, _mm256_add_ps(xx, zz)), sy);
        __m256 a12 = _mm256_mul_ps(_mm256_add_ps(yz, wx), sy);
        __m256 a20 = _mm256_mul_ps(_mm256_add_ps(xz, wy), sz);
        __m256 a21 = _mm256_mul_ps(_mm256_sub_ps(yz, wx), sz);
        __m256 a22 = _mm256_mul_ps(_mm256_sub_ps(one, _mm256_add_ps(xx, yy)), sz);

        __m256 m[12];
        for (int r = 0; r < 3; r++) {
            __m256 p0 = _mm256_load_ps(P + (0 + r) * 8), p1 = _mm256_load_ps(P + (3 + r) * 8);
            __m256 p2 = _mm256_load_ps(P + (6 + r) * 8), p3 = _mm256_load_ps(P + (9 + r) * 8);
            m[0 + r] = _mm256_fmadd_ps(p2, a02, _mm256_fmadd_ps(p1, a01, _mm256_mul_ps(p0, a00)));
            m[3 + r] = _mm256_fmadd_ps(p2, a12, _mm256_fmadd_ps(p1, a11, _mm256_mul_ps(p0, a10)));
            m[6 + r] = _mm256_fmadd_ps(p2, a22, _mm256_fmadd_ps(p1, a21, _mm256_mul_ps(p0, a20)));
            m[9 + r] =
                _mm256_fmadd_ps(p2, tz, _mm256_fmadd_ps(p1, ty, _mm256_fmadd_ps(p0, tx, p3)));
        }
        for (int k = 0; k < 12; k++)
            _mm256_store_ps(S + k * 8, m[k]);
        if (p->skip_model) continue;

        __m256 lo[8] = {m[0], m[1], m[2], zero, m[3], m[4], m[5], zero};
        __m256 hi[8] = {m[6], m[7], m[8], zero, m[9], m[10], m[11], one};
        lmb_transpose8(lo);
        lmb_transpose8(hi);
        float *out = model0 + (size_t)j * 16;
        for (size_t l = 0; l < LMB_LANES; l++) {
            _mm256_store_ps(out + l * lane_stride, lo[l]);
            _mm256_store_ps(out + l * lane_stride + 8, hi[l]);
        }
    }
}

#else

void lmb_l2m_block_avx2(lmb_pose *p, uint32_t block, uint32_t start) {
    lmb_l2m_block_portable(p, block, start);
}

#endif
