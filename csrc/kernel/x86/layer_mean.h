/* layer_mean.h: the pose of a layer that two sources play (a cross-fade),
 * 8 values at a time, for the AVX2 fold (stack_avx2.c: 8 lanes of one
 * joint) and the frame plan's fused sampling (clip_avx2.c: 8 joints of one
 * lane). Both compute every value with this one sequence of operations, so
 * a lane gets the same bits whichever path its block takes. */
#ifndef LIMBER_LAYER_MEAN_H
#define LIMBER_LAYER_MEAN_H

#include "simd.h"

#if LMB_HAVE_X86

/* 1 / sqrt(x) for x > 0: the rsqrt estimate and one Newton step */
LMB_AVX2 static inline __m256 lmb_mean_rsqrt(__m256 x) {
    __m256 r = _mm256_rsqrt_ps(x);
    __m256 e = _mm256_fnmadd_ps(_mm256_mul_ps(x, r), r, _mm256_set1_ps(3.0f));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), r), e);
}

/* o = the weighted mean of a and b (10 components each, component c at
 * a + c * as, b + c * bs, o + c * os): translations and scales
 * (wa a + wb b) inv; rotations each sign-aligned to the rest rotation rq
 * (rq[c]: component c), summed with those weights and normalised (a sum
 * that cancels gives the identity). inv = 1 / (wa + wb), wa and wb > 0. */
LMB_AVX2 static inline __attribute__((always_inline)) void
lmb_layer_mean2(const float *a, size_t as, const float *b, size_t bs, __m256 wa, __m256 wb,
                __m256 inv, const __m256 rq[4], float *o, size_t os) {
    static const size_t tcomp[6] = {0, 1, 2, 7, 8, 9};
    for (int t = 0; t < 6; t++) {
        const size_t c = tcomp[t];
        __m256 acc = _mm256_mul_ps(wa, _mm256_loadu_ps(a + c * as));
        acc = _mm256_fmadd_ps(wb, _mm256_loadu_ps(b + c * bs), acc);
        _mm256_storeu_ps(o + c * os, _mm256_mul_ps(acc, inv));
    }
    /* (each rotation value is loaded where it is used, twice: GCC splits an
     * unaligned 256-bit load kept in a register into two 128-bit ones
     * through the stack, but folds one used once into its instruction) */
    const float *qa = a + 3 * as, *qb = b + 3 * bs;
    __m256 da = _mm256_mul_ps(rq[0], _mm256_loadu_ps(qa));
    __m256 db = _mm256_mul_ps(rq[0], _mm256_loadu_ps(qb));
    for (size_t c = 1; c < 4; c++) {
        da = _mm256_fmadd_ps(rq[c], _mm256_loadu_ps(qa + c * as), da);
        db = _mm256_fmadd_ps(rq[c], _mm256_loadu_ps(qb + c * bs), db);
    }
    const __m256 zero = _mm256_setzero_ps(), signbit = _mm256_set1_ps(-0.0f);
    /* -w where the source points away from the rest rotation */
    __m256 sa = _mm256_xor_ps(wa, _mm256_and_ps(_mm256_cmp_ps(da, zero, _CMP_LT_OQ), signbit));
    __m256 sb = _mm256_xor_ps(wb, _mm256_and_ps(_mm256_cmp_ps(db, zero, _CMP_LT_OQ), signbit));
    __m256 q[4];
    for (size_t c = 0; c < 4; c++)
        q[c] = _mm256_fmadd_ps(sb, _mm256_loadu_ps(qb + c * bs),
                               _mm256_mul_ps(sa, _mm256_loadu_ps(qa + c * as)));
    __m256 q2 = _mm256_mul_ps(q[0], q[0]);
    for (int c = 1; c < 4; c++)
        q2 = _mm256_fmadd_ps(q[c], q[c], q2);
    /* opposite rotations that cancel exactly: the identity */
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 ok = _mm256_cmp_ps(q2, _mm256_set1_ps(1e-30f), _CMP_GT_OQ);
    __m256 qi = _mm256_blendv_ps(one, lmb_mean_rsqrt(_mm256_blendv_ps(one, q2, ok)), ok);
    for (size_t c = 0; c < 4; c++) {
        __m256 v = _mm256_blendv_ps(c == 3 ? one : zero, q[c], ok);
        _mm256_storeu_ps(o + (3 + c) * os, _mm256_mul_ps(v, qi));
    }
}

#endif
#endif
