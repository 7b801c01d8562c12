/* stack_avx2.c: the layer-stack fold (stack_fold.h) compiled with AVX2 +
 * FMA enabled, so the vectoriser uses 8-float registers (one per component
 * of a block's 8 lanes). Chosen at run time by lmb_stack_block. Its
 * a * b + c are contracted to FMAs (ISO C mode leaves GCC's contraction
 * off): 6% of the fold, and results a float rounding or so away from the
 * portable fold's. */
#include "simd.h"

#if LMB_HAVE_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("no-trapping-math", "fp-contract=fast")
#endif

#include "../vec8.h"

#include <immintrin.h>

/* 1 / sqrt(x) for x > 0: the rsqrt estimate and one Newton step, as the
 * AVX2 sampler normalises (sqrt then divide waited about 25 cycles: a
 * quarter of the layer pose's time in bench_frame) */
static inline lmb_v8f rsqrt_newton(lmb_v8f x) {
    __m256 v = (__m256)x, r = _mm256_rsqrt_ps(v);
    __m256 e = _mm256_fnmadd_ps(_mm256_mul_ps(v, r), r, _mm256_set1_ps(3.0f));
    return (lmb_v8f)_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), r), e);
}
#define FOLD_RSQRT rsqrt_newton

static inline int any_lane(lmb_v8i m) {
    return _mm256_movemask_ps(_mm256_castsi256_ps((__m256i)m)) != 0;
}
#define FOLD_ANY any_lane

#include "../limber.h" /* LMB_LANES */
#include "layer_mean.h"

/* the two-source layer pose of one joint, 8 lanes: layer_mean.h's */
static inline void mean2_lanes(const float *s0, const float *s1, lmb_v8f w0, lmb_v8f w1,
                               lmb_v8f inv, const float *rq, float *a) {
    const __m256 r[4] = {_mm256_set1_ps(rq[0]), _mm256_set1_ps(rq[1]), _mm256_set1_ps(rq[2]),
                         _mm256_set1_ps(rq[3])};
    lmb_layer_mean2(s0, LMB_LANES, s1, LMB_LANES, (__m256)w0, (__m256)w1, (__m256)inv, r, a,
                    LMB_LANES);
}
#define FOLD_MEAN2 mean2_lanes

#define FOLD(name) name##_avx2
#include "../stack_fold.h"
#undef FOLD

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

#include "../stack.h"

void lmb_stack_block_avx2(const lmb_skeleton *sk, const lmb_stack_layer *layers,
                          uint32_t layer_count, const float *const *src, const float *src_w,
                          const float *layer_w, const int16_t *top, int first_done, float *out) {
    lmb_stack_block_portable(sk, layers, layer_count, src, src_w, layer_w, top, first_done, out);
}
#endif
