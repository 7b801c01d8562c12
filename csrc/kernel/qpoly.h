/* qpoly.h: branch-free polynomial acos and sin for quaternion slerp weights
 * (internal to the kernel: clip.c, stack.c). */
#ifndef LIMBER_QPOLY_H
#define LIMBER_QPOLY_H

#include <math.h>

/* acos(x) for x in [0, 1] and sin(y) for y in [0, pi/2]: the polynomials of
 * the AVX2 kernel in plain C (errors below 1e-7), so the loops below
 * vectorise with any SIMD width the compiler targets (loops using them
 * vectorise too). */
static inline float lmb_acos01(float x) {
    float p = -0.0012624911f;
    p = p * x + 0.0066700901f;
    p = p * x - 0.0170881256f;
    p = p * x + 0.0308918810f;
    p = p * x - 0.0501743046f;
    p = p * x + 0.0889789874f;
    p = p * x - 0.2145988016f;
    p = p * x + 1.5707963050f;
    float r = 1.0f - x;
    return sqrtf(r > 0.0f ? r : 0.0f) * p;
}

static inline float lmb_sin_half_pi(float y) {
    float y2 = y * y;
    float p = 1.0f / 6227020800.0f;
    p = p * y2 - 1.0f / 39916800.0f;
    p = p * y2 + 1.0f / 362880.0f;
    p = p * y2 - 1.0f / 5040.0f;
    p = p * y2 + 1.0f / 120.0f;
    p = p * y2 - 1.0f / 6.0f;
    return y + y * y2 * p;
}

#endif
