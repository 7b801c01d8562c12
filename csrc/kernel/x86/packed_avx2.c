/* packed_avx2.c: the packed decoder's key lookup and decoding
 * (packed_decode.h) compiled for AVX2, so each row of a chunk's 8 joints is
 * one register (no FMAs: below). The AVX2 sampler (clip_avx2.c) keeps a
 * chunk's keys in the instance's cache with lmb_packed_chunk_keys_avx2 and
 * interpolates them with the dense path's lane kernel. Other builds compile
 * the same code portable (the sampler's AVX2 path is x86 only). */
#include "simd.h"

#if LMB_HAVE_X86
/* No contraction into FMAs: decoded keys equal the portable decoder's (the
 * compressor's measure) bit for bit. A rotation's derived w amplifies a
 * rounding of its x y z by about 1 / w, so base + scale * q fused here gave
 * w 1e-5 off the measured value at w = 0.01. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#pragma clang fp contract(off)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("no-trapping-math", "fp-contract=off")
#endif
#endif

#if LMB_HAVE_X86
#include <immintrin.h>
#define PK_AVX2_ROWS 1
#endif
#define PK(name) lmb_pk_##name##_avx2
#include "../packed_decode.h"

void lmb_packed_chunk_keys_avx2(const lmb_packed *p, uint32_t q, float pos, float *cache,
                                float *al) {
    PK(chunk_keys_impl)(p, q, pos, cache, al);
}
#undef PK

#if LMB_HAVE_X86
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
