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

/* Slerp weights for keys at most about 41 degrees apart, without acos, sin
 * or sqrt. With cos(theta) = 1 - u, the series of acos(1 - u)^2 = 2u + u^2/3
 * + 4u^3/45 + ... put into sin's gives sin(s theta) / theta = s (1 + u (c1 +
 * u (c2 + u c3 + ...))) with c1 = -s^2/3, c2 = s^2 (s^2/30 - 1/18) and c3 =
 * s^2 (s^2 (1/90 - s^2/630) - 2/135). For u <= LMB_SLERP_NEAR_U the dropped
 * terms are below 3e-8 of s. The two weights of a slerp share the factor
 * 1 / theta, which the normalisation that follows removes. */
#define LMB_SLERP_NEAR_U 0.0625f

/* k[0..3]: the weight at factor s is k0 + u (k1 + u (k2 + u k3)). */
static inline void lmb_slerp_near_coef(float s, float k[4]) {
    float s2 = s * s, s3 = s * s2;
    k[0] = s;
    k[1] = s3 * (-1.0f / 3.0f);
    k[2] = s3 * (s2 * (1.0f / 30.0f) - 1.0f / 18.0f);
    k[3] = s3 * (s2 * (1.0f / 90.0f - s2 * (1.0f / 630.0f)) - 2.0f / 135.0f);
}

#endif
