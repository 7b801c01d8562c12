/* vec8.h: the 8-lane vector types of the kernel's templates (stack_fold.h,
 * packed_decode.h), GCC / clang vector extensions: each template is compiled
 * portable and with AVX2 + FMA, so one type is two SSE registers or one AVX
 * register. Only static helpers take them: vector arguments never cross an
 * ABI boundary (GCC's -Wpsabi note about it is silenced here). */
#ifndef LIMBER_VEC8_H
#define LIMBER_VEC8_H

#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float lmb_v8f __attribute__((vector_size(32)));
typedef int32_t lmb_v8i __attribute__((vector_size(32)));
typedef uint32_t lmb_v8u32 __attribute__((vector_size(32)));
typedef uint16_t lmb_v8u16 __attribute__((vector_size(16)));
typedef uint8_t lmb_v8u8 __attribute__((vector_size(8)));

#endif
