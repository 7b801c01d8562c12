/* skinning_avx2.c: the AVX2 + FMA skinning kernel.
 *
 * One vertex per step, eight lanes wide: with the mat4 layout a 256-bit
 * register holds two columns of the blended matrix (c0|c1 and c2|c3), so
 * blending one influence costs two FMAs with the palette entry read
 * straight from memory (one 64-byte cache line per entry), and a point is
 * transformed by (c0|c1) * (x x x x y y y y) + (c2|c3) * (z z z z 1 1 1 1)
 * and one 128-bit add of the halves. With the mat3x4 layout a register
 * holds rows 0 and 1 and a 128-bit register row 2 (1.5 FMAs per influence),
 * and the dot products finish with horizontal adds. Normals and tangents
 * use the same blended matrix and are normalised with rsqrt and one
 * Newton step (within a few float ulps of the portable 1/sqrt). */
#include "palette.h"
#include "simd.h"
#include "skinning.h"

#if LMB_HAVE_X86

#define ALWAYS_INLINE __attribute__((always_inline)) inline

/* v * 1/|v.xyz| (lanes 0..2; lane 3 is kept as is, callers overwrite it). */
LMB_AVX2 static ALWAYS_INLINE __m128 normalize3(__m128 v) {
    __m128 sq = _mm_mul_ps(v, v);
    __m128 s = _mm_add_ss(_mm_add_ss(sq, _mm_movehdup_ps(sq)), _mm_movehl_ps(sq, sq));
    s = _mm_max_ss(s, _mm_set_ss(1e-30f));
    __m128 y = _mm_rsqrt_ss(s);
    /* y = y * (1.5 - 0.5 * s * y * y) */
    __m128 hs = _mm_mul_ss(_mm_set_ss(0.5f), s);
    __m128 yy = _mm_mul_ss(y, y);
    y = _mm_mul_ss(y, _mm_fnmadd_ss(hs, yy, _mm_set_ss(1.5f)));
    return _mm_mul_ps(v, _mm_shuffle_ps(y, y, 0));
}

LMB_AVX2 static ALWAYS_INLINE void store3(float *d, __m128 v) {
    _mm_storel_pi((__m64 *)(void *)d, v);
    _mm_store_ss(d + 2, _mm_movehl_ps(v, v));
}

/* c01 * (x..., y...) + c23 * (z..., w...) folded to 128 bits, w given. */
LMB_AVX2 static ALWAYS_INLINE __m128 xform_cols(__m256 c01, __m256 c23, const float *s, __m256 w) {
    __m256 xy = _mm256_blend_ps(_mm256_broadcast_ss(s), _mm256_broadcast_ss(s + 1), 0xF0);
    __m256 zw = _mm256_blend_ps(_mm256_broadcast_ss(s + 2), w, 0xF0);
    __m256 t = _mm256_fmadd_ps(c23, zw, _mm256_mul_ps(c01, xy));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Rows r01 (rows 0, 1) and r2 applied to the 4-vector h (x y z w). */
LMB_AVX2 static ALWAYS_INLINE __m128 xform_rows(__m256 r01, __m128 r2, __m128 h) {
    __m256 a = _mm256_mul_ps(r01, _mm256_set_m128(h, h));
    __m128 b = _mm_mul_ps(r2, h);
    __m128 h1 = _mm_hadd_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 h2 = _mm_hadd_ps(b, _mm_setzero_ps());
    return _mm_hadd_ps(h1, h2);
}

/* Writes sorted vertex v from its transformed position / normal / tangent. */
LMB_AVX2 static ALWAYS_INLINE void put(const lmb_skin_range *r, uint32_t v, __m128 p, __m128 n,
                                       __m128 t) {
    size_t o = r->map ? r->map[v] : v;
    if (r->pos) {
        float *d = r->pos + o * r->pos_stride;
        if (r->pos_wide)
            _mm_storeu_ps(d, _mm_blend_ps(p, _mm_set1_ps(1.0f), 8));
        else
            store3(d, p);
    }
    if (r->nrm) {
        float *d = r->nrm + o * r->nrm_stride;
        n = normalize3(n);
        if (r->nrm_wide)
            _mm_storeu_ps(d, _mm_blend_ps(n, _mm_setzero_ps(), 8));
        else
            store3(d, n);
    }
    if (r->tan) {
        float *d = r->tan + o * r->tan_stride;
        t = normalize3(t);
        /* w (handedness) from the source */
        _mm_storeu_ps(d, _mm_blend_ps(t, _mm_broadcast_ss(r->mesh->tan + (size_t)v * 4 + 3), 8));
    }
}

/* mat4 palettes: one straight loop for k influences. */
LMB_AVX2 static ALWAYS_INLINE void group_cols(const lmb_skin_range *r, uint32_t k, uint32_t lo,
                                              uint32_t hi) {
    const lmb_skin_mesh *m = r->mesh;
    const float *pal = r->pal;
    const uint16_t *J = m->joints + m->joint_off[k] + (size_t)(lo - m->first[k]) * k;
    const float *W = k > 1 ? m->weights + m->weight_off[k] + (size_t)(lo - m->first[k]) * k : NULL;
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    const __m128 zero4 = _mm_setzero_ps();
    for (uint32_t v = lo; v < hi; v++, J += k) {
        const float *P0 = pal + (size_t)J[0] * 16;
        __m256 c01, c23;
        if (k == 1) {
            c01 = _mm256_loadu_ps(P0);
            c23 = _mm256_loadu_ps(P0 + 8);
        } else {
            __m256 w = _mm256_broadcast_ss(W);
            c01 = _mm256_mul_ps(w, _mm256_loadu_ps(P0));
            c23 = _mm256_mul_ps(w, _mm256_loadu_ps(P0 + 8));
            for (uint32_t i = 1; i < k; i++) {
                const float *P = pal + (size_t)J[i] * 16;
                w = _mm256_broadcast_ss(W + i);
                c01 = _mm256_fmadd_ps(w, _mm256_loadu_ps(P), c01);
                c23 = _mm256_fmadd_ps(w, _mm256_loadu_ps(P + 8), c23);
            }
            W += k;
        }
        __m128 p = r->pos ? xform_cols(c01, c23, m->pos + (size_t)v * 4, one) : zero4;
        __m128 n = r->nrm ? xform_cols(c01, c23, m->nrm + (size_t)v * 4, zero) : zero4;
        __m128 t = r->tan ? xform_cols(c01, c23, m->tan + (size_t)v * 4, zero) : zero4;
        put(r, v, p, n, t);
    }
}

/* mat3x4 palettes: rows 0 and 1 in a 256-bit register, row 2 in 128 bits. */
LMB_AVX2 static ALWAYS_INLINE void group_rows(const lmb_skin_range *r, uint32_t k, uint32_t lo,
                                              uint32_t hi) {
    const lmb_skin_mesh *m = r->mesh;
    const float *pal = r->pal;
    const uint16_t *J = m->joints + m->joint_off[k] + (size_t)(lo - m->first[k]) * k;
    const float *W = k > 1 ? m->weights + m->weight_off[k] + (size_t)(lo - m->first[k]) * k : NULL;
    const __m128 zero4 = _mm_setzero_ps();
    for (uint32_t v = lo; v < hi; v++, J += k) {
        const float *P0 = pal + (size_t)J[0] * 12;
        __m256 r01;
        __m128 r2;
        if (k == 1) {
            r01 = _mm256_loadu_ps(P0);
            r2 = _mm_loadu_ps(P0 + 8);
        } else {
            __m256 w = _mm256_broadcast_ss(W);
            r01 = _mm256_mul_ps(w, _mm256_loadu_ps(P0));
            r2 = _mm_mul_ps(_mm256_castps256_ps128(w), _mm_loadu_ps(P0 + 8));
            for (uint32_t i = 1; i < k; i++) {
                const float *P = pal + (size_t)J[i] * 12;
                w = _mm256_broadcast_ss(W + i);
                r01 = _mm256_fmadd_ps(w, _mm256_loadu_ps(P), r01);
                r2 = _mm_fmadd_ps(_mm256_castps256_ps128(w), _mm_loadu_ps(P + 8), r2);
            }
            W += k;
        }
        __m128 p = r->pos ? xform_rows(r01, r2, _mm_load_ps(m->pos + (size_t)v * 4)) : zero4;
        __m128 n = r->nrm ? xform_rows(r01, r2, _mm_load_ps(m->nrm + (size_t)v * 4)) : zero4;
        __m128 t = r->tan ? xform_rows(r01, r2, _mm_blend_ps(_mm_load_ps(m->tan + (size_t)v * 4),
                                                             zero4, 8))
                          : zero4;
        put(r, v, p, n, t);
    }
}

LMB_AVX2 void lmb_skin_range_avx2(const lmb_skin_range *r) {
    const lmb_skin_mesh *m = r->mesh;
    for (uint32_t k = 1; k <= 4; k++) {
        uint32_t lo = m->first[k], hi = m->first[k] + m->count[k];
        if (lo < r->begin) lo = r->begin;
        if (hi > r->end) hi = r->end;
        if (lo >= hi) continue;
        if (r->layout == LMB_PALETTE_MAT4) {
            switch (k) {
            case 1: group_cols(r, 1, lo, hi); break;
            case 2: group_cols(r, 2, lo, hi); break;
            case 3: group_cols(r, 3, lo, hi); break;
            default: group_cols(r, 4, lo, hi); break;
            }
        } else {
            switch (k) {
            case 1: group_rows(r, 1, lo, hi); break;
            case 2: group_rows(r, 2, lo, hi); break;
            case 3: group_rows(r, 3, lo, hi); break;
            default: group_rows(r, 4, lo, hi); break;
            }
        }
    }
}

#else

void lmb_skin_range_avx2(const lmb_skin_range *r) { lmb_skin_range_portable(r); }

#endif
