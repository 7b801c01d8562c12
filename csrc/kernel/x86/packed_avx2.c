/* packed_avx2.c: decoding of packed clips (packed_decode.h) compiled with
 * AVX2 + FMA enabled, so each row of a chunk's 8 joints is one register.
 * The sampler uses it for packed lanes when lmb_simd_active(). */
#include "simd.h"

#if LMB_HAVE_X86
/* a * b + c in the decoder's vector code becomes one FMA (ISO C mode
 * leaves GCC's contraction off): 5% of a packed sample. The portable
 * decoder rounds each step, so the two differ by float roundings (they
 * already do: the AVX2 one normalises with rsqrt and a Newton step). */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("no-trapping-math", "fp-contract=fast")
#endif

#include "../vec8.h"

/* 1 / sqrt(x), x > 0: rsqrt estimate and one Newton step (~2 ulp), as the
 * dense path normalises rotations */
static inline lmb_v8f lmb_pk_rsqrt_avx2(lmb_v8f x) {
    __m256 v = (__m256)x, r = _mm256_rsqrt_ps(v);
    return (lmb_v8f)_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), r),
                                  _mm256_fnmadd_ps(_mm256_mul_ps(v, r), r, _mm256_set1_ps(3.0f)));
}
#define LMB_PK_RSQRT lmb_pk_rsqrt_avx2

#define PK(name) lmb_pk_##name##_avx2
#include "../packed_decode.h"

void lmb_packed_chunk_cached_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                  float *out, uint32_t cstride) {
    PK(chunk_cached_impl)(p, q, pos, cache, out, cstride);
}
void lmb_packed_chunk_keys_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                float *al) {
    PK(chunk_keys_impl)(p, q, pos, cache, al);
}
#undef PK

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

#include "../packed.h"

void lmb_packed_chunk_cached_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                  float *out, uint32_t cstride) {
    lmb_packed_chunk_cached(p, q, pos, cache, out, cstride);
}

#endif
