/* palette_avx2.c: skin palettes with AVX2 + FMA, two result columns (or
 * two texel rows) per 256-bit register. */
#include "palette.h"
#include "simd.h"

#if LMB_HAVE_X86

/* joints ahead whose palette lines lmb_palette_block_avx2 asks for (4, 8
 * and 16 tried: 8 is best) */
#define LMB_PALETTE_AHEAD 8

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

/* One layout (mat4: 1, mat3x4: 0) and whether every lane has an output
 * (all: 1, the usual case, tested once per block, not per joint and lane). */
LMB_AVX2 static inline __attribute__((always_inline)) void
palette_block(const lmb_skin *skin, const float *soa, float *const out[LMB_LANES], const int mat4,
              const int all) {
    const uint32_t K = skin->joint_count;
    const size_t width = mat4 ? 16 : 12;
    for (uint32_t k = 0; k < K; k++) {
        /* the output lines a few joints ahead, in every lane: the 8
         * instances' palettes are 8 streams of writes, which would otherwise
         * wait for each line to be read */
        if (k + LMB_PALETTE_AHEAD < K) {
            const size_t ahead = (size_t)(k + LMB_PALETTE_AHEAD) * width;
            for (int l = 0; l < LMB_LANES; l++)
                if (all || out[l]) __builtin_prefetch(out[l] + ahead, 1);
        }
        const float *S = soa + (size_t)skin->joint[k] * 12 * LMB_LANES;
        const float *ib = skin->inverse_bind + (size_t)k * 16;
        __m256 m[12];
        for (int q = 0; q < 12; q++)
            m[q] = _mm256_load_ps(S + q * LMB_LANES);
        /* o[c][r] = sum_i M[r][i] IB[i][c] (M's column 3 is the translation;
         * its bottom row 0 0 0 1, so row 3 of the product is IB's row 3) */
        __m256 o[16];
        for (int c = 0; c < 4; c++) {
            const float *b = ib + c * 4;
            __m256 b0 = _mm256_broadcast_ss(b), b1 = _mm256_broadcast_ss(b + 1);
            __m256 b2 = _mm256_broadcast_ss(b + 2), b3 = _mm256_broadcast_ss(b + 3);
            for (int r = 0; r < 3; r++)
                o[c * 4 + r] = _mm256_fmadd_ps(
                    m[6 + r], b2,
                    _mm256_fmadd_ps(m[3 + r], b1,
                                    _mm256_fmadd_ps(m[r], b0, _mm256_mul_ps(m[9 + r], b3))));
            o[c * 4 + 3] = b3;
        }
        const size_t at = (size_t)k * width;
        if (mat4) {
            __m256 lo[8] = {o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]};
            __m256 hi[8] = {o[8], o[9], o[10], o[11], o[12], o[13], o[14], o[15]};
            lmb_transpose8(lo);
            lmb_transpose8(hi);
            for (int l = 0; l < LMB_LANES; l++) {
                if (!all && !out[l]) continue;
                _mm256_storeu_ps(out[l] + at, lo[l]);
                _mm256_storeu_ps(out[l] + at + 8, hi[l]);
            }
        } else { /* rows: d[r * 4 + c] */
            __m256 lo[8] = {o[0], o[4], o[8], o[12], o[1], o[5], o[9], o[13]};
            lmb_transpose8(lo);
            /* row 2 (o[2], o[6], o[10], o[14]) as 4 x 8: hi[l & 3] holds
             * lane l's 4 floats in its low half for l < 4, else its high */
            __m256 t0 = _mm256_unpacklo_ps(o[2], o[6]), t1 = _mm256_unpackhi_ps(o[2], o[6]);
            __m256 t2 = _mm256_unpacklo_ps(o[10], o[14]), t3 = _mm256_unpackhi_ps(o[10], o[14]);
            __m256 hi[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                            _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
            for (int l = 0; l < LMB_LANES; l++) {
                if (!all && !out[l]) continue;
                _mm256_storeu_ps(out[l] + at, lo[l]);
                _mm_storeu_ps(out[l] + at + 8, l < 4 ? _mm256_castps256_ps128(hi[l])
                                                     : _mm256_extractf128_ps(hi[l - 4], 1));
            }
        }
    }
}

LMB_AVX2 void lmb_palette_block_avx2(const lmb_skin *skin, int layout, const float *soa,
                                     float *const out[LMB_LANES]) {
    int all = 1;
    for (int l = 0; l < LMB_LANES; l++)
        all &= out[l] != NULL;
    if (layout == LMB_PALETTE_MAT4)
        all ? palette_block(skin, soa, out, 1, 1) : palette_block(skin, soa, out, 1, 0);
    else
        all ? palette_block(skin, soa, out, 0, 1) : palette_block(skin, soa, out, 0, 0);
}

#else

void lmb_palette_block_avx2(const lmb_skin *skin, int layout, const float *soa,
                            float *const out[LMB_LANES]) {
    lmb_palette_block_portable(skin, layout, soa, out);
}

void lmb_palette_run_avx2(const lmb_pose *pose, const lmb_skin *skin, int layout, float *out,
                          uint32_t first, uint32_t count) {
    lmb_palette_run_portable(pose, skin, layout, out, first, count);
}

#endif
