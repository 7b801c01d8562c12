/* packed_avx2.c: decoding of packed clips (packed_decode.h) compiled with
 * AVX2 + FMA enabled, so each row of a chunk's 8 joints is one register.
 * The sampler uses it for packed lanes when lmb_simd_active(). */
#include "simd.h"

#if LMB_HAVE_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("no-trapping-math")
#endif

#define PK(name) lmb_pk_##name##_avx2
#include "../packed_decode.h"

void lmb_packed_chunk_avx2(const lmb_packed *p, uint32_t q, float pos, float *out,
                           uint32_t cstride) {
    PK(chunk_impl)(p, q, pos, out, cstride);
}

void lmb_packed_chunk_cached_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                  float *out, uint32_t cstride) {
    PK(chunk_cached_impl)(p, q, pos, cache, out, cstride);
}
#undef PK

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

#include "../packed.h"

void lmb_packed_chunk_avx2(const lmb_packed *p, uint32_t q, float pos, float *out,
                           uint32_t cstride) {
    lmb_packed_chunk(p, q, pos, out, cstride);
}

void lmb_packed_chunk_cached_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                  float *out, uint32_t cstride) {
    lmb_packed_chunk_cached(p, q, pos, cache, out, cstride);
}

#endif
