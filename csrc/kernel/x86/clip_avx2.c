/* clip_avx2.c: samples one joint track for up to 8 lanes of a pose block
 * at once with AVX2 + FMA.
 *
 * The key lookup stays scalar per lane (cursor fast path, binary search
 * fallback), giving each lane the offset of its key record. For LINEAR and
 * STEP tracks the two records a, b (time + values) of each lane are loaded
 * with one or two unaligned 8-float loads and transposed, so every register
 * then holds one component for the 8 lanes, which is exactly the pose's
 * SoA layout: results are stored with no shuffles. Outside the key range a
 * lane uses the first or last record with s = 0 (a * (1 - s) + b * s is
 * then exactly a). Rotations lerp and normalise where keys are within
 * ~3.6 degrees, else slerp: qpoly.h's near-key polynomial up to ~41
 * degrees, acos and sin beyond. CUBICSPLINE tracks fall back to the
 * scalar sampler per lane. Key records are followed by 16 floats of padding, so loads
 * past the last record stay inside the clip. */
#include "clip.h"
#include "layer_mean.h"
#include "qpoly.h"
#include "simd.h"

#if LMB_HAVE_X86

/* Offset of the key record to use and whether s is forced to 0. */
static inline uint32_t lane_record(const lmb_clip *c, const lmb_track *tr, float t,
                                   lmb_cursor *cursor, int *zero) {
    if (t <= tr->first) {
        *zero = 1;
        return 0;
    }
    if (t >= tr->last) {
        *zero = 1;
        return (tr->key_count - 1) * tr->stride;
    }
    *zero = tr->interp == LMB_STEP;
    return lmb_find_key(c, tr, t, cursor) * tr->stride;
}

/* Record offsets (and s = 0 flags) of track `tr` (number m) for every lane,
 * prefetching the records. CUBICSPLINE tracks are sampled per lane later. */
static inline void find_lanes(const lmb_clip *c, const lmb_track *tr, unsigned lanes,
                              const float *t, lmb_cursor *const *cur, uint32_t m, uint32_t *off,
                              int32_t *zbits) {
    if (tr->interp == LMB_CUBIC) return;
    const float *rec = c->values + tr->values;
    for (int l = 0; l < LMB_LANES; l++) {
        int z = 1;
        off[l] = 0;
        if (lanes >> l & 1u) {
            off[l] = lane_record(c, tr, t[l], cur[l] + m, &z);
            __builtin_prefetch(rec + off[l]);
        }
        zbits[l] = z ? -1 : 0;
    }
}

/* acos(x) for x in [0, 1]: sqrt(1 - x) times a degree-7 polynomial
 * (Abramowitz & Stegun 4.4.46, error below 2e-8 before float rounding). */
LMB_AVX2 static inline __m256 acos_poly(__m256 x) {
    static const float a[8] = {1.5707963050f, -0.2145988016f, 0.0889789874f, -0.0501743046f,
                               0.0308918810f, -0.0170881256f, 0.0066700901f, -0.0012624911f};
    __m256 p = _mm256_set1_ps(a[7]);
    for (int k = 6; k >= 0; k--)
        p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(a[k]));
    __m256 r = _mm256_sub_ps(_mm256_set1_ps(1.0f), x);
    return _mm256_mul_ps(_mm256_sqrt_ps(_mm256_max_ps(r, _mm256_setzero_ps())), p);
}

/* sin(y) for y in [0, pi/2]: Taylor series to y^13 (error below 1e-9). */
LMB_AVX2 static inline __m256 sin_poly(__m256 y) {
    static const float c[6] = {-1.0f / 6,     1.0f / 120,       -1.0f / 5040,
                               1.0f / 362880, -1.0f / 39916800, 1.0f / 6227020800.0f};
    __m256 y2 = _mm256_mul_ps(y, y);
    __m256 p = _mm256_set1_ps(c[5]);
    for (int k = 4; k >= 0; k--)
        p = _mm256_fmadd_ps(p, y2, _mm256_set1_ps(c[k]));
    return _mm256_fmadd_ps(_mm256_mul_ps(p, y2), y, y);
}

/* k0 + u (k1 + u (k2 + u k3)): lmb_slerp_near_coef's weight (qpoly.h). */
LMB_AVX2 static inline __m256 near_poly(__m256 u, const float k[4]) {
    __m256 p = _mm256_fmadd_ps(u, _mm256_set1_ps(k[3]), _mm256_set1_ps(k[2]));
    p = _mm256_fmadd_ps(u, p, _mm256_set1_ps(k[1]));
    return _mm256_fmadd_ps(u, p, _mm256_set1_ps(k[0]));
}

/* The same weight at a factor s per lane: lmb_slerp_near_coef on vectors. */
LMB_AVX2 static inline __m256 near_poly_v(__m256 u, __m256 s) {
    __m256 s2 = _mm256_mul_ps(s, s), s3 = _mm256_mul_ps(s, s2);
    __m256 k1 = _mm256_mul_ps(s3, _mm256_set1_ps(-1.0f / 3.0f));
    __m256 k2 = _mm256_mul_ps(
        s3, _mm256_fmadd_ps(s2, _mm256_set1_ps(1.0f / 30.0f), _mm256_set1_ps(-1.0f / 18.0f)));
    __m256 k3 = _mm256_fnmadd_ps(s2, _mm256_set1_ps(1.0f / 630.0f), _mm256_set1_ps(1.0f / 90.0f));
    k3 = _mm256_mul_ps(s3, _mm256_fmadd_ps(s2, k3, _mm256_set1_ps(-2.0f / 135.0f)));
    __m256 p = _mm256_fmadd_ps(u, k3, k2);
    p = _mm256_fmadd_ps(u, p, k1);
    return _mm256_fmadd_ps(u, p, s);
}

/* Stores v into the 8 lanes at d, keeping lanes not in `keep` mask. */
LMB_AVX2 static inline void store_lanes(float *d, __m256 v, __m256 mask, int full) {
    if (full)
        _mm256_storeu_ps(d, v);
    else
        _mm256_storeu_ps(d, _mm256_blendv_ps(_mm256_loadu_ps(d), v, mask));
}

LMB_AVX2 void lmb_sample_lanes_avx2(const lmb_clip *c, float *blk, lmb_cursor *const cur[LMB_LANES],
                                    unsigned lanes, const float t[LMB_LANES]) {
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES;
    float *local = blk;
    const int full = lanes == 0xFFu;
    int32_t bits[LMB_LANES];
    for (uint32_t l = 0; l < LMB_LANES; l++)
        bits[l] = (lanes >> l & 1u) ? -1 : 0;
    const __m256 mask = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(void *)bits));
    const __m256 tv = _mm256_loadu_ps(t), one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    const __m256 signbit = _mm256_set1_ps(-0.0f), thr = _mm256_set1_ps(LMB_NLERP_DOT);
    static const uint32_t path_offset[3] = {0, 3 * LMB_LANES, 7 * LMB_LANES};

    /* Software pipeline: the lanes' key records of track m + 1 are found
     * and prefetched before track m is interpolated, so the (on seeks,
     * uncached) record loads of two tracks overlap. */
    const uint32_t count = c->joint_track_count;
    uint32_t offs[2][LMB_LANES];
    int32_t zbs[2][LMB_LANES];
    const lmb_track *tr = c->tracks;
    if (count > 0) find_lanes(c, tr, lanes, t, cur, 0, offs[0], zbs[0]);
    for (uint32_t m = 0; m < count; m++, tr++) {
        if (m + 3 < count) {
            /* forward playback: where the cursors of track m + 3 will look */
            const lmb_track *pt = tr + 3;
            const float *pr = c->values + pt->values;
            for (int l = 0; l < LMB_LANES; l++) {
                if (!(lanes >> l & 1u)) continue;
                const float *r = pr + (size_t)cur[l][m + 3].key * pt->stride;
                __builtin_prefetch(r);
                __builtin_prefetch(r + 3 * pt->stride);
            }
        }
        if (m + 1 < count)
            find_lanes(c, tr + 1, lanes, t, cur, m + 1, offs[(m + 1) & 1], zbs[(m + 1) & 1]);
        float *d = local + (size_t)tr->target * jstride + path_offset[tr->path];
        if (tr->interp == LMB_CUBIC) {
            for (int l = 0; l < LMB_LANES; l++) {
                if (!(lanes >> l & 1u)) continue;
                float v[4] = {0, 0, 0, 0};
                lmb_track_sample(c, tr, t[l], cur[l] + m, v);
                for (int q = 0; q < tr->width; q++)
                    d[q * LMB_LANES + l] = v[q];
            }
            continue;
        }
        const float *rec = c->values + tr->values;
        const uint32_t *off = offs[m & 1];
        const int32_t *zbits = zbs[m & 1];
        __m256 v[8], w[8];
        for (int l = 0; l < LMB_LANES; l++)
            v[l] = _mm256_loadu_ps(rec + off[l]);
        for (int l = 0; l < LMB_LANES; l++)
            w[l] = tr->width == 4 ? _mm256_loadu_ps(rec + off[l] + 2) : v[l];
        lmb_transpose8(v);
        const __m256 zmask =
            _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(void *)zbits));
        if (tr->width == 3) {
            /* v: ta, ax, ay, az, tb, bx, by, bz */
            __m256 sv = _mm256_div_ps(_mm256_sub_ps(tv, v[0]), _mm256_sub_ps(v[4], v[0]));
            sv = _mm256_blendv_ps(sv, zero, zmask);
            __m256 ws = _mm256_sub_ps(one, sv);
            for (int q = 0; q < 3; q++) {
                __m256 r = _mm256_fmadd_ps(v[5 + q], sv, _mm256_mul_ps(v[1 + q], ws));
                store_lanes(d + q * LMB_LANES, r, mask, full);
            }
            continue;
        }
        /* v: ta, ax, ay, az, aw, tb, bx, by; w (from +2): .., .., .., .., .., .., bz, bw */
        lmb_transpose8(w);
        __m256 sv = _mm256_div_ps(_mm256_sub_ps(tv, v[0]), _mm256_sub_ps(v[5], v[0]));
        sv = _mm256_blendv_ps(sv, zero, zmask);
        __m256 ax = v[1], ay = v[2], az = v[3], aw = v[4], bx = v[6], by = v[7], bz = w[6],
               bw = w[7];
        __m256 dot = _mm256_fmadd_ps(
            ax, bx, _mm256_fmadd_ps(ay, by, _mm256_fmadd_ps(az, bz, _mm256_mul_ps(aw, bw))));
        __m256 sgn = _mm256_and_ps(dot, signbit);
        __m256 wb = sv, wa = _mm256_sub_ps(one, sv);
        /* lanes that need a true slerp: |dot| <= threshold and s != 0 */
        __m256 x = _mm256_andnot_ps(signbit, dot);
        __m256 far = _mm256_cmp_ps(x, thr, _CMP_LE_OQ);
        far = _mm256_andnot_ps(zmask, _mm256_and_ps(far, mask));
        if (_mm256_movemask_ps(far)) {
            /* slerp weights up to a common factor per lane (1 / theta or
             * 1 / sin(theta)), which the normalisation below removes */
            __m256 u = _mm256_sub_ps(one, x);
            __m256 sa = near_poly_v(u, wa), sb = near_poly_v(u, wb);
            __m256 wide = _mm256_cmp_ps(u, _mm256_set1_ps(LMB_SLERP_NEAR_U), _CMP_GT_OQ);
            if (_mm256_movemask_ps(_mm256_and_ps(wide, far))) {
                __m256 theta = acos_poly(x);
                sa = _mm256_blendv_ps(sa, sin_poly(_mm256_mul_ps(wa, theta)), wide);
                sb = _mm256_blendv_ps(sb, sin_poly(_mm256_mul_ps(wb, theta)), wide);
            }
            wa = _mm256_blendv_ps(wa, sa, far);
            wb = _mm256_blendv_ps(wb, sb, far);
        }
        wb = _mm256_xor_ps(wb, sgn);
        __m256 qx = _mm256_fmadd_ps(bx, wb, _mm256_mul_ps(ax, wa));
        __m256 qy = _mm256_fmadd_ps(by, wb, _mm256_mul_ps(ay, wa));
        __m256 qz = _mm256_fmadd_ps(bz, wb, _mm256_mul_ps(az, wa));
        __m256 qw = _mm256_fmadd_ps(bw, wb, _mm256_mul_ps(aw, wa));
        __m256 len2 = _mm256_fmadd_ps(
            qx, qx, _mm256_fmadd_ps(qy, qy, _mm256_fmadd_ps(qz, qz, _mm256_mul_ps(qw, qw))));
        __m256 inv = _mm256_div_ps(one, _mm256_sqrt_ps(len2));
        __m256 out[4] = {_mm256_mul_ps(qx, inv), _mm256_mul_ps(qy, inv), _mm256_mul_ps(qz, inv),
                         _mm256_mul_ps(qw, inv)};
        for (int q = 0; q < 4; q++)
            store_lanes(d + q * LMB_LANES, out[q], mask, full);
    }
}

/* ---- dense clips --------------------------------------------------------
 * Each lane's two frames hold 8 joints per chunk, component-major, so one
 * lane is interpolated 8 joints at a time with no shuffles (the quaternion
 * rule per joint as above). The lanes' results for a chunk go to a small
 * buffer (component, lane, joint) and are transposed per component into
 * the pose's (joint, component, lane) layout: 10 transposes per 8 joints
 * of 8 instances. */

/* Interpolates one lane's chunk: out[c * os + j] for components c, joints j;
 * translations at factor at, rotations ar, scales as (a dense clip's three
 * are one; a packed clip's streams keep keys at steps of their own); ka and
 * kb: lmb_slerp_near_coef of 1 - ar and ar (a dense lane's are the same for
 * every chunk, so its caller computes them once). */
LMB_AVX2 static inline __attribute__((always_inline)) void
dense_lane(const float *a, const float *b, float at, float ar, float as, const float ka[4],
           const float kb[4], float *out, const int os, const int aligned) {
#define LD(p) (aligned ? _mm256_load_ps(p) : _mm256_loadu_ps(p))
    const __m256 one = _mm256_set1_ps(1.0f), signbit = _mm256_set1_ps(-0.0f);
    const __m256 alt = _mm256_set1_ps(at), als = _mm256_set1_ps(as);
    for (int c = 0; c < 3; c++) {
        __m256 ta = LD(a + c * 8), tb = LD(b + c * 8);
        _mm256_store_ps(out + c * os, _mm256_fmadd_ps(_mm256_sub_ps(tb, ta), alt, ta));
        __m256 sa = LD(a + (7 + c) * 8), sb = LD(b + (7 + c) * 8);
        _mm256_store_ps(out + (7 + c) * os, _mm256_fmadd_ps(_mm256_sub_ps(sb, sa), als, sa));
    }
    const __m256 al = _mm256_set1_ps(ar);
    __m256 ax = LD(a + 24), ay = LD(a + 32);
    __m256 az = LD(a + 40), aw = LD(a + 48);
    __m256 bx = LD(b + 24), by = LD(b + 32);
    __m256 bz = LD(b + 40), bw = LD(b + 48);
    __m256 dot = _mm256_fmadd_ps(
        ax, bx, _mm256_fmadd_ps(ay, by, _mm256_fmadd_ps(az, bz, _mm256_mul_ps(aw, bw))));
    __m256 sgn = _mm256_and_ps(dot, signbit);
    __m256 x = _mm256_andnot_ps(signbit, dot);
    __m256 wa = _mm256_sub_ps(one, al), wb = al;
    if (ar != 0.0f) {
        /* slerp weights without a common factor (1 / theta or 1 / sin(theta)):
         * the result is normalised below, which removes any common scale.
         * The near-key polynomial is cheaper than a mispredicted branch on
         * whether some joint needs it, so it always runs. */
        __m256 far = _mm256_cmp_ps(x, _mm256_set1_ps(LMB_NLERP_DOT), _CMP_LE_OQ);
        __m256 u = _mm256_sub_ps(one, x);
        __m256 sa = near_poly(u, ka), sb = near_poly(u, kb);
        __m256 wide = _mm256_cmp_ps(u, _mm256_set1_ps(LMB_SLERP_NEAR_U), _CMP_GT_OQ);
        if (_mm256_movemask_ps(wide)) {
            __m256 theta = acos_poly(x);
            sa = _mm256_blendv_ps(sa, sin_poly(_mm256_mul_ps(wa, theta)), wide);
            sb = _mm256_blendv_ps(sb, sin_poly(_mm256_mul_ps(wb, theta)), wide);
        }
        wa = _mm256_blendv_ps(wa, sa, far);
        wb = _mm256_blendv_ps(wb, sb, far);
    }
    wb = _mm256_xor_ps(wb, sgn);
    __m256 qx = _mm256_fmadd_ps(bx, wb, _mm256_mul_ps(ax, wa));
    __m256 qy = _mm256_fmadd_ps(by, wb, _mm256_mul_ps(ay, wa));
    __m256 qz = _mm256_fmadd_ps(bz, wb, _mm256_mul_ps(az, wa));
    __m256 qw = _mm256_fmadd_ps(bw, wb, _mm256_mul_ps(aw, wa));
    __m256 len2 = _mm256_fmadd_ps(
        qx, qx, _mm256_fmadd_ps(qy, qy, _mm256_fmadd_ps(qz, qz, _mm256_mul_ps(qw, qw))));
    /* 1 / sqrt(len2): rsqrt estimate and one Newton step (~2 ulp); lanes
     * whose keys cancel (a packed clip's keys from a damaged snapshot: exact
     * clips store unit keys) get zeros, not NaN */
    __m256 ok = _mm256_cmp_ps(len2, _mm256_set1_ps(1e-30f), _CMP_GT_OQ);
    __m256 r = _mm256_rsqrt_ps(_mm256_max_ps(len2, _mm256_set1_ps(1e-30f)));
    __m256 inv = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), r),
                               _mm256_fnmadd_ps(_mm256_mul_ps(len2, r), r, _mm256_set1_ps(3.0f)));
    inv = _mm256_and_ps(inv, ok);
    _mm256_store_ps(out + 3 * os, _mm256_mul_ps(qx, inv));
    _mm256_store_ps(out + 4 * os, _mm256_mul_ps(qy, inv));
    _mm256_store_ps(out + 5 * os, _mm256_mul_ps(qz, inv));
    _mm256_store_ps(out + 6 * os, _mm256_mul_ps(qw, inv));
#undef LD
}

/* A packed lane's keys for chunk q in its cache, factors into al. */
static inline void lane_keys(const lmb_dense_plan *plan, int l, uint32_t q, float al[3]) {
    lmb_packed_chunk_keys_avx2(plan->pk[l], q, plan->pos[l],
                               plan->cache[l] + (size_t)q * LMB_PK_CACHE_FLOATS, al);
}

/* lane_chunk after lane_keys (packed lanes: al, their factors). */
LMB_AVX2 static inline __attribute__((always_inline)) void
lane_interp(const lmb_dense_plan *plan, int l, uint32_t q, const float *coef, const float al[3],
            float *out, const int os) {
    if (plan->pk[l]) { /* its keys from the instance's cache, as dense frames */
        const float *kc = plan->cache[l] + (size_t)q * LMB_PK_CACHE_FLOATS;
        float k[8];
        lmb_slerp_near_coef(1.0f - al[1], k);
        lmb_slerp_near_coef(al[1], k + 4);
        dense_lane(kc, kc + 80, al[0], al[1], al[2], k, k + 4, out, os, 0);
    } else {
        float a = plan->alpha[l];
        dense_lane(plan->a[l] + q * 80, plan->b[l] + q * 80, a, a, a, coef, coef + 4, out, os, 1);
    }
}

/* Chunk q of lane l of `plan` into out (component c at out + c * os):
 * through the instance's decoded-key cache (packed clips) or the clip's
 * dense frames (near-key coefficients coef, computed once per lane). */
LMB_AVX2 static inline __attribute__((always_inline)) void lane_chunk(const lmb_dense_plan *plan,
                                                                      int l, uint32_t q,
                                                                      const float *coef, float *out,
                                                                      const int os) {
    float al[3] = {0.0f, 0.0f, 0.0f};
    if (plan->pk[l]) lane_keys(plan, l, q, al);
    lane_interp(plan, l, q, coef, al, out, os);
}

/* The near-key slerp coefficients of each dense lane of `plan`. */
static void lane_coefs(const lmb_dense_plan *plan, float coef[LMB_LANES][8]) {
    for (int l = 0; l < LMB_LANES; l++)
        if (plan->chunks[l] && !plan->pk[l]) {
            lmb_slerp_near_coef(1.0f - plan->alpha[l], coef[l]);
            lmb_slerp_near_coef(plan->alpha[l], coef[l] + 4);
        }
}

/* Asks for chunk q of lane l of `plan` (another block's or source's): its
 * decoded-key cache, or its two frames (5 lines each). */
static inline void prefetch_chunk(const lmb_dense_plan *plan, int l, uint32_t q) {
    if (!plan || q >= plan->chunks[l] || (plan->need && !(plan->need[q] >> l & 1u))) return;
    if (plan->pk[l]) {
        const char *nc = (const char *)(plan->cache[l] + (size_t)q * LMB_PK_CACHE_FLOATS);
        for (size_t m = 0; m < LMB_PK_CACHE_FLOATS * sizeof(float); m += 64)
            __builtin_prefetch(nc + m);
    } else {
        const char *na = (const char *)(plan->a[l] + q * 80);
        const char *nb = (const char *)(plan->b[l] + q * 80);
        for (int m = 0; m < 320; m += 64) {
            __builtin_prefetch(na + m);
            if (nb != na) __builtin_prefetch(nb + m);
        }
    }
}

/* The lanes' chunk results in buf (component c of lane l at buf + c * 64 +
 * l * 8) into the pose block's jn joints at d, lanes in `lanes` only. */
LMB_AVX2 static void store_chunk(const float *buf, float *d, uint32_t jn, unsigned lanes) {
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES;
    if (__builtin_popcount(lanes) <= 2) {
        /* one or two lanes (the rest of the block covered by a layer
         * above, or LOD): their values one by one cost less than ten
         * transposes of eight lanes */
        for (unsigned left = lanes; left; left &= left - 1) {
            const int l = __builtin_ctz(left);
            for (uint32_t j = 0; j < jn; j++)
                for (int c = 0; c < 10; c++)
                    d[(size_t)j * jstride + (size_t)c * LMB_LANES + (size_t)l] =
                        buf[c * 64 + l * 8 + (int)j];
        }
        return;
    }
    int32_t bits[LMB_LANES];
    for (int l = 0; l < LMB_LANES; l++)
        bits[l] = (lanes >> l & 1u) ? -1 : 0;
    const __m256 mask = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)(void *)bits));
    const int full = lanes == 0xFFu;
    for (int c = 0; c < 10; c++) {
        __m256 v[8];
        for (int l = 0; l < LMB_LANES; l++)
            v[l] = _mm256_load_ps(buf + c * 64 + l * 8);
        lmb_transpose8(v);
        for (uint32_t j = 0; j < jn; j++)
            store_lanes(d + (size_t)j * jstride + c * LMB_LANES, v[j], mask, full);
    }
}

LMB_AVX2 void lmb_sample_dense_avx2(float *blk, uint32_t J, const lmb_dense_plan *plan,
                                    const lmb_dense_plan *next) {
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES;
    uint32_t jlimit = plan->max_chunks * 8 < J ? plan->max_chunks * 8 : J;
    float buf[10 * 64] __attribute__((aligned(32)));
    float coef[LMB_LANES][8]; /* dense lanes: the near-key slerp coefficients */
    lane_coefs(plan, coef);
    unsigned pk_lanes = 0; /* the packed lanes */
    for (int l = 0; l < LMB_LANES; l++)
        if (plan->pk[l]) pk_lanes |= 1u << l;
    for (uint32_t q = 0; q * 8 < jlimit; q++) {
        const unsigned want = plan->need ? plan->need[q] : 0xFFu;
        if (!want) { /* (the next plan's chunk q is still asked for) */
            for (int l = 0; next && l < LMB_LANES; l++)
                prefetch_chunk(next, l, q);
            continue;
        }
        /* the packed lanes' keys first, then every lane's interpolation:
         * the lanes' key decodes (latency chains ending in a store to each
         * instance's cache) overlap instead of each waiting for the last */
        float al[LMB_LANES][3];
        if (want & pk_lanes)
            for (int l = 0; l < LMB_LANES; l++)
                if ((pk_lanes >> l & 1u) && q < plan->chunks[l] && (want >> l & 1u))
                    lane_keys(plan, l, q, al[l]);
        unsigned lanes = 0;
        for (int l = 0; l < LMB_LANES; l++) {
            if (q < plan->chunks[l] && (want >> l & 1u)) {
                lanes |= 1u << l;
                lane_interp(plan, l, q, coef[l], al[l], buf + l * 8, 64);
            }
            prefetch_chunk(next, l, q);
        }
        uint32_t jn = jlimit - q * 8 < 8 ? jlimit - q * 8 : 8;
        store_chunk(buf, blk + (size_t)q * 8 * jstride, jn, lanes);
    }
}

LMB_AVX2 void lmb_sample_mean2_avx2(float *blk, uint32_t J, const lmb_dense_plan *p0,
                                    const lmb_dense_plan *p1, const float w0[LMB_LANES],
                                    const float w1[LMB_LANES], const float *rest_q,
                                    const uint8_t *need, const lmb_dense_plan *next) {
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES, chunks = (J + 7) / 8;
    float buf[10 * 64] __attribute__((aligned(32)));
    float t0[10 * 8] __attribute__((aligned(32))), t1[10 * 8] __attribute__((aligned(32)));
    float c0[LMB_LANES][8], c1[LMB_LANES][8], inv[LMB_LANES];
    lane_coefs(p0, c0);
    lane_coefs(p1, c1);
    for (int l = 0; l < LMB_LANES; l++) {
        inv[l] = 1.0f / (w0[l] + w1[l]); /* as the fold: 1 / the weights' sum */
        prefetch_chunk(p1, l, 0);        /* (p0's: the plan sampled before asked) */
    }
    for (uint32_t q = 0; q < chunks; q++) {
        const unsigned lanes = (need ? need[q] : 0xFFu) & (p0->lanes | p1->lanes);
        if (!lanes) {
            for (int l = 0; l < LMB_LANES; l++)
                prefetch_chunk(p1, l, q + 1), prefetch_chunk(next, l, q);
            continue;
        }
        /* the rest rotations of the chunk's joints, one vector per component */
        const float *rb = rest_q + (size_t)q * 32;
        const __m256 rq[4] = {_mm256_loadu_ps(rb), _mm256_loadu_ps(rb + 8),
                              _mm256_loadu_ps(rb + 16), _mm256_loadu_ps(rb + 24)};
        for (int l = 0; l < LMB_LANES; l++) {
            prefetch_chunk(p1, l, q + 1);
            prefetch_chunk(next, l, q);
            if (!(lanes >> l & 1u)) continue;
            const int in0 = p0->lanes >> l & 1u, in1 = p1->lanes >> l & 1u;
            if (in0 && in1) {
                lane_chunk(p0, l, q, c0[l], t0, 8);
                lane_chunk(p1, l, q, c1[l], t1, 8);
                lmb_layer_mean2(t0, 8, t1, 8, _mm256_set1_ps(w0[l]), _mm256_set1_ps(w1[l]),
                                _mm256_set1_ps(inv[l]), rq, buf + l * 8, 64);
            } else if (in0) {
                lane_chunk(p0, l, q, c0[l], buf + l * 8, 64);
            } else {
                lane_chunk(p1, l, q, c1[l], buf + l * 8, 64);
            }
        }
        uint32_t jn = J - q * 8 < 8 ? J - q * 8 : 8;
        store_chunk(buf, blk + (size_t)q * 8 * jstride, jn, lanes);
    }
}

#else

void lmb_sample_lanes_avx2(const lmb_clip *c, float *blk, lmb_cursor *const cur[LMB_LANES],
                           unsigned lanes, const float t[LMB_LANES]) {
    (void)c, (void)blk, (void)cur, (void)lanes, (void)t;
}

void lmb_sample_dense_avx2(float *blk, uint32_t J, const lmb_dense_plan *plan,
                           const lmb_dense_plan *next) {
    (void)blk, (void)J, (void)plan, (void)next;
}

void lmb_sample_mean2_avx2(float *blk, uint32_t J, const lmb_dense_plan *p0,
                           const lmb_dense_plan *p1, const float w0[LMB_LANES],
                           const float w1[LMB_LANES], const float *rest_q, const uint8_t *need,
                           const lmb_dense_plan *next) {
    (void)blk, (void)J, (void)p0, (void)p1, (void)w0, (void)w1, (void)rest_q, (void)need,
        (void)next;
}

#endif
