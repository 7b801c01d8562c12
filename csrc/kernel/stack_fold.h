/* stack_fold.h: the layer-stack fold of stack.h as a template, compiled
 * twice: portable (stack.c) and with AVX2 + FMA enabled (x86/stack_avx2.c).
 * Define FOLD(name) before including. The code works on whole components
 * of a block (LMB_LANES = 8 lanes) with GCC / clang vector extensions, so
 * either build keeps every value in vector registers (two SSE registers or
 * one AVX register per component). Every lane is computed on its own:
 * selects, never a cross-lane decision that changes a lane's value. */
#include "clip.h" /* LMB_NLERP_DOT */
#include "qpoly.h"
#include "stack.h"
#include "vec8.h"

#include <math.h>
#include <string.h>

#define W LMB_LANES
#define JS (LMB_TRS_FLOATS * W) /* floats per joint in a block */
#define V lmb_v8f
#define VI lmb_v8i

static inline V FOLD(ld)(const float *p) {
    V v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void FOLD(st)(float *p, V v) {
    memcpy(p, &v, sizeof v);
}
static inline V FOLD(splat)(float x) {
    V v = {x, x, x, x, x, x, x, x};
    return v;
}
/* m ? a : b per lane (m: all ones or zero per lane) */
static inline V FOLD(sel)(VI m, V a, V b) {
    return (V)(((VI)a & m) | ((VI)b & ~m));
}
/* sqrt(x) per lane (the loop vectorises: sqrt is one instruction) */
static inline V FOLD(sqrtv)(V x) {
    float in[W], out[W];
    memcpy(in, &x, sizeof in);
    for (int l = 0; l < W; l++)
        out[l] = sqrtf(in[l]);
    V r;
    memcpy(&r, out, sizeof r);
    return r;
}
/* 1 / sqrt(x) per lane, x > 0 (finite): a build may supply FOLD_RSQRT
 * (the AVX2 one: the estimate and a Newton step, within about 2 ulp) */
static inline V FOLD(rsqrt)(V x) {
#ifdef FOLD_RSQRT
    return FOLD_RSQRT(x);
#else
    return 1.0f / FOLD(sqrtv)(x);
#endif
}
/* the translation and scale components of a joint's LMB_TRS_FLOATS */
static const int FOLD(tcomp)[6] = {0, 1, 2, 7, 8, 9};

/* whether some lane of m (all ones or zero per lane) is set: a build may
 * supply FOLD_ANY (the AVX2 one: one movemask, not 8 lane extracts) */
static inline int FOLD(any)(VI m) {
#ifdef FOLD_ANY
    return FOLD_ANY(m);
#else
    int any = 0;
    for (int l = 0; l < W; l++)
        any |= m[l] != 0;
    return any;
#endif
}
static inline V FOLD(absv)(V x) {
    VI m = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff,
            0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    return (V)((VI)x & m);
}
/* acos(x) for x in [0, 1] and sin(y) for y in [0, pi/2]: qpoly.h's
 * polynomials on vectors */
static inline V FOLD(acosv)(V x) {
    V p = FOLD(splat)(lmb_acos_coef[LMB_ACOS_DEGREE]);
    for (int k = LMB_ACOS_DEGREE - 1; k >= 0; k--)
        p = p * x + lmb_acos_coef[k];
    V r = 1.0f - x;
    r = FOLD(sel)(r > 0.0f, r, FOLD(splat)(0.0f));
    return FOLD(sqrtv)(r) * p;
}
static inline V FOLD(sinv)(V y) {
    V y2 = y * y;
    V p = FOLD(splat)(lmb_sin_coef[LMB_SIN_TERMS - 1]);
    for (int k = LMB_SIN_TERMS - 2; k >= 0; k--)
        p = p * y2 + lmb_sin_coef[k];
    return y + y * y2 * p;
}

/* the slerp weight at factor s per lane for keys with cos(theta) = 1 - u:
 * lmb_slerp_near_coef (qpoly.h) on vectors */
static inline V FOLD(near)(V u, V s) {
    V s2 = s * s, s3 = s * s2;
    V k1 = s3 * (-1.0f / 3.0f), k2 = s3 * (s2 * (1.0f / 30.0f) - 1.0f / 18.0f);
    V k3 = s3 * (s2 * (1.0f / 90.0f - s2 * (1.0f / 630.0f)) - 2.0f / 135.0f);
    return s + u * (k1 + u * (k2 + u * k3));
}

/* A layer's playing sources in a block and their weights, which do not
 * depend on the joint: found once per layer, not once per joint. */
typedef struct FOLD(lsrc) {
    const float *s[LMB_STACK_MAX_SOURCES];
    V w[LMB_STACK_MAX_SOURCES];
    VI on[LMB_STACK_MAX_SOURCES];
    V inv;          /* 1 / the lane's weight sum (0 where it is 0) */
    VI single;      /* lanes where one source plays */
    int any_single; /* some lane of the block has one source playing */
    uint32_t n;
} FOLD(lsrc);

static void FOLD(layer_sources)(const lmb_stack_layer *ly, const float *const *src,
                                const float *src_w, FOLD(lsrc) * o) {
    V zero = FOLD(splat)(0.0f), wsum = zero, cnt = zero;
    uint32_t n = 0;
    for (uint32_t k = ly->first_source; k < ly->first_source + ly->source_count; k++) {
        if (!src[k]) continue;
        V wk = FOLD(ld)(src_w + (size_t)k * W);
        o->s[n] = src[k], o->w[n] = wk, o->on[n] = wk > 0.0f;
        wsum += wk;
        cnt += FOLD(sel)(o->on[n], FOLD(splat)(1.0f), zero);
        n++;
    }
    VI pos = wsum > 0.0f;
    o->inv = FOLD(sel)(pos, 1.0f / FOLD(sel)(pos, wsum, FOLD(splat)(1.0f)), zero);
    o->single = cnt == 1.0f;
    o->any_single = 0;
    for (int l = 0; l < W; l++)
        o->any_single |= o->single[l] != 0;
    o->n = n;
}

/* The layer pose A of joint j (all lanes) from its sources, when more than
 * one source plays: the weighted mean with weights normalised in each lane;
 * a lane where one source plays gets exactly that source's values. Each
 * rotation is sign-aligned to the joint's rest rotation rq (not to the
 * others): two sources more than 180 degrees apart (a hand swinging
 * forward in one clip, back in the other) then blend through the rest
 * pose, and the sign of one does not flip against the other as they move
 * (a flip would jump the blend in one frame). */
static inline __attribute__((always_inline)) void FOLD(layer_pose_n)(const FOLD(lsrc) * ls,
                                                                     uint32_t j, const float *rq,
                                                                     float *a, const uint32_t n,
                                                                     const int singles) {
    /* the sources' rotation signs first, then one component (or the
     * rotation) at a time over the sources: few values live at once, none
     * spilled */
    const float *s[LMB_STACK_MAX_SOURCES];
    V wq[LMB_STACK_MAX_SOURCES];
    const V *w = ls->w;
    const VI *on = ls->on;
    const V zero = FOLD(splat)(0.0f), inv = ls->inv;
    const VI single = ls->single;
    for (uint32_t m = 0; m < n; m++) {
        const float *sk = ls->s[m] + (size_t)j * JS;
        V dot = rq[0] * FOLD(ld)(sk + 3 * W) + rq[1] * FOLD(ld)(sk + 4 * W) +
                rq[2] * FOLD(ld)(sk + 5 * W) + rq[3] * FOLD(ld)(sk + 6 * W);
        s[m] = sk;
        wq[m] = FOLD(sel)(dot < 0.0f, -w[m], w[m]);
    }
    for (int t = 0; t < 6; t++) {
        const int c = FOLD(tcomp)[t];
        V acc = zero, one = zero;
        for (uint32_t m = 0; m < n; m++) {
            V v = FOLD(ld)(s[m] + c * W);
            acc += w[m] * v;
            if (singles) one = FOLD(sel)(on[m], v, one);
        }
        FOLD(st)(a + c * W, singles ? FOLD(sel)(single, one, acc * inv) : acc * inv);
    }
    V q[4] = {zero, zero, zero, zero}, one[4] = {zero, zero, zero, zero};
    for (uint32_t m = 0; m < n; m++)
        for (int c = 0; c < 4; c++) {
            V v = FOLD(ld)(s[m] + (3 + c) * W);
            q[c] += wq[m] * v;
            if (singles) one[c] = FOLD(sel)(on[m], v, one[c]);
        }
    V q2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
    /* opposite rotations that cancel exactly: identity (any choice is a jump) */
    VI qok = q2 > 1e-30f;
    V qi = FOLD(sel)(qok, FOLD(rsqrt)(FOLD(sel)(qok, q2, FOLD(splat)(1.0f))), FOLD(splat)(1.0f));
    q[0] = FOLD(sel)(qok, q[0], zero), q[1] = FOLD(sel)(qok, q[1], zero);
    q[2] = FOLD(sel)(qok, q[2], zero), q[3] = FOLD(sel)(qok, q[3], FOLD(splat)(1.0f));
    for (int c = 0; c < 4; c++)
        FOLD(st)(a + (3 + c) * W, singles ? FOLD(sel)(single, one[c], q[c] * qi) : q[c] * qi);
}

/* layer_pose_n with the usual two sources (a cross-fade) unrolled, and
 * without the single-source selects where no lane needs them (the same
 * values: a select of acc * inv) */
static void FOLD(layer_pose)(const FOLD(lsrc) * ls, uint32_t j, const float *rq, float *a) {
#ifdef FOLD_MEAN2
    /* a build's own two-source mean (the AVX2 one, shared with the frame
     * plan's fused sampling), then the lanes where one source plays */
    if (ls->n == 2) {
        const float *s0 = ls->s[0] + (size_t)j * JS, *s1 = ls->s[1] + (size_t)j * JS;
        FOLD_MEAN2(s0, s1, ls->w[0], ls->w[1], ls->inv, rq, a);
        if (ls->any_single)
            for (int c = 0; c < LMB_TRS_FLOATS; c++) {
                V one = FOLD(sel)(ls->on[1], FOLD(ld)(s1 + c * W),
                                  FOLD(sel)(ls->on[0], FOLD(ld)(s0 + c * W), FOLD(splat)(0.0f)));
                FOLD(st)(a + c * W, FOLD(sel)(ls->single, one, FOLD(ld)(a + c * W)));
            }
        return;
    }
#endif
    if (ls->n == 2 && !ls->any_single)
        FOLD(layer_pose_n)(ls, j, rq, a, 2, 0);
    else if (ls->n == 2)
        FOLD(layer_pose_n)(ls, j, rq, a, 2, 1);
    else
        FOLD(layer_pose_n)(ls, j, rq, a, ls->n, 1);
}

/* P = fold of A into P by f per lane: override (weights strictly between
 * 0 and 1 somewhere; 0 and 1 are exact). */
static void FOLD(fold_override)(const float *a, V f, float *p) {
    /* the rotations up front; translations and scales loaded where they
     * are used (all twenty values at once did not fit the registers) */
    V pq[4], aq[4];
    for (int c = 0; c < 4; c++)
        pq[c] = FOLD(ld)(p + (3 + c) * W), aq[c] = FOLD(ld)(a + (3 + c) * W);
    V one = FOLD(splat)(1.0f), g = f, h = one - g;
    V dot = pq[0] * aq[0] + pq[1] * aq[1] + pq[2] * aq[2] + pq[3] * aq[3];
    V x = FOLD(absv)(dot);
    VI far = x <= LMB_NLERP_DOT;
    V wa = h, wb = g;
    if (FOLD(any)(far)) {
        /* slerp weights up to a common factor per lane (normalised below):
         * qpoly.h's near-key polynomial, acos and sin for keys further apart */
        V u = one - x;
        V sa = FOLD(near)(u, h), sb = FOLD(near)(u, g);
        VI wide = u > LMB_SLERP_NEAR_U;
        if (FOLD(any)(wide & far)) {
            V theta = FOLD(acosv)(x);
            sa = FOLD(sel)(wide, FOLD(sinv)(h * theta), sa);
            sb = FOLD(sel)(wide, FOLD(sinv)(g * theta), sb);
        }
        wa = FOLD(sel)(far, sa, wa);
        wb = FOLD(sel)(far, sb, wb);
    }
    wb = FOLD(sel)(dot < 0.0f, -wb, wb);
    V q[4];
    for (int c = 0; c < 4; c++)
        q[c] = wa * pq[c] + wb * aq[c];
    V qi = FOLD(rsqrt)(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    VI all = g == 1.0f, none = g == 0.0f;
    for (int c = 0; c < 4; c++)
        FOLD(st)(p + (3 + c) * W, FOLD(sel)(none, pq[c], FOLD(sel)(all, aq[c], q[c] * qi)));
    for (int t = 0; t < 6; t++) {
        const int c = FOLD(tcomp)[t];
        V pv = FOLD(ld)(p + c * W), av = FOLD(ld)(a + c * W);
        FOLD(st)(p + c * W, FOLD(sel)(none, pv, FOLD(sel)(all, av, pv * h + av * g)));
    }
}

/* additive: P += f (A - R) (see stack.h); f = 0 leaves P exactly. */
static void FOLD(fold_additive)(const float *a, const float *r, V f, float *p) {
    V one = FOLD(splat)(1.0f), g = f, h = one - g;
    VI none = g == 0.0f;
    for (int c = 0; c < 3; c++) {
        V pt = FOLD(ld)(p + c * W), at = FOLD(ld)(a + c * W);
        FOLD(st)(p + c * W, FOLD(sel)(none, pt, pt + g * (at - r[c])));
        V ps = FOLD(ld)(p + (7 + c) * W), as = FOLD(ld)(a + (7 + c) * W);
        float rs = r[7 + c];
        V ratio = rs != 0.0f ? as / rs : one;
        FOLD(st)(p + (7 + c) * W, FOLD(sel)(none, ps, ps * (1.0f + g * (ratio - 1.0f))));
    }
    float rx = -r[3], ry = -r[4], rz = -r[5], rw = r[6]; /* conj(R.q), R unit */
    V ax = FOLD(ld)(a + 3 * W), ay = FOLD(ld)(a + 4 * W), az = FOLD(ld)(a + 5 * W);
    V aw = FOLD(ld)(a + 6 * W);
    /* dq = conj(R) * A */
    V dx = rw * ax + rx * aw + ry * az - rz * ay;
    V dy = rw * ay - rx * az + ry * aw + rz * ax;
    V dz = rw * az + rx * ay - ry * ax + rz * aw;
    V dw = rw * aw - rx * ax - ry * ay - rz * az;
    V sg = FOLD(sel)(dw < 0.0f, -g, g);
    V ex = sg * dx, ey = sg * dy, ez = sg * dz, ew = h + sg * dw;
    V ei = FOLD(rsqrt)(ex * ex + ey * ey + ez * ez + ew * ew);
    ex *= ei, ey *= ei, ez *= ei, ew *= ei;
    V px = FOLD(ld)(p + 3 * W), py = FOLD(ld)(p + 4 * W), pz = FOLD(ld)(p + 5 * W);
    V pw = FOLD(ld)(p + 6 * W);
    /* P * E */
    V ox = pw * ex + px * ew + py * ez - pz * ey;
    V oy = pw * ey - px * ez + py * ew + pz * ex;
    V oz = pw * ez + px * ey - py * ex + pz * ew;
    V ow = pw * ew - px * ex - py * ey - pz * ez;
    V oi = FOLD(rsqrt)(ox * ox + oy * oy + oz * oz + ow * ow);
    FOLD(st)(p + 3 * W, FOLD(sel)(none, px, ox * oi));
    FOLD(st)(p + 4 * W, FOLD(sel)(none, py, oy * oi));
    FOLD(st)(p + 5 * W, FOLD(sel)(none, pz, oz * oi));
    FOLD(st)(p + 6 * W, FOLD(sel)(none, pw, ow * oi));
}

void FOLD(lmb_stack_block)(const lmb_skeleton *sk, const lmb_stack_layer *layers,
                           uint32_t layer_count, const float *const *src, const float *src_w,
                           const float *layer_w, const int16_t *top, int first_done, float *out) {
    const uint32_t J = sk->joint_count;
    /* The usual first layer (override, no mask, weight 1 and a source
     * playing in every lane) replaces the rest pose everywhere it is
     * folded: its joints are written once, straight from the sources, and
     * only the others start at the rest pose. */
    int first_full = layer_count > 0 && layers[0].mode == LMB_LAYER_OVERRIDE && !layers[0].mask;
    for (int l = 0; first_full && !first_done && l < W; l++) {
        int plays = 0;
        for (uint32_t k = layers[0].first_source;
             k < layers[0].first_source + layers[0].source_count; k++)
            plays |= src[k] && src_w[(size_t)k * W + (size_t)l] > 0.0f;
        first_full = plays && layer_w[l] == 1.0f;
    }
    for (uint32_t j = 0; j < J; j++) {
        if (first_full && !(top && top[j] > 0)) continue;
        const float *rest = sk->rest + (size_t)j * LMB_TRS_FLOATS;
        float *p = out + (size_t)j * JS;
        for (int c = 0; c < LMB_TRS_FLOATS; c++)
            FOLD(st)(p + c * W, FOLD(splat)(rest[c]));
    }
    for (uint32_t n = first_done && first_full ? 1 : 0; n < layer_count; n++) {
        const lmb_stack_layer *ly = layers + n;
        V lw = FOLD(ld)(layer_w + (size_t)n * W);
        unsigned on = 0, any = 0;
        for (int l = 0; l < W; l++)
            on |= (unsigned)(lw[l] > 0.0f) << l;
        /* the sources that play (weight > 0 in some lane where the layer is on) */
        int playing = 0;
        uint32_t last = 0;
        for (uint32_t k = ly->first_source; on && k < ly->first_source + ly->source_count; k++) {
            if (!src[k]) continue;
            unsigned son = 0;
            for (int l = 0; l < W; l++)
                son |= (unsigned)(src_w[(size_t)k * W + (size_t)l] > 0.0f) << l;
            if (!(son & on)) continue;
            any |= son;
            playing++;
            last = k;
        }
        unsigned has = any & on;
        if (!has) continue;
        VI hv;
        for (int l = 0; l < W; l++)
            hv[l] = (has >> l & 1u) ? -1 : 0;
        /* f = layer weight x mask; for mask 1 (the usual case) once per layer */
        V f1 = FOLD(sel)(hv, lw, FOLD(splat)(0.0f));
        int exact1 = 1, ones1 = 1;
        for (int l = 0; l < W; l++) {
            exact1 &= f1[l] == 1.0f || f1[l] == 0.0f;
            ones1 &= f1[l] == 1.0f;
        }
        FOLD(lsrc) ls;
        if (playing != 1) FOLD(layer_sources)(ly, src, src_w, &ls);
        for (uint32_t j = 0; j < J; j++) {
            float m = ly->mask ? ly->mask[j] : 1.0f;
            if (m == 0.0f || (top && top[j] > (int32_t)n)) continue;
            float abuf[JS] __attribute__((aligned(32)));
            const float *a = abuf;
            const float *rq = sk->rest + (size_t)j * LMB_TRS_FLOATS + 3;
            if (n == 0 && first_full && playing != 1) {
                /* (the weight-1 fold below would copy A as it is) */
                FOLD(layer_pose)(&ls, j, rq, out + (size_t)j * JS);
                continue;
            }
            if (playing == 1)
                a = src[last] + (size_t)j * JS;
            else
                FOLD(layer_pose)(&ls, j, rq, abuf);
            V f = f1;
            int exact = exact1, all_ones = ones1;
            if (m != 1.0f) {
                f = f1 * m;
                exact = 1, all_ones = 1;
                for (int l = 0; l < W; l++) {
                    exact &= f[l] == 1.0f || f[l] == 0.0f;
                    all_ones &= f[l] == 1.0f;
                }
            }
            float *p = out + (size_t)j * JS;
            if (ly->mode == LMB_LAYER_OVERRIDE && exact) {
                /* weights 0 or 1 (the common case): A where 1 */
                VI ones = f == 1.0f;
                for (int c = 0; c < LMB_TRS_FLOATS; c++) {
                    V av = FOLD(ld)(a + c * W);
                    FOLD(st)(p + c * W, all_ones ? av : FOLD(sel)(ones, av, FOLD(ld)(p + c * W)));
                }
            } else if (ly->mode == LMB_LAYER_OVERRIDE) {
                FOLD(fold_override)(a, f, p);
            } else {
                const float *r = ly->reference ? ly->reference + (size_t)j * LMB_TRS_FLOATS
                                               : sk->rest + (size_t)j * LMB_TRS_FLOATS;
                FOLD(fold_additive)(a, r, f, p);
            }
        }
    }
}

#undef W
#undef JS
#undef V
#undef VI
