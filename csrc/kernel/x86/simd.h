/* simd.h: helpers for the AVX2 + FMA kernels. Files that include this
 * compile their kernels with a target attribute, so the rest of the build
 * stays portable and the CPU is checked at run time (lmb_simd_active). */
#ifndef LIMBER_SIMD_H
#define LIMBER_SIMD_H

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define LMB_HAVE_X86 1
#include <immintrin.h>
#define LMB_AVX2 __attribute__((target("avx2,fma")))

/* Transposes 8 vectors of 8 floats in place: afterwards v[l] holds element
 * l of every input, i.e. row l of the 8x8 matrix whose columns were v[]. */
LMB_AVX2 static inline void lmb_transpose8(__m256 v[8]) {
    __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
    __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#else
#define LMB_HAVE_X86 0
#endif

#endif
