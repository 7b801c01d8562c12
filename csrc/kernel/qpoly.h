/* qpoly.h: branch-free polynomial acos and sin for quaternion slerp weights
 * (internal to the kernel: clip.c, stack.c). */
#ifndef LIMBER_QPOLY_H
#define LIMBER_QPOLY_H

#include <math.h>

/* acos(x) for x in [0, 1]: sqrt(1 - x) times a degree-7 polynomial
 * (Abramowitz & Stegun 4.4.46), and sin(y) for y in [0, pi/2]: its Taylor
 * series to y^13 (errors below 1e-7). The coefficients, lowest degree first,
 * are shared by the scalar helpers below (clip.c) and the vector ones of
 * stack_fold.h, so every build evaluates the same polynomials. */
#define LMB_ACOS_DEGREE 7
#define LMB_SIN_TERMS 6
static const float lmb_acos_coef[LMB_ACOS_DEGREE + 1] = {
    1.5707963050f, -0.2145988016f, 0.0889789874f, -0.0501743046f,
    0.0308918810f, -0.0170881256f, 0.0066700901f, -0.0012624911f};
/* sin(y) = y + y^3 (c[0] + y^2 (c[1] + ...)) */
static const float lmb_sin_coef[LMB_SIN_TERMS] = {-1.0f / 6.0f,        1.0f / 120.0f,
                                                  -1.0f / 5040.0f,     1.0f / 362880.0f,
                                                  -1.0f / 39916800.0f, 1.0f / 6227020800.0f};

/* Plain C, so loops using them vectorise with any SIMD width. */
static inline float lmb_acos01(float x) {
    float p = lmb_acos_coef[LMB_ACOS_DEGREE];
    for (int k = LMB_ACOS_DEGREE - 1; k >= 0; k--)
        p = p * x + lmb_acos_coef[k];
    float r = 1.0f - x;
    return sqrtf(r > 0.0f ? r : 0.0f) * p;
}

static inline float lmb_sin_half_pi(float y) {
    float y2 = y * y, p = lmb_sin_coef[LMB_SIN_TERMS - 1];
    for (int k = LMB_SIN_TERMS - 2; k >= 0; k--)
        p = p * y2 + lmb_sin_coef[k];
    return y + y * y2 * p;
}

#endif
