/* clip.c: clip validation, key lookup, interpolation (glTF 2.0 rules) and
 * the batched sampler. */
#include "clip.h"
#include "qpoly.h"
#include "vec8.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ALIGN 64

static size_t clip_sizes(uint32_t tracks, uint32_t keys, uint32_t values, size_t *tb, size_t *kb,
                         size_t *vb) {
    *tb = lmb_align_up((size_t)tracks * sizeof(lmb_track), ALIGN);
    *kb = lmb_align_up((size_t)keys * sizeof(float), ALIGN);
    /* 16 floats of zero padding: SIMD loads of the last records stay inside */
    *vb = lmb_align_up(((size_t)values + 16) * sizeof(float), ALIGN);
    return lmb_align_up(sizeof(lmb_clip), ALIGN) + *tb + *kb + *vb + ALIGN;
}

size_t lmb_clip_bytes(uint32_t tracks, uint32_t keys, uint32_t values) {
    size_t a, b, c;
    return clip_sizes(tracks, keys, values, &a, &b, &c);
}

lmb_clip *lmb_clip_place(void *mem, uint32_t tracks, uint32_t keys, uint32_t values) {
    size_t tb, kb, vb;
    clip_sizes(tracks, keys, values, &tb, &kb, &vb);
    unsigned char *p = (unsigned char *)lmb_align_ptr(mem, ALIGN);
    lmb_clip *c = (lmb_clip *)(void *)p;
    memset(c, 0, sizeof *c);
    p += lmb_align_up(sizeof(lmb_clip), ALIGN);
    c->track_count = tracks;
    c->key_total = keys;
    c->value_total = values;
    c->tracks = (lmb_track *)(void *)p, p += tb;
    c->times = (float *)(void *)p, p += kb;
    c->values = (float *)(void *)p;
    return c;
}

/* Sort key: joint tracks by (joint, path), node tracks after, in input order. */
static uint64_t track_order(const lmb_track *t) {
    if (t->is_node) return ((uint64_t)1 << 40) + t->input;
    return (uint64_t)t->target * 4u + t->path;
}

/* Whether track a sorts before track b: by track_order, then by input
 * position (unique), so the order is total and the sort stable. */
static int track_less(const lmb_track *a, const lmb_track *b) {
    uint64_t oa = track_order(a), ob = track_order(b);
    return oa < ob || (oa == ob && a->input < b->input);
}

static void sift_down(lmb_track *t, uint32_t root, uint32_t n) {
    for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && track_less(t + child, t + child + 1)) child++;
        if (!track_less(t + root, t + child)) return;
        lmb_track tmp = t[root];
        t[root] = t[child], t[child] = tmp;
        root = child;
    }
}

/* Sorts the tracks in O(n log n) without extra memory (heapsort; keys are
 * unique, so the result is the stable order); an already sorted array
 * (the common case) is left as is after one linear check. */
static void sort_tracks(lmb_track *t, uint32_t n) {
    uint32_t k = 1;
    while (k < n && track_less(t + k - 1, t + k))
        k++;
    if (k >= n) return;
    for (uint32_t r = n / 2; r-- > 0;)
        sift_down(t, r, n);
    for (uint32_t end = n - 1; end > 0; end--) {
        lmb_track tmp = t[0];
        t[0] = t[end], t[end] = tmp;
        sift_down(t, 0, end);
    }
}

/* Distinct key-time ranges remembered for sharing by content (see below). */
#define SHARE_WINDOW 8

static const char *const path_label[] = {"translation", "rotation", "scale", "float"};

/* Fills e for track tr (input position, and "joint j path" / "node n path"
 * as context) and returns its code. */
static lmb_status track_error(lmb_error *e, const lmb_track *tr, lmb_status code, const char *field,
                              const char *detail, uint32_t index2, double value, double limit) {
    lmb_error_set(e, code, field, detail, tr->input, index2, value, limit);
    snprintf(e->context, sizeof e->context, "%s %lu %s", tr->is_node ? "node" : "joint",
             (unsigned long)tr->target + (tr->is_node ? 0ul : 1ul),
             path_label[tr->path <= LMB_PATH_F ? tr->path : 0]);
    return code;
}

lmb_status lmb_clip_finish(lmb_clip *c, lmb_error *err) {
    lmb_error_clear(err);
    float duration = 0.0f;
    /* ends of the key-time and record ranges introduced so far (input order):
     * a shared range must lie inside what was already validated */
    uint64_t end_t = 0, end_v = 0;
    for (uint32_t k = 0; k < c->track_count; k++) {
        lmb_track *tr = c->tracks + k;
        uint32_t n = tr->key_count, w = tr->width;
        uint32_t per_key = tr->interp == LMB_CUBIC ? 3 * w : w;
        uint32_t st = per_key + 1;
        int width_ok = tr->path == LMB_PATH_F ? (tr->is_node && w >= 1 && w <= LMB_FLOAT_WIDTH)
                                              : w == (tr->path == LMB_PATH_R ? 4u : 3u);
        uint64_t t_end = (uint64_t)tr->times + n, v_end = (uint64_t)tr->values + (uint64_t)n * st;
        if (n == 0 || !width_ok || t_end > c->key_total || v_end > c->value_total ||
            ((tr->shared & LMB_SHARE_TIMES) && t_end > end_t) ||
            ((tr->shared & LMB_SHARE_RECORDS) &&
             (v_end > end_v || !(tr->shared & LMB_SHARE_TIMES)))) {
            return track_error(err, tr, LMB_ERANGE, "tracks", "tracks[{i}]: inconsistent layout", 0,
                               0, 0);
        }
        tr->stride = st;
        const float *tm = c->times + tr->times;
        float *rec = c->values + tr->values;
        tr->first = tm[0];
        tr->last = tm[n - 1];
        if (!(tr->shared & LMB_SHARE_TIMES)) {
            for (uint32_t i = 0; i < n; i++) {
                if (!isfinite(tm[i]) || tm[i] < 0.0f)
                    return track_error(err, tr, isfinite(tm[i]) ? LMB_ERANGE : LMB_ENAN, "times",
                                       "tracks[{i}] ({c}): times[{j}] ({v}) is not a finite time "
                                       ">= 0",
                                       i, (double)tm[i], 0);
                if (i > 0 && !(tm[i] > tm[i - 1]))
                    return track_error(err, tr, LMB_EINVAL, "times",
                                       "tracks[{i}] ({c}): times[{j}] ({v}) is not greater than "
                                       "the key time before it ({l}): key times must be strictly "
                                       "increasing",
                                       i, (double)tm[i], (double)tm[i - 1]);
            }
            if (t_end > end_t) end_t = t_end;
        }
        if (tm[n - 1] > duration) duration = tm[n - 1];
        if (tr->shared & LMB_SHARE_RECORDS) continue; /* validated with their first track */
        if (v_end > end_v) end_v = v_end;
        for (uint32_t i = 0; i < n; i++) {
            rec[(size_t)i * st] = tm[i];
            for (uint32_t m = 0; m < per_key; m++) {
                if (!isfinite(rec[(size_t)i * st + 1 + m]))
                    return track_error(err, tr, LMB_ENAN, "values",
                                       "tracks[{i}] ({c}): values[{j}] ({v}) is not finite",
                                       i * per_key + m, (double)rec[(size_t)i * st + 1 + m], 0);
            }
        }
        if (tr->path == LMB_PATH_R) {
            uint32_t off = tr->interp == LMB_CUBIC ? 5 : 1;
            for (uint32_t i = 0; i < n; i++) {
                float *q = rec + (size_t)i * st + off;
                double q0 = (double)q[0], q1 = (double)q[1], q2 = (double)q[2], q3 = (double)q[3];
                double len = sqrt(q0 * q0 + q1 * q1 + q2 * q2 + q3 * q3);
                if (!(len > 1e-6))
                    return track_error(err, tr, LMB_EINVAL, "values",
                                       "tracks[{i}] ({c}): rotation key {j} is a zero quaternion "
                                       "(length {v}, at most 1e-6)",
                                       i, len, 1e-6);
                for (int m = 0; m < 4; m++)
                    q[m] = (float)((double)q[m] / len);
            }
        }
    }
    /* Tracks with identical key times (glTF samplers often share one input
     * accessor) share one dense times array, so binary searches for seeks
     * touch far less memory and the dense form can see one grid. Tracks
     * given the very same times object already share (the binding); others
     * are compared with the last SHARE_WINDOW distinct ranges only, so this
     * stays linear in the key total. */
    uint32_t recent[SHARE_WINDOW], nrecent = 0;
    for (uint32_t k = 0; k < c->track_count; k++) {
        lmb_track *tr = c->tracks + k;
        int found = 0;
        for (uint32_t r = 0; r < nrecent && !found; r++) {
            const lmb_track *o = c->tracks + recent[r];
            if (o->times == tr->times) {
                found = 1;
            } else if (o->key_count == tr->key_count && o->first == tr->first &&
                       o->last == tr->last &&
                       memcmp(c->times + o->times, c->times + tr->times,
                              (size_t)tr->key_count * sizeof(float)) == 0) {
                tr->times = o->times;
                found = 1;
            }
        }
        if (!found) {
            if (nrecent < SHARE_WINDOW) nrecent++;
            memmove(recent + 1, recent, (nrecent - 1) * sizeof recent[0]);
            recent[0] = k;
        }
    }
    sort_tracks(c->tracks, c->track_count);
    uint32_t joint_tracks = 0, span = 0;
    for (uint32_t k = 0; k < c->track_count; k++) {
        const lmb_track *t = c->tracks + k;
        if (t->is_node) break;
        if (k > 0 && t->target == t[-1].target && t->path == t[-1].path) {
            const lmb_track *later = t->input > t[-1].input ? t : t - 1;
            return track_error(err, later, LMB_EINVAL, "tracks",
                               "tracks[{j}] and tracks[{i}] both animate {c}",
                               later == t ? t[-1].input : t->input, 0, 0);
        }
        joint_tracks++;
        if (t->target + 1 > span) span = t->target + 1;
    }
    c->joint_track_count = joint_tracks;
    c->joint_span = span;
    c->duration = duration;
    return LMB_OK;
}

/* Whether a stored rotation key is a unit quaternion (as lmb_clip_finish
 * leaves them: within float rounding of length 1). */
static int unit_quat(const float *q) {
    double n = 0.0;
    for (int m = 0; m < 4; m++)
        n += (double)q[m] * (double)q[m];
    return n > 0.999 && n < 1.001;
}

lmb_status lmb_clip_check(const lmb_clip *c, lmb_error *err) {
    lmb_error_clear(err);
    float duration = 0.0f;
    uint32_t joint_tracks = 0, span = 0;
    for (uint32_t k = 0; k < c->track_count; k++) {
        const lmb_track *tr = c->tracks + k;
        uint32_t n = tr->key_count, w = tr->width;
        if (tr->path > LMB_PATH_F || tr->interp > LMB_CUBIC || tr->is_node > 1 || tr->shared > 3)
            return track_error(err, tr, LMB_EINVAL, "tracks",
                               "tracks[{i}]: path, interpolation or flags out of range", 0, 0, 0);
        uint32_t per_key = tr->interp == LMB_CUBIC ? 3 * w : w;
        int width_ok = tr->path == LMB_PATH_F ? (tr->is_node && w >= 1 && w <= LMB_FLOAT_WIDTH)
                                              : w == (tr->path == LMB_PATH_R ? 4u : 3u);
        uint64_t t_end = (uint64_t)tr->times + n,
                 v_end = (uint64_t)tr->values + (uint64_t)n * (per_key + 1);
        if (n == 0 || !width_ok || tr->stride != per_key + 1 || t_end > c->key_total ||
            v_end > c->value_total)
            return track_error(err, tr, LMB_ERANGE, "tracks", "tracks[{i}]: inconsistent layout", 0,
                               0, 0);
        if (k > 0 && !(track_order(tr - 1) < track_order(tr)))
            return track_error(err, tr, LMB_EINVAL, "tracks",
                               "tracks[{i}]: tracks out of order or animating one property twice",
                               0, 0, 0);
        if (!tr->is_node) {
            if (k != joint_tracks || tr->target >= LMB_MAX_JOINTS)
                return track_error(err, tr, LMB_EINVAL, "tracks",
                                   "tracks[{i}]: joint track after node tracks", 0, 0, 0);
            joint_tracks++;
            if (tr->target + 1 > span) span = tr->target + 1;
        }
        const float *tm = c->times + tr->times;
        const float *rec = c->values + tr->values;
        if (tr->first != tm[0] || tr->last != tm[n - 1])
            return track_error(err, tr, LMB_EINVAL, "times",
                               "tracks[{i}]: first or last time wrong", 0, 0, 0);
        for (uint32_t i = 0; i < n; i++) {
            if (!isfinite(tm[i]) || tm[i] < 0.0f || (i > 0 && !(tm[i] > tm[i - 1])))
                return track_error(err, tr, LMB_EINVAL, "times",
                                   "tracks[{i}] ({c}): times[{j}] ({v}) is not a finite time "
                                   "above the one before",
                                   i, (double)tm[i], 0);
            const float *r = rec + (size_t)i * tr->stride;
            if (r[0] != tm[i])
                return track_error(err, tr, LMB_EINVAL, "values",
                                   "tracks[{i}] ({c}): key record {j} has another time", i,
                                   (double)r[0], 0);
            for (uint32_t m = 0; m < per_key; m++)
                if (!isfinite(r[1 + m]))
                    return track_error(err, tr, LMB_ENAN, "values",
                                       "tracks[{i}] ({c}): values[{j}] ({v}) is not finite",
                                       i * per_key + m, (double)r[1 + m], 0);
            if (tr->path == LMB_PATH_R && !unit_quat(r + (tr->interp == LMB_CUBIC ? 5 : 1)))
                return track_error(err, tr, LMB_EINVAL, "values",
                                   "tracks[{i}] ({c}): rotation key {j} is not unit length", i, 0,
                                   0);
        }
        if (tm[n - 1] > duration) duration = tm[n - 1];
    }
    if (!c->packed.streams && (joint_tracks != c->joint_track_count || span != c->joint_span))
        return lmb_error_set(err, LMB_EINVAL, "tracks", "joint track count or span is wrong", 0, 0,
                             0, 0);
    if (c->packed.streams && joint_tracks != 0)
        return lmb_error_set(err, LMB_EINVAL, "tracks", "a packed clip keeps node tracks only", 0,
                             0, 0, 0);
    if (!isfinite(c->duration) || c->duration < duration || c->duration > LMB_FLOAT_LIMIT)
        return lmb_error_set(err, LMB_ERANGE, "duration",
                             "duration {v} is not finite or shorter than the keys ({l})", 0, 0,
                             (double)c->duration, (double)duration);
    return LMB_OK;
}

/* ---- dense form of uniformly keyed clips ------------------------------ */

/* Largest key count of a dense clip: the key guess (t - t0) / dt is then
 * computed in float with an error far below one key. */
#define DENSE_MAX_FRAMES (1u << 22)

/* Whether the joint tracks of a finished clip share one uniform key grid
 * (see lmb_dense); *dt gets the interval. Each key time must lie within
 * 1e-3 dt (plus a few float ulps of the time) of t0 + k dt, so the guess
 * floor((t - t0) / dt) is off by at most one key, which the lookup fixes
 * against the real times. */
/* The first joint track with more than one key (it defines the grid), or NULL. */
static const lmb_track *grid_track(const lmb_clip *c) {
    for (uint32_t m = 0; m < c->joint_track_count; m++)
        if (c->tracks[m].key_count > 1) return c->tracks + m;
    return NULL;
}

static int dense_qualifies(const lmb_clip *c, double *dt) {
    uint32_t nt = c->joint_track_count;
    const lmb_track *t0 = grid_track(c);
    if (!t0 || c->packed.streams) return 0;
    uint32_t n = t0->key_count;
    if (n > DENSE_MAX_FRAMES) return 0;
    if (t0->interp != LMB_LINEAR && t0->interp != LMB_STEP) return 0;
    for (uint32_t m = 0; m < nt; m++) {
        const lmb_track *tr = c->tracks + m;
        /* single-key tracks are constant: any interpolation, copied to every frame */
        if (tr->key_count == 1) continue;
        /* tracks with identical key times share one times array (finish) */
        if (tr->times != t0->times || tr->key_count != n || tr->interp != t0->interp) return 0;
    }
    const float *tm = c->times + t0->times;
    double first = (double)tm[0], d = ((double)tm[n - 1] - first) / (double)(n - 1);
    if (!(d > 0.0)) return 0;
    for (uint32_t k = 0; k < n; k++) {
        double grid = first + d * (double)k, dev = fabs((double)tm[k] - grid);
        if (dev > 1e-3 * d + 4.0 * (double)FLT_EPSILON * fabs(grid)) return 0;
    }
    *dt = d;
    return 1;
}

int lmb_packed_skipped(const lmb_packed *p, uint32_t q, uint32_t path) {
    const lmb_pstream *s = p->streams + (size_t)q * 3 + path;
    if (s->keys > 1) return 0;
    for (uint32_t r = 0; r < (path == LMB_PATH_R ? 4u : 3u); r++)
        if (s->kind[r] != LMB_PK_SKIP) return 0;
    return 1;
}

uint32_t lmb_clip_untracked(const lmb_clip *c, uint32_t J, uint32_t *out) {
    uint32_t n = 0, t = 0;
    for (uint32_t j = 0; j < J; j++) {
        for (uint32_t path = 0; path < 3; path++) {
            int tracked;
            if (c->packed.streams) {
                tracked = j < c->joint_span && !lmb_packed_skipped(&c->packed, j / 8, path);
            } else {
                tracked = t < c->joint_track_count && c->tracks[t].target == j &&
                          c->tracks[t].path == path;
                t += (uint32_t)tracked;
            }
            if (!tracked) {
                if (out) out[n] = j << 2 | path;
                n++;
            }
        }
    }
    return n;
}

uint32_t lmb_clip_cursor_count(const lmb_clip *c) {
    if (!c->packed.streams) return c->joint_track_count;
    size_t bytes = (size_t)c->packed.chunks * LMB_PK_CACHE_FLOATS * sizeof(float);
    return (uint32_t)((bytes + sizeof(lmb_cursor) - 1) / sizeof(lmb_cursor));
}

int lmb_clip_grid(const lmb_clip *c, double *t0, double *dt, uint32_t *frames, uint32_t *interp) {
    if (!dense_qualifies(c, dt)) return 0;
    const lmb_track *g = grid_track(c);
    *t0 = (double)c->times[g->times];
    *frames = g->key_count;
    *interp = g->interp;
    return 1;
}

/* The dense form keeps 80 floats per chunk of 8 joints below the span, per
 * frame, tracked or not: a clip animating a few joints of a wide span (one
 * track on joint 4000: 500 chunks) would take far more than its keys. It is
 * built only when it holds at most DENSE_SPARSE times the joint tracks'
 * floats per frame (a full rig: about 1x; 3 joints of 50: 19x). */
#define DENSE_SPARSE 32u

static int dense_worth(const lmb_clip *c, double *dt) {
    if (!dense_qualifies(c, dt)) return 0;
    uint64_t tracked = 0;
    for (uint32_t m = 0; m < c->joint_track_count; m++)
        tracked += c->tracks[m].width;
    uint64_t chunks = (c->joint_span + 7u) / 8u;
    return chunks * 80u <= DENSE_SPARSE * tracked + 80u;
}

size_t lmb_clip_dense_bytes(const lmb_clip *c) {
    double dt;
    if (!dense_worth(c, &dt)) return 0;
    size_t chunks = (c->joint_span + 7u) / 8u;
    return (size_t)grid_track(c)->key_count * chunks * 80u * sizeof(float) + ALIGN;
}

void lmb_clip_dense_build(lmb_clip *c, void *mem) {
    double dt;
    if (!dense_worth(c, &dt)) return;
    lmb_dense *d = &c->dense;
    const lmb_track *t0 = grid_track(c);
    d->data = (float *)lmb_align_ptr(mem, ALIGN);
    d->times = c->times + t0->times;
    d->frames = t0->key_count;
    d->chunks = (c->joint_span + 7u) / 8u;
    d->frame_floats = d->chunks * 80u;
    d->interp = t0->interp;
    d->t0 = d->times[0];
    d->inv_dt = (float)(1.0 / dt);
    static const float fill[10] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    static const uint32_t first_comp[3] = {0, 3, 7};
    for (uint32_t k = 0; k < d->frames; k++) {
        float *f = d->data + (size_t)k * d->frame_floats;
        for (uint32_t q = 0; q < d->chunks; q++)
            for (uint32_t comp = 0; comp < 10; comp++)
                for (uint32_t l = 0; l < 8; l++)
                    f[q * 80 + comp * 8 + l] = fill[comp];
        for (uint32_t m = 0; m < c->joint_track_count; m++) {
            const lmb_track *tr = c->tracks + m;
            /* a single key (of any interpolation) holds its value everywhere */
            const float *v = c->values + tr->values +
                             (tr->key_count == 1 ? (tr->interp == LMB_CUBIC ? 1u + tr->width : 1u)
                                                 : (size_t)k * tr->stride + 1);
            uint32_t j = tr->target;
            float *dst = f + (j / 8) * 80 + first_comp[tr->path] * 8 + j % 8;
            for (uint32_t q = 0; q < tr->width; q++)
                dst[q * 8] = v[q];
        }
    }
}

/* The two frames and the factor for clip time t (wrapped or clamped):
 * before the first key or after the last, both frames are the end key and
 * alpha 0; STEP: alpha 0. alpha is computed from the real key times exactly
 * as the cursor path does. */
static inline void dense_frames(const lmb_dense *d, float t, uint32_t *fa, uint32_t *fb,
                                float *alpha) {
    const float *tm = d->times;
    uint32_t n = d->frames;
    if (!(t > tm[0])) {
        *fa = *fb = 0, *alpha = 0.0f;
        return;
    }
    if (t >= tm[n - 1]) {
        *fa = *fb = n - 1, *alpha = 0.0f;
        return;
    }
    float g = (t - d->t0) * d->inv_dt;
    uint32_t k = g < 0.0f ? 0u : (uint32_t)g;
    if (k > n - 2) k = n - 2;
    /* at most one step for a qualifying grid; stops at 0 since t > tm[0]
     * and at n - 2 since t < tm[n - 1] */
    while (t < tm[k])
        k--;
    while (t >= tm[k + 1])
        k++;
    *fa = k;
    if (d->interp == LMB_STEP) {
        *fb = k, *alpha = 0.0f;
        return;
    }
    *fb = k + 1;
    *alpha = (t - tm[k]) / (tm[k + 1] - tm[k]);
}

double lmb_clip_time_d(const lmb_clip *c, double t, int loop) {
    double d = (double)c->duration;
    if (loop) {
        if (t >= 0.0 && t < d) return t; /* already wrapped (what the below gives too) */
        if (!(d > 0.0) || !isfinite(t)) return 0.0;
        double r = t - d * floor(t / d);
        if (!(r >= 0.0 && r < d)) { /* t / d rounded across an integer, or t is huge */
            r = fmod(t, d);
            if (r < 0.0) r += d;
            if (!(r < d)) r = 0.0;
        }
        return r;
    }
    return t < 0.0 ? 0.0 : t > d ? d : t;
}

float lmb_clip_time(const lmb_clip *c, double t, int loop) {
    return (float)lmb_clip_time_d(c, t, loop);
}

/* Largest k in [lo, hi] with times[k] <= t, given times[lo] <= t.
 * Branch-free (conditional moves): seeks of many tracks and instances do
 * not stall on mispredictions and their memory accesses overlap. */
static inline uint32_t bsearch_keys(const float *times, uint32_t lo, uint32_t hi, float t) {
    const float *b = times + lo;
    uint32_t len = hi - lo + 1;
    while (len > 1) {
        uint32_t half = len / 2;
        b = b[half] <= t ? b + half : b;
        len -= half;
    }
    return (uint32_t)(b - times);
}

uint32_t lmb_key_find_slow(const float *times, uint32_t n, float t, uint32_t *cursor) {
    uint32_t last = n - 2, k = *cursor;
    if (k > last) k = last;
    if (times[k] <= t) {
        /* forward: a few steps cover normal playback, then binary search */
        for (int step = 0; step < 4; step++) {
            if (t < times[k + 1]) {
                *cursor = k;
                return k;
            }
            if (++k == last) {
                *cursor = k;
                return k;
            }
        }
        k = bsearch_keys(times, k, last, t);
    } else {
        k = bsearch_keys(times, 0, k - 1, t);
    }
    *cursor = k;
    return k;
}

static inline void copy_value(float *out, const float *v, uint32_t w) {
    if (w != 3 && w != 4) { /* float tracks: any width, never read past it */
        for (uint32_t m = 0; m < w; m++)
            out[m] = v[m];
        return;
    }
    out[0] = v[0], out[1] = v[1], out[2] = v[2];
    if (w == 4) out[3] = v[3];
}

static inline void normalize4(float *q) {
    float len2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
    if (len2 > 0.0f) {
        float inv = 1.0f / sqrtf(len2);
        q[0] *= inv, q[1] *= inv, q[2] *= inv, q[3] *= inv;
    } else {
        q[0] = q[1] = q[2] = 0.0f, q[3] = 1.0f;
    }
}

/* Shortest-path slerp (lerp + normalise for nearly equal keys). */
static inline void quat_interp(float *out, const float *a, const float *b, float s) {
    float dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
    float sign = 1.0f;
    if (dot < 0.0f) dot = -dot, sign = -1.0f;
    float wa, wb;
    if (dot > LMB_NLERP_DOT) {
        wa = 1.0f - s, wb = s * sign;
        for (int m = 0; m < 4; m++)
            out[m] = wa * a[m] + wb * b[m];
        normalize4(out);
        return;
    }
    float theta = acosf(dot), inv_sin = 1.0f / sinf(theta);
    wa = sinf((1.0f - s) * theta) * inv_sin;
    wb = sinf(s * theta) * inv_sin * sign;
    for (int m = 0; m < 4; m++)
        out[m] = wa * a[m] + wb * b[m];
}

static inline __attribute__((always_inline)) void
sample_inline(const lmb_clip *c, const lmb_track *tr, float t, lmb_cursor *cursor, float *out) {
    if (c->packed.streams && !tr->is_node) {
        lmb_packed_sample(&c->packed, tr->target, tr->path, t, out);
        return;
    }
    const float *rec = c->values + tr->values;
    uint32_t n = tr->key_count, w = tr->width, st = tr->stride;
    int cubic = tr->interp == LMB_CUBIC;
    uint32_t voff = cubic ? 1 + w : 1;
    if (t <= tr->first) {
        copy_value(out, rec + voff, w);
        return;
    }
    if (t >= tr->last) {
        copy_value(out, rec + (size_t)(n - 1) * st + voff, w);
        return;
    }
    const float *a = rec + (size_t)lmb_find_key(c, tr, t, cursor) * st;
    const float *b = a + st;
    float dt = b[0] - a[0], s = (t - a[0]) / dt;
    if (cubic) {
        float s2 = s * s, s3 = s2 * s;
        float h00 = 2.0f * s3 - 3.0f * s2 + 1.0f, h10 = (s3 - 2.0f * s2 + s) * dt;
        float h01 = -2.0f * s3 + 3.0f * s2, h11 = (s3 - s2) * dt;
        for (uint32_t m = 0; m < w; m++)
            out[m] =
                h00 * a[1 + w + m] + h10 * a[1 + 2 * w + m] + h01 * b[1 + w + m] + h11 * b[1 + m];
        if (tr->path == LMB_PATH_R) normalize4(out);
        return;
    }
    if (tr->interp == LMB_STEP) {
        copy_value(out, a + 1, w);
        return;
    }
    if (tr->path == LMB_PATH_R) {
        quat_interp(out, a + 1, b + 1, s);
        return;
    }
    if (w != 3) { /* float tracks: any width */
        for (uint32_t m = 0; m < w; m++)
            out[m] = a[1 + m] + (b[1 + m] - a[1 + m]) * s;
        return;
    }
    out[0] = a[1] + (b[1] - a[1]) * s;
    out[1] = a[2] + (b[2] - a[2]) * s;
    out[2] = a[3] + (b[3] - a[3]) * s;
}

void lmb_track_sample(const lmb_clip *c, const lmb_track *tr, float t, lmb_cursor *cursor,
                      float *out) {
    sample_inline(c, tr, t, cursor, out);
}

void lmb_clip_sample_pose(const lmb_clip *c, float t, const lmb_skeleton *s, float *trs) {
    static const uint32_t at[3] = {0, 3, 7};
    if (!c->packed.streams) {
        lmb_clip_sample_pose_cursors(c, t, s, trs, NULL, NULL);
        return;
    }
    memcpy(trs, s->rest, (size_t)s->joint_count * LMB_TRS_FLOATS * sizeof(float));
    /* what samplers write: whole chunks (lmb_clip_untracked) */
    const lmb_packed *p = &c->packed;
    float pos = lmb_packed_pos(p, t), buf[80];
    for (uint32_t q = 0; q < p->chunks; q++) {
        lmb_packed_chunk(p, q, pos, buf, 8);
        for (uint32_t path = 0; path < 3; path++) {
            if (lmb_packed_skipped(p, q, path)) continue;
            for (uint32_t l = 0; l < 8; l++) {
                uint32_t j = q * 8 + l;
                if (j >= c->joint_span || j >= s->joint_count) break;
                for (uint32_t m = 0; m < (path == LMB_PATH_R ? 4u : 3u); m++)
                    trs[(size_t)j * LMB_TRS_FLOATS + at[path] + m] = buf[(at[path] + m) * 8 + l];
            }
        }
    }
}

void lmb_clip_sample_pose_cursors(const lmb_clip *c, float t, const lmb_skeleton *s, float *trs,
                                  lmb_cursor *cur, const uint8_t *only) {
    static const uint32_t at[3] = {0, 3, 7};
    memcpy(trs, s->rest, (size_t)s->joint_count * LMB_TRS_FLOATS * sizeof(float));
    for (uint32_t m = 0; m < c->joint_track_count; m++) {
        const lmb_track *tr = c->tracks + m;
        if (tr->target >= s->joint_count || (only && !only[tr->target])) continue;
        lmb_cursor fresh = {0, 0.0f, 0.0f};
        float v[4];
        sample_inline(c, tr, t, cur ? cur + m : &fresh, v);
        memcpy(trs + (size_t)tr->target * LMB_TRS_FLOATS + at[tr->path], v,
               tr->width * sizeof(float));
    }
}

void lmb_sampler_advance(lmb_sampler *s, double dt) {
    uint32_t n = s->pose->instance_count;
    for (uint32_t i = 0; i < n; i++) {
        if (s->clip[i] < 0) continue;
        const lmb_clip *c = s->clips[s->clip[i]];
        double t = s->time[i] + (double)s->rate[i] * dt;
        s->time[i] = lmb_clip_time_d(c, t, s->loop[i]);
    }
}

float lmb_quat_yaw(const float q[4]) {
    return atan2f(2.0f * (q[3] * q[1] + q[0] * q[2]), 1.0f - 2.0f * (q[1] * q[1] + q[0] * q[0]));
}

/* Removes the root motion gained since time 0 from the root joint of one
 * instance (see LMB_ROOT_*). */
static void remove_root_motion(const lmb_sampler *s, const lmb_clip *c, float *d) {
    uint32_t j = (uint32_t)s->root_joint;
    /* the root's tracks: entries of tracks[], or a packed clip's bits */
    uint32_t n = c->packed.streams ? 2 : c->joint_track_count;
    for (uint32_t m = 0; m < n; m++) {
        uint32_t path;
        float v0[4];
        if (c->packed.streams) {
            path = m == 0 ? LMB_PATH_T : LMB_PATH_R;
            if (!lmb_packed_tracks(&c->packed, j, path)) continue;
            lmb_packed_sample(&c->packed, j, path, 0.0f, v0);
        } else {
            const lmb_track *tr = c->tracks + m;
            if (tr->target > j) break;
            if (tr->target != j) continue;
            lmb_cursor cursor = {0, 0.0f, 0.0f};
            path = tr->path;
            sample_inline(c, tr, 0.0f, &cursor, v0);
        }
        if (path == LMB_PATH_T && (s->root_flags & LMB_ROOT_XZ)) {
            d[0] = v0[0];
            d[2 * LMB_LANES] = v0[2];
        } else if (path == LMB_PATH_R && (s->root_flags & LMB_ROOT_YAW)) {
            float *r = d + 3 * LMB_LANES;
            float q[4] = {r[0], r[LMB_LANES], r[2 * LMB_LANES], r[3 * LMB_LANES]};
            /* q' = Y(-(yaw(q) - yaw(q0))) * q */
            float half = -0.5f * (lmb_quat_yaw(q) - lmb_quat_yaw(v0));
            float sy = sinf(half), cy = cosf(half);
            float o[4] = {cy * q[0] + sy * q[2], cy * q[1] + sy * q[3], cy * q[2] - sy * q[0],
                          cy * q[3] - sy * q[1]};
            normalize4(o);
            for (int k = 0; k < 4; k++)
                r[k * LMB_LANES] = o[k];
        }
    }
}

/* Tracks ahead whose next key records are prefetched while sampling. */
#define LMB_PREFETCH 6

static const uint32_t path_offset[3] = {0, 3 * LMB_LANES, 7 * LMB_LANES};

/* Rest values for untracked properties and root motion removal: what every
 * sampled lane needs besides its tracks, for the lanes in `lanes` at once,
 * all playing clip k of the sampler (the rest values of a property go to
 * every such lane that reads its chunk as one 8-wide row per component).
 * `local` is the block's joint 0; `need` (or NULL: all), the chunks of 8
 * joints each lane reads (a masked layer's clip keyed on its joints alone
 * leaves the others untracked: they are not written where nobody reads
 * them). */
static void finish_lanes(const lmb_sampler *s, int32_t k, const lmb_clip *c, float *local,
                         const uint8_t *need, unsigned lanes) {
    const float *rest = s->pose->skel->rest;
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES;
    for (uint32_t u = s->untracked_first[k]; u < s->untracked_first[k + 1]; u++) {
        uint32_t code = s->untracked[u], j = code >> 2, path = code & 3u;
        unsigned m = need ? lanes & need[j >> 3] : lanes;
        if (!m) continue;
        float *d = local + (size_t)j * jstride + path_offset[path];
        const float *r = rest + (size_t)j * LMB_TRS_FLOATS + (path == 0 ? 0 : path == 1 ? 3 : 7);
        uint32_t w = path == LMB_PATH_R ? 4 : 3;
        if (m == 0xFFu) { /* one 8-float row per component */
            for (uint32_t c2 = 0; c2 < w; c2++) {
                lmb_v8f v = {r[c2], r[c2], r[c2], r[c2], r[c2], r[c2], r[c2], r[c2]};
                memcpy(d + c2 * LMB_LANES, &v, sizeof v);
            }
        } else {
            for (uint32_t c2 = 0; c2 < w; c2++)
                for (uint32_t l = 0; l < LMB_LANES; l++)
                    if (m >> l & 1u) d[c2 * LMB_LANES + l] = r[c2];
        }
    }
    if (s->root_joint >= 0)
        for (uint32_t l = 0; l < LMB_LANES; l++)
            if (lanes >> l & 1u)
                remove_root_motion(s, c, local + l + (size_t)s->root_joint * jstride);
}

/* GCC only if-converts (and so vectorises) the selects of the rotation loop
 * below without -ftrapping-math; the code raises no trap either way. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

/* One chunk (8 joints) of a dense clip: out[c * 8 + j] for the 10
 * components (glTF rule for rotations, as in lmb_sample_dense_avx2). */
static void dense_chunk(const float *restrict a, const float *restrict b, float alpha,
                        float *restrict out) {
    for (int c = 0; c < 3; c++) {
        for (int j = 0; j < 8; j++) {
            out[c * 8 + j] = a[c * 8 + j] + (b[c * 8 + j] - a[c * 8 + j]) * alpha;
            out[(7 + c) * 8 + j] =
                a[(7 + c) * 8 + j] + (b[(7 + c) * 8 + j] - a[(7 + c) * 8 + j]) * alpha;
        }
    }
    const float *qa = a + 24, *qb = b + 24;
    float *q = out + 24;
    float dot[8], wa[8], wb[8];
    int far = 0;
    for (int j = 0; j < 8; j++) {
        dot[j] = qa[j] * qb[j] + qa[8 + j] * qb[8 + j] + qa[16 + j] * qb[16 + j] +
                 qa[24 + j] * qb[24 + j];
        far |= fabsf(dot[j]) <= LMB_NLERP_DOT;
    }
    if (far) {
        /* branch-free, so the loops vectorise: slerp weights up to a common
         * factor per joint (normalised below), or lerp weights; qpoly.h's
         * near-key polynomial, and acos and sin for keys further apart */
        float ka[4], kb[4];
        lmb_slerp_near_coef(1.0f - alpha, ka);
        lmb_slerp_near_coef(alpha, kb);
        int wide = 0;
        for (int j = 0; j < 8; j++) {
            float x = fabsf(dot[j]), u = 1.0f - x;
            float sa = ka[0] + u * (ka[1] + u * (ka[2] + u * ka[3]));
            float sb = kb[0] + u * (kb[1] + u * (kb[2] + u * kb[3]));
            float f = (float)(x <= LMB_NLERP_DOT);
            wa[j] = f * sa + (1.0f - f) * (1.0f - alpha);
            wb[j] = f * sb + (1.0f - f) * alpha;
            wide |= u > LMB_SLERP_NEAR_U;
        }
        if (wide) {
            for (int j = 0; j < 8; j++) {
                float x = fabsf(dot[j]), theta = lmb_acos01(x);
                float sa = lmb_sin_half_pi((1.0f - alpha) * theta);
                float sb = lmb_sin_half_pi(alpha * theta);
                float g = (float)(1.0f - x > LMB_SLERP_NEAR_U);
                wa[j] = g * sa + (1.0f - g) * wa[j];
                wb[j] = g * sb + (1.0f - g) * wb[j];
            }
        }
    } else {
        for (int j = 0; j < 8; j++)
            wa[j] = 1.0f - alpha, wb[j] = alpha;
    }
    for (int j = 0; j < 8; j++) {
        float w0 = wa[j], w1 = wb[j] * (1.0f - 2.0f * (float)(dot[j] < 0.0f));
        float v0 = w0 * qa[j] + w1 * qb[j], v1 = w0 * qa[8 + j] + w1 * qb[8 + j];
        float v2 = w0 * qa[16 + j] + w1 * qb[16 + j], v3 = w0 * qa[24 + j] + w1 * qb[24 + j];
        float inv = 1.0f / sqrtf(v0 * v0 + v1 * v1 + v2 * v2 + v3 * v3);
        q[j] = v0 * inv, q[8 + j] = v1 * inv, q[16 + j] = v2 * inv, q[24 + j] = v3 * inv;
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* Portable dense sampling of instance i playing clip c at clip time t:
 * every component of joints < joint_span (finish_instance then writes the
 * rest pose over the untracked ones). */
static void sample_dense_lane(const lmb_clip *c, float t, float *local, const uint8_t *need,
                              uint32_t lane) {
    const lmb_dense *d = &c->dense;
    uint32_t fa, fb;
    float alpha;
    dense_frames(d, t, &fa, &fb, &alpha);
    const float *A = d->data + (size_t)fa * d->frame_floats;
    const float *B = d->data + (size_t)fb * d->frame_floats;
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES, span = c->joint_span;
    float buf[80];
    for (uint32_t q = 0; q * 8 < span; q++) {
        if (need && !(need[q] >> lane & 1u)) continue;
        const float *src = A + (size_t)q * 80;
        if (alpha != 0.0f) {
            dense_chunk(src, B + (size_t)q * 80, alpha, buf);
            src = buf;
        }
        uint32_t jn = span - q * 8 < 8 ? span - q * 8 : 8;
        for (uint32_t j = 0; j < jn; j++) {
            float *out = local + (size_t)(q * 8 + j) * jstride;
            for (uint32_t m = 0; m < 10; m++)
                out[m * LMB_LANES] = src[m * 8 + j];
        }
    }
}

/* Portable sampling of a packed clip: every component of joints < joint_span
 * (cache: the instance's decoded keys). */
static void sample_packed_lane(const lmb_clip *c, float t, float *cache, float *local,
                               const uint8_t *need, uint32_t lane) {
    const lmb_packed *p = &c->packed;
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES, span = c->joint_span;
    float pos = lmb_packed_pos(p, t), buf[80];
    for (uint32_t q = 0; q * 8 < span; q++) {
        if (need && !(need[q] >> lane & 1u)) continue;
        lmb_packed_chunk_cached(p, q, pos, cache + (size_t)q * LMB_PK_CACHE_FLOATS, buf, 8);
        uint32_t jn = span - q * 8 < 8 ? span - q * 8 : 8;
        for (uint32_t j = 0; j < jn; j++) {
            float *out = local + (size_t)(q * 8 + j) * jstride;
            for (uint32_t m = 0; m < 10; m++)
                out[m * LMB_LANES] = buf[m * 8 + j];
        }
    }
}

/* Instance i of the sampler's state into `local` (the lane's joint 0 in a
 * block of LMB_LANES lanes), by the portable code. */
static void sample_lane(lmb_sampler *s, uint32_t i, float *local, const uint8_t *need,
                        uint32_t lane) {
    int32_t k = s->clip[i];
    if (k < 0) return;
    const lmb_clip *c = s->clips[k];
    float t = lmb_clip_time(c, s->time[i], s->loop[i]);
    if (c->dense.data) {
        sample_dense_lane(c, t, local, need, lane);
        finish_lanes(s, k, c, local - lane, need, 1u << lane);
        return;
    }
    if (c->packed.streams) {
        sample_packed_lane(c, t, (float *)(void *)(s->cursors + (size_t)i * s->cursor_stride),
                           local, need, lane);
        finish_lanes(s, k, c, local - lane, need, 1u << lane);
        return;
    }
    const uint32_t jstride = LMB_TRS_FLOATS * LMB_LANES;
    lmb_cursor *cur = s->cursors + (size_t)i * s->cursor_stride;
    const lmb_track *tr = c->tracks;
    uint32_t count_tracks = c->joint_track_count;
    for (uint32_t m = 0; m < count_tracks; m++, tr++) {
        float v[4] = {0, 0, 0, 0};
        if (m + LMB_PREFETCH < count_tracks) {
            const lmb_track *pt = tr + LMB_PREFETCH;
            const float *pr =
                c->values + pt->values + (size_t)cur[m + LMB_PREFETCH].key * pt->stride;
            __builtin_prefetch(pr);
            __builtin_prefetch(pr + 2 * pt->stride - 1);
        }
        sample_inline(c, tr, t, cur + m, v);
        float *d = local + (size_t)tr->target * jstride + path_offset[tr->path];
        d[0] = v[0];
        d[LMB_LANES] = v[1];
        d[2 * LMB_LANES] = v[2];
        if (tr->width == 4) d[3 * LMB_LANES] = v[3];
    }
    finish_lanes(s, k, c, local - lane, need, 1u << lane);
}

void lmb_sampler_dense_plan(const lmb_sampler *s, const uint32_t inst[LMB_LANES], unsigned valid,
                            lmb_dense_plan *pl) {
    pl->lanes = 0, pl->max_chunks = 0, pl->need = NULL;
    for (uint32_t l = 0; l < LMB_LANES; l++) {
        uint32_t i = inst[l];
        int32_t k = (valid >> l & 1u) ? s->clip[i] : -1;
        const lmb_clip *c = k >= 0 ? s->clips[k] : NULL;
        pl->pk[l] = NULL, pl->pos[l] = 0.0f;
        if (c && c->packed.streams) {
            const lmb_packed *p = &c->packed;
            pl->a[l] = pl->b[l] = NULL, pl->alpha[l] = 0.0f;
            pl->pk[l] = p;
            pl->cache[l] = (float *)(void *)(s->cursors + (size_t)i * s->cursor_stride);
            pl->pos[l] = lmb_packed_pos(p, lmb_clip_time(c, s->time[i], s->loop[i]));
            pl->chunks[l] = (c->joint_span + 7u) / 8u;
            if (pl->chunks[l] > pl->max_chunks) pl->max_chunks = pl->chunks[l];
            pl->lanes |= 1u << l;
            continue;
        }
        if (!c || !c->dense.data) {
            pl->a[l] = pl->b[l] = NULL, pl->alpha[l] = 0.0f, pl->chunks[l] = 0;
            continue;
        }
        const lmb_dense *d = &c->dense;
        uint32_t fa, fb;
        dense_frames(d, lmb_clip_time(c, s->time[i], s->loop[i]), &fa, &fb, &pl->alpha[l]);
        pl->a[l] = d->data + (size_t)fa * d->frame_floats;
        pl->b[l] = d->data + (size_t)fb * d->frame_floats;
        pl->chunks[l] = d->chunks;
        if (d->chunks > pl->max_chunks) pl->max_chunks = d->chunks;
        pl->lanes |= 1u << l;
    }
}

unsigned lmb_sampler_lanes(lmb_sampler *s, const uint32_t inst[LMB_LANES], unsigned valid,
                           float *blk, unsigned group_min, const lmb_dense_plan *plan,
                           const lmb_dense_plan *next, const uint8_t *need) {
    const uint32_t J = s->pose->joint_count;
    unsigned sampled = 0;
    for (uint32_t l = 0; l < LMB_LANES; l++)
        if ((valid >> l & 1u) && s->clip[inst[l]] >= 0) sampled |= 1u << l;
    if (!lmb_simd_active()) {
        for (uint32_t l = 0; l < LMB_LANES; l++)
            if (sampled >> l & 1u) sample_lane(s, inst[l], blk + l, need, l);
        return sampled;
    }
    lmb_dense_plan own;
    if (!plan) {
        lmb_sampler_dense_plan(s, inst, valid, &own);
        own.need = need;
        plan = &own;
    }
    unsigned done = plan->lanes;
    if (done) {
        lmb_sample_dense_avx2(blk, J, plan, next);
        /* the rest values, for the lanes of one clip at a time */
        for (unsigned left = done; left;) {
            int32_t k = s->clip[inst[__builtin_ctz(left)]];
            unsigned same = 0;
            for (uint32_t l = 0; l < LMB_LANES; l++)
                if ((left >> l & 1u) && s->clip[inst[l]] == k) same |= 1u << l;
            finish_lanes(s, k, s->clips[k], blk, plan->need, same);
            left &= ~same;
        }
    }
    done |= ~sampled & 0xFFu;
    /* the other lanes: lanes sharing the first remaining lane's clip go together */
    for (uint32_t l0 = 0; l0 < LMB_LANES; l0++) {
        if (done >> l0 & 1u) continue;
        int32_t k = s->clip[inst[l0]];
        unsigned lanes = 0, n = 0;
        float t[LMB_LANES] = {0, 0, 0, 0, 0, 0, 0, 0};
        lmb_cursor *cur[LMB_LANES];
        const lmb_clip *c = s->clips[k];
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            cur[l] = NULL;
            if (!(done >> l & 1u) && s->clip[inst[l]] == k) {
                uint32_t i = inst[l];
                lanes |= 1u << l;
                t[l] = lmb_clip_time(c, s->time[i], s->loop[i]);
                cur[l] = s->cursors + (size_t)i * s->cursor_stride;
                n++;
            }
        }
        done |= lanes;
        if (n >= group_min) {
            lmb_sample_lanes_avx2(c, blk, cur, lanes, t);
            finish_lanes(s, k, c, blk, need, lanes);
        } else {
            for (uint32_t l = 0; l < LMB_LANES; l++)
                if (lanes >> l & 1u) sample_lane(s, inst[l], blk + l, need, l);
        }
    }
    return sampled;
}

void lmb_sampler_run(lmb_sampler *s, uint32_t first, uint32_t count) {
    lmb_pose *p = s->pose;
    const uint32_t J = p->joint_count, N = p->instance_count, end = first + count;
    if (count == 0) return;
    lmb_dense_plan plans[2];
    uint32_t inst[2][LMB_LANES];
    unsigned valid[2];
    int cur = 0, simd = lmb_simd_active();
    uint32_t b_first = first / LMB_LANES, b_end = (end + LMB_LANES - 1) / LMB_LANES;
    for (uint32_t b = b_first; b < b_end; b++) {
        /* lanes of block b inside [first, end); the next block's dense
         * frames are planned (and prefetched) while this one is sampled */
        for (uint32_t nb = (b == b_first ? b : b + 1); nb <= b + 1 && nb < b_end; nb++) {
            int slot = nb == b ? cur : cur ^ 1;
            valid[slot] = 0;
            for (uint32_t l = 0; l < LMB_LANES; l++) {
                uint32_t i = nb * LMB_LANES + l;
                inst[slot][l] = i < N ? i : 0;
                if (i >= first && i < end) valid[slot] |= 1u << l;
            }
            if (simd) lmb_sampler_dense_plan(s, inst[slot], valid[slot], plans + slot);
        }
        float *blk = p->local + (size_t)b * J * (LMB_TRS_FLOATS * LMB_LANES);
        unsigned sampled =
            lmb_sampler_lanes(s, inst[cur], valid[cur], blk, 3, simd ? plans + cur : NULL,
                              simd && b + 1 < b_end ? plans + (cur ^ 1) : NULL, NULL);
        for (uint32_t l = 0; l < LMB_LANES; l++)
            if (sampled >> l & 1u) lmb_pose_touch(p, inst[cur][l], 0);
        cur ^= 1;
    }
}

lmb_status lmb_sampler_validate(const lmb_sampler *s, uint32_t first, uint32_t count,
                                lmb_error *err) {
    lmb_error_clear(err);
    const lmb_pose *p = s->pose;
    if (!p) return lmb_error_set(err, LMB_EINVAL, "pose", "the sampler has no pose", 0, 0, 0, 0);
    if (s->clip_count < 1 || s->clip_count > 65535 || !s->clips)
        return lmb_error_set(err, LMB_ERANGE, "clips", "clip count {v} out of range [1, {l}]", 0, 0,
                             (double)s->clip_count, 65535);
    for (uint32_t k = 0; k < s->clip_count; k++) {
        const lmb_clip *c = s->clips[k];
        if (!c) return lmb_error_set(err, LMB_EINVAL, "clips", "clips[{i}] is missing", k, 0, 0, 0);
        if (c->joint_span > p->joint_count)
            return lmb_error_set(err, LMB_EMISMATCH, "clips",
                                 "clips[{i}] animates joint {v} but the skeleton has {l} joints", k,
                                 0, (double)c->joint_span, (double)p->joint_count);
        if (lmb_clip_cursor_count(c) > s->cursor_stride)
            return lmb_error_set(err, LMB_ERANGE, "cursor_stride",
                                 "clips[{i}] needs {v} cursors per instance, more than the {l} "
                                 "there are",
                                 k, 0, (double)lmb_clip_cursor_count(c), (double)s->cursor_stride);
    }
    if (s->root_joint < -1 || s->root_joint >= (int64_t)p->joint_count)
        return lmb_error_set(err, LMB_ERANGE, "root_joint", "root joint {v} out of range [1, {l}]",
                             0, 0, (double)s->root_joint + 1.0, (double)p->joint_count);
    if ((uint64_t)first + count > p->instance_count)
        return lmb_error_set(err, LMB_ERANGE, "count", "instances {i} .. {v} out of range [1, {l}]",
                             first, 0, (double)first + (double)count, (double)p->instance_count);
    for (uint32_t i = first; i < first + count; i++) {
        if (s->clip && (s->clip[i] < -1 || s->clip[i] >= (int64_t)s->clip_count))
            return lmb_error_set(err, LMB_ERANGE, "clip",
                                 "instance {i}: clip {v} out of range [0, {l}] (0: none)", i, 0,
                                 (double)s->clip[i] + 1.0, (double)s->clip_count);
        if (s->time && !isfinite(s->time[i]))
            return lmb_error_set(err, LMB_ENAN, "time", "instance {i}: time {v} is not finite", i,
                                 0, s->time[i], 0);
    }
    return LMB_OK;
}
