/* palette_avx2.c: skin palettes with AVX2 + FMA, two result columns (or
 * two texel rows) per 256-bit register. */
#include "palette.h"
#include "simd.h"

#if LMB_HAVE_X86

LMB_AVX2 void lmb_palette_run_avx2(const lmb_pose *pose, const lmb_skin *skin, int layout,
                                   float *out, uint32_t first, uint32_t count) {
    const uint32_t J = pose->joint_count, K = skin->joint_count;
    if (layout == LMB_PALETTE_MAT4) {
        for (uint32_t i = first; i < first + count; i++) {
            const float *model = pose->model + (size_t)i * J * 16;
            float *o = out + (size_t)(i - first) * K * 16;
            for (uint32_t k = 0; k < K; k++, o += 16) {
                const float *M = model + (size_t)skin->joint[k] * 16;
                const float *P = skin->prep4 + (size_t)k * 64;
                __m256 m0 = _mm256_broadcast_ps((const __m128 *)(const void *)(M + 0));
                __m256 m1 = _mm256_broadcast_ps((const __m128 *)(const void *)(M + 4));
                __m256 m2 = _mm256_broadcast_ps((const __m128 *)(const void *)(M + 8));
                __m256 m3 = _mm256_broadcast_ps((const __m128 *)(const void *)(M + 12));
                __m256 c01 = _mm256_mul_ps(m0, _mm256_load_ps(P + 0));
                c01 = _mm256_fmadd_ps(m1, _mm256_load_ps(P + 8), c01);
                c01 = _mm256_fmadd_ps(m2, _mm256_load_ps(P + 16), c01);
                c01 = _mm256_fmadd_ps(m3, _mm256_load_ps(P + 24), c01);
                __m256 c23 = _mm256_mul_ps(m0, _mm256_load_ps(P + 32));
                c23 = _mm256_fmadd_ps(m1, _mm256_load_ps(P + 40), c23);
                c23 = _mm256_fmadd_ps(m2, _mm256_load_ps(P + 48), c23);
                c23 = _mm256_fmadd_ps(m3, _mm256_load_ps(P + 56), c23);
                _mm256_storeu_ps(o, c01);
                _mm256_storeu_ps(o + 8, c23);
            }
        }
    } else {
        const __m256i sel01 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        for (uint32_t i = first; i < first + count; i++) {
            const float *model = pose->model + (size_t)i * J * 16;
            float *o = out + (size_t)(i - first) * K * 12;
            for (uint32_t k = 0; k < K; k++, o += 12) {
                const float *M = model + (size_t)skin->joint[k] * 16;
                const float *P = skin->prep3 + (size_t)k * 32;
                __m256 r01 = _mm256_setzero_ps();
                __m128 r2 = _mm_setzero_ps();
                for (int c = 0; c < 4; c++) {
                    __m128 col = _mm_loadu_ps(M + c * 4);
                    __m256 b = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(col), sel01);
                    __m256 bt = _mm256_load_ps(P + c * 8);
                    r01 = _mm256_fmadd_ps(b, bt, r01);
                    r2 = _mm_fmadd_ps(_mm_broadcast_ss(M + c * 4 + 2), _mm256_castps256_ps128(bt),
                                      r2);
                }
                _mm256_storeu_ps(o, r01);
                _mm_storeu_ps(o + 8, r2);
            }
        }
    }
}

#else

void lmb_palette_run_avx2(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                          uint32_t first, uint32_t count) {
    lmb_palette_run_portable(pose, skin, layout, out, first, count);
}

#endif
