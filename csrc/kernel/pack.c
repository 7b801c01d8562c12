/* pack.c: the clip compressor and its error measurement (pack.h). */
#include "pack.h"
#include "threadpool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PK(name) pack_##name
#include "packed_decode.h"
#undef PK

/* Steps tried per stream, largest first (frames per kept key). */
static const uint16_t step_list[] = {32, 24, 16, 12, 8, 6, 5, 4, 3, 2, 1};
#define STEP_COUNT (sizeof step_list / sizeof step_list[0])
/* Feasible steps whose quantisation is tried (the largest ones). */
#define STEP_TRIES 3
/* Grids finer than the source's tried when resampling cannot meet the bound. */
#define GRID_TRIES 3
#define GRID_MAX (1u << 22)
/* Outer iterations tightening the per-joint budgets. */
#define BUDGET_TRIES 8
/* p99 histogram: 200 bins per decade from 1e-12 to 1e6. */
#define HIST_PER_DECADE 200
#define HIST_BINS (18 * HIST_PER_DECADE + 2)
#define SECTION 16
/* Sample positions per key interval: the keys and the points a quarter,
 * half and three quarters of the way (interpolation errors of rotations
 * peak off the midpoint). */
#define SUB 4u
/* Fewest grid positions a worker checks at once in stream_fails (fewer: the
 * threads' hand-over costs more than the check). */
#define FAILS_RUN 4096u

static const uint32_t first_comp[3] = {0, 3, 7};

/* What one worker of a measure uses and finds (measure_at): its sampling
 * state and poses, and the largest errors of the samples it measured. */
typedef struct pack_worker {
    lmb_cursor *cur;      /* jt: the source's cursors */
    float *pcache;        /* Q * LMB_PK_CACHE_FLOATS: pose_packed's decoded keys */
    float *poseE, *poseD; /* J * LMB_TRS_FLOATS each */
    double *mE, *mD;      /* J * 12 each */
    double *jerr;         /* J: each joint's largest error */
    uint32_t *hist;       /* HIST_BINS: the p99 histogram */
    uint64_t count;
    double max_joint, max_distance;
    uint32_t worst_s, worst_joint; /* the worst sample (the first of equals) */
    float worst_time;
} pack_worker;

/* What one worker choosing a stream's encoding uses (stream_choose): the
 * candidates' keys and key frames, and where it writes the stream. */
typedef struct pack_chooser {
    float *K;               /* Fmax * 32: one stream's kept key values */
    float klo[32], khi[32]; /* per row and lane: the smallest and largest of K's keys */
    uint16_t *kfc, *kfb;    /* Fmax: a candidate's key frames, the best candidate's */
    uint16_t *kfi;          /* 3 Fmax: the irregular candidates' key frames */
    double *fit;            /* 6 Fmax: fit_keys' system and right-hand sides */
    uint32_t didx[8]; /* the stream being chosen: each lane's derived component (DERIVE_ANY) */
    uint32_t data, range, kf; /* where the stream goes: data bytes, range floats, key frames
                               * (stream_choose moves them past it) */
    int alone;                /* its checks stay on this thread (it runs in a pool job) */
} pack_chooser;

typedef struct pack_lay {
    uint32_t F0, Fmax, F, Q, J, jt, span;
    int mode, interp;
    int source_keys; /* lmb_pack_job.source_keys: no fitted candidates */
    double t0, dt;
    float *gt;    /* Fmax: the grid's times */
    uint16_t *kf; /* Q * 3 * Fmax: the chosen streams' key frames */
    uint32_t kf_count;
    float *G;        /* (SUB (Fmax - 1) + 1) * Q * 80: exact values (grid_rows) */
    float *rg;       /* Q * 3 * 68: ranges of every stream */
    uint8_t *data;   /* Q * 3 * slot_bytes: records of every stream */
    lmb_pstream *st; /* Q * 3 */
    uint8_t *has;    /* Q * 8 * 3: the source animates (joint, path) */
    uint8_t *keep;   /* Q * 8 * 3: the packed clip keeps it */
    double *reach;   /* Q * 8 */
    double *mult;    /* Q * 3: each stream's budget, a multiple of the common one */
    uint32_t *order; /* Q * 3: streams by bytes (relax) */
    double
        *jerr; /* 2 max(J, Q * 8): each joint's largest error in the last measure; relax's copy */
    double *chain;   /* Q * 8: joints on the longest chain through the joint */
    float *fill;     /* Q * 80: rest values (constants past the skeleton) */
    lmb_cursor *cur; /* jt */
    float *times;    /* key_total */
    double *mE;      /* J * 12: the rest pose's model matrices (reaches) */
    double *srcM;    /* srcM_cap joint samples: the source's model matrices at measure's
                      * times (NULL: too large to keep) */
    size_t srcM_cap;
    uint32_t srcM_ns;  /* samples srcM holds for the current grid (0: none) */
    uint32_t srcM_sub; /* ... and at how many points per interval */
    uint8_t *mark;     /* NULL, or the joints measure computes: 2 measured, 1 an ancestor */
    uint8_t *qmark;    /* chunks with a marked joint */
    uint8_t *marks;    /* room for mark (max(Q * 8, J)) and qmark (Q) */
    pack_worker *wk;   /* measure's workers (lmb_pack_workers) */
    uint32_t workers;
    lmb_pool *pool;
    uint32_t range_floats, data_bytes, kept, node_tracks, node_times, node_values;
    pack_chooser *cs; /* workers choosing streams (one per measure worker) */
    lmb_packed pk;
} pack_lay;

/* ---- layout of the scratch ------------------------------------------- */

/* Distinct key-time ranges of the multi-key joint tracks (at most
 * RANGES_MAX; returns RANGES_MAX + 1 when there are more). */
#define RANGES_MAX 64
static uint32_t time_ranges(const lmb_clip *src, uint32_t *off, uint32_t *cnt) {
    uint32_t n = 0;
    for (uint32_t m = 0; m < src->joint_track_count; m++) {
        const lmb_track *tr = src->tracks + m;
        if (tr->key_count < 2) continue;
        int seen = 0;
        for (uint32_t r = 0; r < n && !seen; r++)
            seen = off[r] == tr->times && cnt[r] == tr->key_count;
        if (seen) continue;
        if (n == RANGES_MAX) return RANGES_MAX + 1;
        off[n] = tr->times, cnt[n] = tr->key_count, n++;
    }
    return n;
}

/* The sorted union of those ranges' times into out (NULL: only counted). */
static uint32_t merge_times(const lmb_clip *src, const uint32_t *off, const uint32_t *cnt,
                            uint32_t nr, float *out) {
    uint32_t at[RANGES_MAX], n = 0;
    memset(at, 0, sizeof at);
    for (;;) {
        int any = 0;
        float next = 0.0f;
        for (uint32_t r = 0; r < nr; r++) {
            if (at[r] == cnt[r]) continue;
            float v = src->times[off[r] + at[r]];
            if (!any || v < next) next = v, any = 1;
        }
        if (!any) return n;
        for (uint32_t r = 0; r < nr; r++)
            if (at[r] < cnt[r] && src->times[off[r] + at[r]] == next) at[r]++;
        if (out) out[n] = next;
        n++;
    }
}

enum { GRID_SOURCE = 0, GRID_UNION = 1, GRID_RESAMPLED = 2 };

static int grid_of(const lmb_clip *src, pack_lay *L) {
    double t0, dt;
    uint32_t n, interp, off[RANGES_MAX], cnt[RANGES_MAX];
    L->interp = LMB_LINEAR;
    if (lmb_clip_grid(src, &t0, &dt, &n, &interp)) {
        L->mode = GRID_SOURCE, L->interp = (int)interp, L->t0 = t0, L->dt = dt, L->F0 = n;
    } else {
        uint32_t nr = time_ranges(src, off, cnt);
        float lo = 0.0f, hi = 0.0f;
        uint32_t most = 1;
        int any = 0;
        for (uint32_t m = 0; m < src->joint_track_count; m++) {
            const lmb_track *tr = src->tracks + m;
            if (!any || tr->first < lo) lo = tr->first;
            if (!any || tr->last > hi) hi = tr->last;
            any = 1;
            if (tr->key_count > most) most = tr->key_count;
        }
        L->t0 = (double)lo;
        if (nr >= 1 && nr <= RANGES_MAX) {
            /* STEP on the union grid when every multi-key track steps */
            int step = 1;
            for (uint32_t m = 0; m < src->joint_track_count; m++)
                if (src->tracks[m].key_count > 1 && src->tracks[m].interp != LMB_STEP) step = 0;
            L->interp = step ? LMB_STEP : LMB_LINEAR;
            L->mode = GRID_UNION;
            L->F0 = merge_times(src, off, cnt, nr, NULL);
            L->dt = 0.0;
        } else {
            L->mode = GRID_RESAMPLED;
            L->F0 = hi > lo ? (most > 2 ? most : 2) : 1;
            L->dt = L->F0 > 1 ? ((double)hi - (double)lo) / (double)(L->F0 - 1) : 1.0;
        }
    }
    if (L->F0 > GRID_MAX) return 0;
    L->Fmax = L->F0 > 1 && L->F0 <= 2048 ? (L->F0 - 1) * 4 + 1 : L->F0;
    return 1;
}

/* The grid's times for the source grid (gt, F0 entries). */
static void grid_times(const lmb_clip *src, pack_lay *L) {
    uint32_t off[RANGES_MAX], cnt[RANGES_MAX];
    if (L->mode == GRID_SOURCE) {
        for (uint32_t m = 0; m < src->joint_track_count; m++)
            if (src->tracks[m].key_count > 1) {
                memcpy(L->gt, src->times + src->tracks[m].times, (size_t)L->F0 * sizeof(float));
                return;
            }
    }
    if (L->mode == GRID_UNION) {
        uint32_t nr = time_ranges(src, off, cnt);
        merge_times(src, off, cnt, nr, L->gt);
        return;
    }
    for (uint32_t i = 0; i < L->F0; i++)
        L->gt[i] = (float)(L->t0 + L->dt * (double)i);
}

/* Halves every grid interval (F -> 2 F - 1), in place. */
static void grid_refine(pack_lay *L) {
    uint32_t F = L->F;
    for (uint32_t i = F; i-- > 0;) {
        L->gt[2 * i] = L->gt[i];
        if (i + 1 < F) L->gt[2 * i + 1] = 0.5f * (L->gt[i] + L->gt[2 * i + 2]);
    }
    L->F = 2 * F - 1;
    L->dt *= 0.5;
}

/* Room for one stream's records in pack_lay.data: every frame at 128 bytes,
 * and 16 more that a candidate's decoding may read past its end. */
static size_t slot_bytes(uint32_t Fmax) {
    return (size_t)Fmax * 128 + 16;
}

static size_t carve(size_t *off, size_t bytes) {
    size_t at = *off;
    *off = lmb_align_up(at + bytes, SECTION);
    return at;
}

/* Sizes (mem NULL) or places the scratch; returns its bytes (0: too large). */
static size_t lay_out(const lmb_clip *src, const lmb_skeleton *sk, size_t cache_bytes,
                      uint32_t workers, void *mem, pack_lay **out) {
    pack_lay L;
    memset(&L, 0, sizeof L);
    if (!grid_of(src, &L)) return 0;
    L.Q = (src->joint_span + 7u) / 8u;
    if (L.Q == 0) L.Q = 1;
    L.J = sk->joint_count;
    L.jt = src->joint_track_count;
    L.span = src->joint_span;
    double pos = (double)SUB * (L.Fmax - 1) + 1.0, q = L.Q;
    if (pos * q * 80.0 * 4.0 + q * 3.0 * ((double)L.Fmax * 128.0 + 16.0) > 4e9) return 0;
    size_t off = lmb_align_up(sizeof(pack_lay), SECTION);
    size_t oG = carve(&off, ((size_t)SUB * (L.Fmax - 1) + 1) * L.Q * 80 * sizeof(float));
    size_t org = carve(&off, (size_t)L.Q * 3 * 68 * sizeof(float));
    size_t odata = carve(&off, (size_t)L.Q * 3 * slot_bytes(L.Fmax));
    size_t ost = carve(&off, (size_t)L.Q * 3 * sizeof(lmb_pstream));
    size_t ohas = carve(&off, (size_t)L.Q * 24);
    size_t okeep = carve(&off, (size_t)L.Q * 24);
    size_t oreach = carve(&off, (size_t)L.Q * 8 * sizeof(double));
    size_t omult = carve(&off, (size_t)L.Q * 3 * 2 * sizeof(double));
    size_t oorder = carve(&off, (size_t)L.Q * 3 * sizeof(uint32_t));
    size_t ojerr = carve(&off, (size_t)(L.Q * 8 > L.J ? L.Q * 8 : L.J) * 2 * sizeof(double));
    size_t ochain = carve(&off, (size_t)(L.Q * 8 > L.J ? L.Q * 8 : L.J) * 2 * sizeof(double));
    size_t ofill = carve(&off, (size_t)L.Q * 80 * sizeof(float));
    size_t ocur = carve(&off, (size_t)L.jt * sizeof(lmb_cursor) + 1);
    size_t otimes = carve(&off, ((size_t)src->key_total + L.Fmax) * sizeof(float) + 1);
    size_t om = carve(&off, (size_t)L.J * 12 * sizeof(double));
    /* the source's model matrices at the times measure samples (the same at
     * every budget of a grid): room for all of them, or cache_bytes' worth
     * if that holds at least the source grid's (measure checks each grid).
     * cache_bytes is the caller's (up to SIZE_MAX): a quarter of the address
     * space at most, so the offsets below cannot wrap */
    double most = (double)SUB * ((double)src->key_total + L.Fmax) + 1.0;
    size_t cache_max = SIZE_MAX / 4 < cache_bytes ? SIZE_MAX / 4 : cache_bytes;
    double room = (double)cache_max / (12.0 * sizeof(double) * (L.J ? L.J : 1));
    size_t ocache = 0, cap = 0;
    if (most <= room || (double)SUB * L.F0 + 1.0 <= room) {
        cap = (size_t)(most < room ? most : room) * L.J;
        ocache = carve(&off, cap * 12 * sizeof(double));
    }
    size_t omark = carve(&off, (size_t)(L.Q * 8 > L.J ? L.Q * 8 : L.J) + L.Q);
    size_t ogt = carve(&off, (size_t)L.Fmax * sizeof(float));
    size_t okf = carve(&off, (size_t)L.Q * 3 * L.Fmax * sizeof(uint16_t));
    /* each worker's arrays (pack_worker) */
    if (workers < 1 || workers > LMB_POOL_MAX_THREADS + 1) return 0;
    size_t owk = carve(&off, (size_t)workers * sizeof(pack_worker));
    size_t w_cur = lmb_align_up((size_t)L.jt * sizeof(lmb_cursor) + 1, SECTION),
           w_pose = lmb_align_up((size_t)L.J * LMB_TRS_FLOATS * 2 * sizeof(float), SECTION),
           w_m = lmb_align_up((size_t)L.J * 12 * 2 * sizeof(double), SECTION),
           w_hist = lmb_align_up(HIST_BINS * sizeof(uint32_t), SECTION),
           w_pc = lmb_align_up((size_t)L.Q * LMB_PK_CACHE_FLOATS * sizeof(float), SECTION),
           w_jerr = lmb_align_up((size_t)(L.J ? L.J : 1) * sizeof(double), SECTION);
    size_t w_each = w_cur + w_pose + w_m + w_hist + w_pc + w_jerr;
    size_t ow = carve(&off, (size_t)workers * w_each);
    size_t ocs = carve(&off, (size_t)workers * sizeof(pack_chooser));
    size_t c_K = lmb_align_up((size_t)L.Fmax * 32 * sizeof(float), SECTION),
           c_kf = lmb_align_up((size_t)L.Fmax * 5 * sizeof(uint16_t), SECTION),
           c_fit = lmb_align_up((size_t)L.Fmax * 6 * sizeof(double), SECTION);
    size_t oc = carve(&off, (size_t)workers * (c_K + c_kf + c_fit));
    size_t bytes = off + SECTION;
    if (mem) {
        unsigned char *b = (unsigned char *)lmb_align_ptr(mem, SECTION);
        pack_lay *P = (pack_lay *)(void *)b;
        *P = L;
        P->G = (float *)(void *)(b + oG);
        P->rg = (float *)(void *)(b + org);
        P->data = b + odata;
        P->st = (lmb_pstream *)(void *)(b + ost);
        P->has = b + ohas;
        P->keep = b + okeep;
        P->reach = (double *)(void *)(b + oreach);
        P->mult = (double *)(void *)(b + omult);
        P->order = (uint32_t *)(void *)(b + oorder);
        P->jerr = (double *)(void *)(b + ojerr);
        P->chain = (double *)(void *)(b + ochain);
        P->fill = (float *)(void *)(b + ofill);
        P->cur = (lmb_cursor *)(void *)(b + ocur);
        P->times = (float *)(void *)(b + otimes);
        P->mE = (double *)(void *)(b + om);
        P->srcM = cap ? (double *)(void *)(b + ocache) : NULL;
        P->srcM_cap = cap, P->srcM_ns = 0;
        P->marks = b + omark, P->mark = NULL, P->qmark = NULL;
        P->gt = (float *)(void *)(b + ogt);
        P->kf = (uint16_t *)(void *)(b + okf);
        P->workers = workers, P->pool = NULL;
        P->wk = (pack_worker *)(void *)(b + owk);
        for (uint32_t w = 0; w < workers; w++) {
            pack_worker *k = P->wk + w;
            unsigned char *a = b + ow + (size_t)w * w_each;
            memset(k, 0, sizeof *k);
            k->cur = (lmb_cursor *)(void *)a;
            k->poseE = (float *)(void *)(a + w_cur);
            k->poseD = k->poseE + (size_t)L.J * LMB_TRS_FLOATS;
            k->mE = (double *)(void *)(a + w_cur + w_pose);
            k->mD = k->mE + (size_t)L.J * 12;
            k->hist = (uint32_t *)(void *)(a + w_cur + w_pose + w_m);
            k->pcache = (float *)(void *)(a + w_cur + w_pose + w_m + w_hist);
            k->jerr = (double *)(void *)(a + w_cur + w_pose + w_m + w_hist + w_pc);
        }
        P->cs = (pack_chooser *)(void *)(b + ocs);
        for (uint32_t w = 0; w < workers; w++) {
            pack_chooser *C = P->cs + w;
            unsigned char *a = b + oc + (size_t)w * (c_K + c_kf + c_fit);
            memset(C, 0, sizeof *C);
            C->K = (float *)(void *)a;
            C->kfc = (uint16_t *)(void *)(a + c_K);
            C->fit = (double *)(void *)(a + c_K + c_kf);
            C->kfb = C->kfc + L.Fmax;
            C->kfi = C->kfb + L.Fmax;
        }
        *out = P;
    }
    return bytes;
}

uint32_t lmb_pack_workers(const lmb_pool *pool) {
    return pool ? lmb_pool_threads(pool) : 1u;
}

size_t lmb_pack_scratch_bytes(const lmb_clip *src, const lmb_skeleton *skel, size_t cache_bytes,
                              uint32_t workers) {
    return lay_out(src, skel, cache_bytes, workers, NULL, NULL);
}

/* ---- model space ------------------------------------------------------ */

/* Model 3x4 matrices (column-major: 3 axes then the origin) of a pose;
 * with `mark`, of the marked joints only (their ancestors marked too). */
static void model_of(const lmb_skeleton *sk, const float *trs, double *m, const uint8_t *mark) {
    for (uint32_t j = 0; j < sk->joint_count; j++) {
        if (mark && !mark[j]) continue;
        const float *lf = trs + (size_t)j * LMB_TRS_FLOATS;
        double l[10];
        for (int k = 0; k < 10; k++)
            l[k] = (double)lf[k];
        double x = l[3], y = l[4], z = l[5], w = l[6];
        double n = sqrt(x * x + y * y + z * z + w * w);
        if (n > 0.0) x /= n, y /= n, z /= n, w /= n;
        double r[12] = {(1 - 2 * (y * y + z * z)) * l[7],
                        (2 * (x * y + z * w)) * l[7],
                        (2 * (x * z - y * w)) * l[7],
                        (2 * (x * y - z * w)) * l[8],
                        (1 - 2 * (x * x + z * z)) * l[8],
                        (2 * (y * z + x * w)) * l[8],
                        (2 * (x * z + y * w)) * l[9],
                        (2 * (y * z - x * w)) * l[9],
                        (1 - 2 * (x * x + y * y)) * l[9],
                        l[0],
                        l[1],
                        l[2]};
        double *o = m + (size_t)j * 12;
        uint32_t p = sk->parent[j];
        if (p == LMB_NO_PARENT) {
            memcpy(o, r, sizeof r);
            continue;
        }
        const double *a = m + (size_t)p * 12;
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 3; i++)
                o[c * 3 + i] = a[i] * r[c * 3] + a[3 + i] * r[c * 3 + 1] + a[6 + i] * r[c * 3 + 2] +
                               (c == 3 ? a[9 + i] : 0.0);
    }
}

static double dist3(const double *a, const double *b) {
    double x = a[0] - b[0], y = a[1] - b[1], z = a[2] - b[2];
    return sqrt(x * x + y * y + z * z);
}

/* Reach of every joint: distance + its farthest descendant's distance (rest pose). */
static void reaches(pack_lay *L, const lmb_skeleton *sk, float distance) {
    model_of(sk, sk->rest, L->mE, NULL);
    uint32_t n = L->Q * 8;
    for (uint32_t j = 0; j < n; j++)
        L->reach[j] = (double)distance;
    /* the longest chain through each joint (ancestors + itself + the
     * longest line of descendants): a joint's share of the tolerance is
     * divided by it, so errors along any chain add up to the tolerance at
     * most (the budget search then grows the shares where they do not) */
    uint32_t J = sk->joint_count, all = n > J ? n : J;
    double *depth = L->chain + all, *height = L->chain;
    for (uint32_t j = 0; j < all; j++)
        depth[j] = 0.0, height[j] = 0.0;
    for (uint32_t j = 0; j < J; j++)
        depth[j] = sk->parent[j] == LMB_NO_PARENT ? 0.0 : depth[sk->parent[j]] + 1.0;
    for (uint32_t j = J; j-- > 0;) {
        uint32_t p = sk->parent[j];
        if (p != LMB_NO_PARENT && height[j] + 1.0 > height[p]) height[p] = height[j] + 1.0;
    }
    for (uint32_t j = 0; j < all; j++)
        L->chain[j] = depth[j] + height[j] + 1.0;
    for (uint32_t j = 0; j < sk->joint_count && j < n; j++) {
        /* walk up from j: every ancestor a reaches at least |o_j - o_a| */
        for (uint32_t a = sk->parent[j]; a != LMB_NO_PARENT; a = sk->parent[a]) {
            if (a >= n) continue;
            double d =
                dist3(L->mE + (size_t)j * 12 + 9, L->mE + (size_t)a * 12 + 9) + (double)distance;
            if (d > L->reach[a]) L->reach[a] = d;
        }
    }
}

/* ---- error measurement ------------------------------------------------- */

typedef void (*pose_fn)(const void *ctx, const pack_lay *L, pack_worker *w, float t, float *trs);

typedef struct clip_ctx {
    const lmb_clip *c;
    const lmb_skeleton *sk;
} clip_ctx;

/* Any clip's pose (packed clips decode through lmb_clip_sample_pose too). */
static void pose_clip(const void *ctx, const pack_lay *L, pack_worker *w, float t, float *trs) {
    const clip_ctx *x = (const clip_ctx *)ctx;
    (void)L, (void)w;
    lmb_clip_sample_pose(x->c, t, x->sk, trs);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* log10(e) for finite e > 0 within about 1e-12, without a call: e = m 2^k
 * with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(z), z = (m - 1) / (m + 1)
 * (|z| < 0.172: the series to z^13 is within 1e-12). */
static double fast_log10(double e) {
    uint64_t u;
    memcpy(&u, &e, sizeof u);
    int k = (int)(u >> 52 & 0x7FFu) - 1023;
    u = (u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull; /* m in [1, 2) */
    double m;
    memcpy(&m, &u, sizeof m);
    if (m >= 1.4142135623730951) m *= 0.5, k++;
    double z = (m - 1.0) / (m + 1.0), z2 = z * z;
    double p = 2.0 / 11.0 + z2 * (2.0 / 13.0);
    p = 2.0 / 9.0 + z2 * p;
    p = 2.0 / 7.0 + z2 * p;
    p = 2.0 / 5.0 + z2 * p;
    p = 2.0 / 3.0 + z2 * p;
    p = z * (2.0 + z2 * p);
    return (p + (double)k * 0.69314718055994531) * 0.43429448190325182;
}

static void hist_add(uint32_t *h, double e) {
    int b = 0;
    if (e > 1e-12) {
        double x = (e < 1e7 ? fast_log10(e) + 12.0 : 19.0) * HIST_PER_DECADE;
        /* within 1e-7 of a bin's edge: the library's log10 decides, so
         * every sample lands where log10 puts it */
        double f = x - floor(x);
        if (f < 1e-7 || f > 1.0 - 1e-7) x = (log10(e) + 12.0) * HIST_PER_DECADE;
        b = x >= HIST_BINS - 2 ? HIST_BINS - 1 : (int)x + 1;
    }
    h[b]++;
}

static double hist_quantile(const uint32_t *h, uint64_t total, double q) {
    uint64_t want = (uint64_t)ceil(q * (double)total), acc = 0;
    for (int b = 0; b < HIST_BINS; b++) {
        acc += h[b];
        if (acc >= want && acc > 0)
            return b == 0 ? 0.0 : pow(10.0, (double)b / HIST_PER_DECADE - 12.0);
    }
    return 0.0;
}

/* The decoded pose of the packed form in L->pk with tracks L->keep. */
static void pose_packed(const void *ctx, const pack_lay *L, pack_worker *w, float t, float *trs) {
    const lmb_skeleton *sk = (const lmb_skeleton *)ctx;
    memcpy(trs, sk->rest, (size_t)sk->joint_count * LMB_TRS_FLOATS * sizeof(float));
    float pos = lmb_packed_pos(&L->pk, t), buf[80];
    for (uint32_t q = 0; q < L->pk.chunks; q++) {
        if (L->mark && !L->qmark[q]) continue; /* no joint measure needs */
        /* measure's times increase: each key pair is decoded once */
        lmb_packed_chunk_cached(&L->pk, q, pos, w->pcache + (size_t)q * LMB_PK_CACHE_FLOATS, buf,
                                8);
        int skipped[3];
        for (uint32_t ch = 0; ch < 3; ch++)
            skipped[ch] = lmb_packed_skipped(&L->pk, q, ch);
        for (uint32_t l = 0; l < 8; l++) {
            uint32_t j = q * 8 + l;
            if (j >= sk->joint_count) break;
            for (uint32_t ch = 0; ch < 3; ch++) {
                /* as samplers do: every joint below the span from its stream
                 * (the rest pose where the clip has no track), unless skipped */
                if (j >= L->span || skipped[ch]) continue;
                for (uint32_t r = 0; r < (ch == 1 ? 4u : 3u); r++)
                    trs[(size_t)j * LMB_TRS_FLOATS + first_comp[ch] + r] =
                        buf[(first_comp[ch] + r) * 8 + l];
            }
        }
    }
}

/* Appends the frame times of packed grid g (at most `room`) at L->times + n. */
static uint32_t grid_frames(const lmb_packed *g, pack_lay *L, uint32_t n, uint32_t room) {
    if (!g || !g->streams || g->frames > room) return n;
    for (uint32_t k = 0; k < g->frames; k++)
        L->times[n + k] = g->times ? g->times[k] : g->t0 + g->dt * (float)k;
    return n + g->frames;
}

/* The error of `fn`'s poses against src's at the sample times: src's key
 * times and (grid) the packed grid's frame times, and the quarter points
 * between consecutive ones (sub = SUB), so interpolation between grid
 * frames that the source's keys do not see is measured too; sub = 1 samples
 * the times only (the p99 is then not counted). With L->mark, only the
 * joints marked 2 are measured (their ancestors, marked 1, computed for
 * them): the others keep their errors in L->jerr from the last measure,
 * and count in the maximum as they are. */
/* One measure's shared inputs (measure_at) for its work items. */
typedef struct measure_job {
    const lmb_clip *src;
    const lmb_skeleton *sk;
    pack_lay *L;
    pose_fn fn;
    const void *ctx;
    float distance;
    uint32_t sub, ns, per; /* points per interval, samples, samples per item */
    int keep, have;        /* the source's samples: kept in L->srcM / read from it */
} measure_job;

/* Whether sample (s, j) with error e is worse than worker w's worst: a
 * larger error, or an equal one at an earlier sample (the first of equals,
 * whatever the workers' share). Errors of 0 set no worst sample (it stays
 * joint 0 at time 0). */
static int worse(const pack_worker *w, double e, uint32_t s, uint32_t j) {
    if (e != w->max_distance) return e > w->max_distance;
    return w->worst_s != UINT32_MAX && (s < w->worst_s || (s == w->worst_s && j < w->worst_joint));
}

/* Samples [item per, (item + 1) per) of a measure, into worker's findings;
 * the sampling state starts empty at each item (cursors and the key cache
 * are hints: the values do not depend on where a walk starts). */
static void measure_item(void *vjob, uint32_t item, uint32_t worker) {
    const measure_job *m = (const measure_job *)vjob;
    pack_lay *L = m->L;
    pack_worker *w = L->wk + worker;
    const lmb_skeleton *sk = m->sk;
    uint32_t J = sk->joint_count, sub = m->sub;
    uint32_t s0 = item * m->per, s1 = s0 + m->per < m->ns ? s0 + m->per : m->ns;
    memset(w->pcache, 0, (size_t)L->Q * LMB_PK_CACHE_FLOATS * sizeof(float));
    memset(w->cur, 0, (size_t)L->jt * sizeof(lmb_cursor));
    for (uint32_t s = s0; s < s1; s++) {
        uint32_t seg = s / sub, f = s % sub;
        float t = f ? L->times[seg] + (L->times[seg + 1] - L->times[seg]) * ((float)f / (float)sub)
                    : L->times[seg];
        double *mE = m->keep ? L->srcM + (size_t)s * J * 12 : w->mE;
        if (!m->have) {
            if (m->src->packed.streams)
                lmb_clip_sample_pose(m->src, t, sk, w->poseE);
            else /* the times increase: each track's cursor walks forward */
                lmb_clip_sample_pose_cursors(m->src, t, sk, w->poseE, w->cur, L->mark);
            model_of(sk, w->poseE, mE, L->mark);
        }
        m->fn(m->ctx, L, w, t, w->poseD);
        model_of(sk, w->poseD, w->mD, L->mark);
        for (uint32_t j = 0; j < J; j++) {
            if (L->mark && L->mark[j] != 2) continue;
            const double *a = mE + (size_t)j * 12, *b = w->mD + (size_t)j * 12;
            double ej = dist3(a + 9, b + 9), ed = 0.0;
            for (int k = 0; k < 3; k++) {
                double pa[3], pb[3];
                for (int i = 0; i < 3; i++)
                    pa[i] = a[9 + i] + (double)m->distance * a[k * 3 + i],
                    pb[i] = b[9 + i] + (double)m->distance * b[k * 3 + i];
                double e = dist3(pa, pb);
                if (e > ed) ed = e;
            }
            if (ej > w->max_joint) w->max_joint = ej;
            double e = ed > ej ? ed : ej;
            if (e > w->jerr[j]) w->jerr[j] = e;
            if (worse(w, e, s, j)) {
                w->max_distance = e;
                w->worst_s = s, w->worst_joint = j;
                w->worst_time = t;
            }
            if (sub == SUB) hist_add(w->hist, e); /* p99: full measures only */
            w->count++;
        }
    }
}

/* The error of `fn`'s poses against src's at the sample times: src's key
 * times and (grid) the packed grid's frame times, and the quarter points
 * between consecutive ones (sub = SUB), so interpolation between grid
 * frames that the source's keys do not see is measured too; sub = 1 samples
 * the times only (the p99 is then not counted). With L->mark, only the
 * joints marked 2 are measured (their ancestors, marked 1, computed for
 * them): the others keep their errors in L->jerr from the last measure,
 * and count in the maximum as they are. The samples are shared out among
 * L->pool's workers in runs; the largest errors, the first worst sample
 * and the histogram do not depend on how. */
static void measure_at(const lmb_clip *src, const lmb_skeleton *sk, float distance, pack_lay *L,
                       pose_fn fn, const void *ctx, lmb_pack_stats *out, const lmb_packed *grid,
                       uint32_t sub) {
    memset(out, 0, sizeof *out);
    uint32_t nt = src->key_total, nu = 0;
    memcpy(L->times, src->times, (size_t)nt * sizeof(float));
    nt = grid_frames(grid, L, nt, L->Fmax);
    qsort(L->times, nt, sizeof(float), cmp_float);
    for (uint32_t k = 0; k < nt; k++)
        if (nu == 0 || L->times[k] != L->times[nu - 1]) L->times[nu++] = L->times[k];
    if (nu == 0) L->times[nu++] = 0.0f;
    uint32_t J = sk->joint_count;
    for (uint32_t w = 0; w < L->workers; w++) {
        pack_worker *k = L->wk + w;
        if (sub == SUB) memset(k->hist, 0, HIST_BINS * sizeof(uint32_t));
        memset(k->jerr, 0, (size_t)J * sizeof(double));
        k->count = 0, k->max_joint = 0.0, k->max_distance = 0.0;
        k->worst_s = UINT32_MAX, k->worst_joint = 0, k->worst_time = 0.0f;
    }
    measure_job m;
    m.src = src, m.sk = sk, m.L = L, m.fn = fn, m.ctx = ctx, m.distance = distance;
    m.sub = sub, m.ns = sub * (nu - 1) + 1;
    /* the source's side from the cache when it holds this grid's samples */
    int fits = L->srcM && (size_t)m.ns * J <= L->srcM_cap;
    m.have = fits && L->srcM_ns == m.ns && L->srcM_sub == sub;
    m.keep = fits && (m.have || !L->mark); /* a marked measure fills no cache */
    /* runs of at least 64 samples, about 4 per worker */
    uint32_t want = L->workers * 4u, per = (m.ns + want - 1) / want;
    m.per = per < 64 ? 64 : per;
    uint32_t items = (m.ns + m.per - 1) / m.per;
    if (L->pool && L->workers > 1 && items > 1)
        lmb_pool_run_workers(L->pool, items, L->workers, measure_item, &m);
    else
        for (uint32_t i = 0; i < items; i++)
            measure_item(&m, i, 0);
    if (m.keep) L->srcM_ns = m.ns, L->srcM_sub = sub;
    /* the workers' findings together */
    uint64_t count = 0;
    pack_worker best = L->wk[0];
    for (uint32_t w = 0; w < L->workers; w++) {
        const pack_worker *k = L->wk + w;
        count += k->count;
        if (k->max_joint > out->max_joint) out->max_joint = k->max_joint;
        if (k->worst_s != UINT32_MAX && worse(&best, k->max_distance, k->worst_s, k->worst_joint))
            best.max_distance = k->max_distance, best.worst_s = k->worst_s,
            best.worst_joint = k->worst_joint, best.worst_time = k->worst_time;
        if (w > 0 && sub == SUB)
            for (int b = 0; b < HIST_BINS; b++)
                L->wk[0].hist[b] += k->hist[b];
    }
    out->max_distance = best.max_distance;
    out->worst_joint = best.worst_joint;
    out->worst_time = best.worst_time;
    for (uint32_t j = 0; j < J; j++) {
        if (L->mark && L->mark[j] != 2) continue;
        double e = 0.0;
        for (uint32_t w = 0; w < L->workers; w++)
            if (L->wk[w].jerr[j] > e) e = L->wk[w].jerr[j];
        L->jerr[j] = e;
    }
    if (L->mark) /* the joints not measured keep their errors */
        for (uint32_t j = 0; j < J; j++)
            if (L->jerr[j] > out->max_distance)
                out->max_distance = L->jerr[j], out->worst_joint = j;
    out->samples = m.ns;
    out->p99_distance = sub == SUB ? hist_quantile(L->wk[0].hist, count, 0.99) : 0.0;
    if (out->p99_distance > out->max_distance) out->p99_distance = out->max_distance;
}

static void measure(const lmb_clip *src, const lmb_skeleton *sk, float distance, pack_lay *L,
                    pose_fn fn, const void *ctx, lmb_pack_stats *out, const lmb_packed *grid) {
    measure_at(src, sk, distance, L, fn, ctx, out, grid, SUB);
}

/* ---- the exact grid ------------------------------------------------------ */

/* Time of position p (p / SUB frames): a grid time or a point between two. */
static float grid_time(const pack_lay *L, uint32_t p) {
    uint32_t i = p / SUB, f = p % SUB;
    return f ? L->gt[i] + (L->gt[i + 1] - L->gt[i]) * ((float)f / (float)SUB) : L->gt[i];
}

/* Channel ch's rows of chunk q at position p of the exact grid (L->G): n * 8
 * floats, row after row (n = 4 for rotations, else 3). G keeps each chunk's
 * channels apart, each with every position's rows one after the other, so a
 * stream's checks read its part of G in order. */
static inline float *grid_rows(const pack_lay *L, uint32_t p, uint32_t q, uint32_t ch) {
    size_t P = (size_t)SUB * (L->F - 1) + 1;
    return L->G + (size_t)q * P * 80 + first_comp[ch] * 8 * P + (size_t)p * (ch == 1 ? 32 : 24);
}

static void build_grid(const lmb_clip *src, const lmb_skeleton *sk, pack_lay *L) {
    static const float fill[10] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    uint32_t Q = L->Q;
    for (uint32_t j = 0; j < Q * 8; j++)
        for (uint32_t c = 0; c < 10; c++)
            L->fill[(j / 8) * 80 + c * 8 + j % 8] =
                j < sk->joint_count ? sk->rest[(size_t)j * LMB_TRS_FLOATS + c] : fill[c];
    memset(L->cur, 0, (size_t)L->jt * sizeof(lmb_cursor));
    for (uint32_t p = 0; p < SUB * (L->F - 1) + 1; p++) {
        for (uint32_t q = 0; q < Q; q++)
            for (uint32_t ch = 0; ch < 3; ch++)
                memcpy(grid_rows(L, p, q, ch), L->fill + q * 80 + first_comp[ch] * 8,
                       (ch == 1 ? 32u : 24u) * sizeof(float));
        float t = grid_time(L, p);
        for (uint32_t m = 0; m < L->jt; m++) {
            const lmb_track *tr = src->tracks + m;
            float v[4];
            lmb_track_sample(src, tr, t, L->cur + m, v);
            uint32_t j = tr->target;
            float *g = grid_rows(L, p, j / 8, tr->path);
            for (uint32_t c = 0; c < tr->width; c++)
                g[c * 8 + j % 8] = v[c];
        }
    }
}

/* ---- one stream ------------------------------------------------------------ */

/* Error of lane l of channel ch (model units, estimated from the reach). */
static inline __attribute__((always_inline)) double
lane_error(uint32_t ch, double reach, const float *e, const float *d, uint32_t l) {
    if (ch == 0) {
        double x = (double)(e[l] - d[l]), y = (double)(e[8 + l] - d[8 + l]),
               z = (double)(e[16 + l] - d[16 + l]);
        return sqrt(x * x + y * y + z * z);
    }
    if (ch == 2) {
        double m = 0.0;
        for (uint32_t r = 0; r < 3; r++) {
            double x = fabs((double)e[r * 8 + l] - (double)d[r * 8 + l]);
            if (x > m) m = x;
        }
        return m * reach;
    }
    double sm = 0.0, sp = 0.0;
    for (uint32_t r = 0; r < 4; r++) {
        double a = (double)e[r * 8 + l], b = (double)d[r * 8 + l];
        sm += (a - b) * (a - b), sp += (a + b) * (a + b);
    }
    /* chord c between unit quaternions: angle 4 asin(c / 2) */
    double c = sqrt(sm < sp ? sm : sp);
    return 4.0 * asin(c < 2.0 ? c / 2.0 : 1.0) * reach;
}

static double lane_weight(uint32_t ch, double reach) {
    return ch == 0 ? 1.0 : ch == 1 ? 2.0 * reach : reach;
}

/* Joint j's error (lane_error) and weight (lane_weight) scaled by its chain. */
static inline double joint_error(const pack_lay *L, uint32_t ch, uint32_t j, const float *e,
                                 const float *d, uint32_t l) {
    return lane_error(ch, L->reach[j], e, d, l) * L->chain[j];
}
static double joint_weight(const pack_lay *L, uint32_t ch, uint32_t j) {
    return lane_weight(ch, L->reach[j]) * L->chain[j];
}

/* Rotation lanes of chunk q against a budget without asin per sample: lane
 * l's joint_error exceeds `budget` exactly when its squared chord (the
 * smaller of |a - b|^2 and |a + b|^2) exceeds thr[l] (INFINITY: never, the
 * largest rotation error being 2 pi reach chain). */
static void rotation_limits(const pack_lay *L, uint32_t q, double budget, double *thr) {
    for (uint32_t l = 0; l < 8; l++) {
        double g = L->reach[q * 8 + l] * L->chain[q * 8 + l];
        double x = g > 0.0 ? budget / (4.0 * g) : (double)INFINITY;
        double c = x < 1.5707963267948966 ? 2.0 * sin(x) : (double)INFINITY;
        thr[l] = c * c;
    }
}

/* Whether lane l of rotation rows e and d is over its limit (rotation_limits). */
static int rotation_over(const float *e, const float *d, uint32_t l, double thr) {
    double sm = 0.0, sp = 0.0;
    for (uint32_t r = 0; r < 4; r++) {
        double a = (double)e[r * 8 + l], b = (double)d[r * 8 + l];
        sm += (a - b) * (a - b), sp += (a + b) * (a + b);
    }
    double c2 = sm < sp ? sm : sp;
    return !(c2 <= thr);
}

/* Whether lane l (joint j) of channel ch errs by more than budget: a
 * rotation against its chord limit thr[l] (rotation_limits for that
 * budget), the others by joint_error. */
static inline int lane_over(const pack_lay *L, uint32_t ch, uint32_t j, const float *e,
                            const float *d, uint32_t l, const double *thr, double budget) {
    return ch == 1 ? rotation_over(e, d, l, thr[l]) : joint_error(L, ch, j, e, d, l) > budget;
}

/* Frame of key i: fr[i], or i k (the last key on the last frame). */
static inline uint32_t key_frame(const uint16_t *fr, uint32_t k, uint32_t F, uint32_t i) {
    return fr ? (uint32_t)fr[i] : (i * k < F - 1 ? i * k : F - 1);
}

/* Whether fit_keys applies to m keys one every k frames (k 0: frames of
 * their own): some key between the ends, and frames between keys. */
static int fits_keys(const pack_lay *L, uint32_t k, uint32_t m) {
    return !L->source_keys && k != 1 && m >= 3 && L->interp == LMB_LINEAR;
}

/* Whether stream_choose tries a candidate's fitted variant: where its keys
 * as sampled passed (fitted keys may need fewer bits), or failed by less
 * than 2.5 times the budget (`near`) while no candidate has passed yet
 * (fitted keys may make a longer step pass; such a pass does not count
 * among the STEP_TRIES steps whose keys as sampled passed). */
static int fitted_try(const pack_lay *L, uint32_t k, uint32_t m, int counted, int near,
                      int passed) {
    return fits_keys(L, k, m) && (counted || (near && !passed));
}

/* A rotation key ([row][lane]) made ready for a derived component: the
 * derived component >= 0 (w, or C->didx with derive 2), and with
 * DERIVE_ANY rows 0 .. 2 the other three in order, row 3 the derived one. */
static void derive_key(const pack_chooser *C, float *o, int derive) {
    for (uint32_t l = 0; l < 8; l++) {
        uint32_t x = derive == 2 ? C->didx[l] : 3u;
        if (o[x * 8 + l] < 0.0f)
            for (uint32_t r = 0; r < 4; r++)
                o[r * 8 + l] = -o[r * 8 + l];
        if (x == 3) continue;
        float v[4];
        for (uint32_t r = 0; r < 4; r++)
            v[r] = o[r * 8 + l];
        for (uint32_t r = 0, at = 0; r < 4; r++)
            if (r != x) o[at++ * 8 + l] = v[r];
        o[24 + l] = v[x];
    }
}

/* Fits the m keys of stream (q, ch) in C->K (grid values at frames fr, or
 * every k-th frame; rotations sign-continuous) to the exact values at every
 * grid position between them: per kept lane and row, the values that
 * minimise the squared difference between the keys' linear interpolation
 * and the exact values, the first and last keys held (a clip's ends stay
 * exact). Interpolating chords of a curved motion err on one side; fitted
 * keys move across it, so a step can be longer for the same bound (the
 * caller measures the result as any candidate). Rotations are fitted per
 * component and renormalised. Rows of a lane whose keys are all equal are
 * not fitted (CONST rows stay constant; in a rotation whose other rows are,
 * the renormalisation scales them too). */
static void fit_keys(const pack_lay *L, pack_chooser *C, uint32_t q, uint32_t ch,
                     const uint16_t *fr, uint32_t k, uint32_t m) {
    const uint32_t F = L->F, n = ch == 1 ? 4 : 3;
    /* the tridiagonal normal equations of keys 1 .. m - 2 (symmetric):
     * diagonal dg, upper up; factored in place (Thomas: dg the pivots,
     * up the eliminated upper entries); rhs m x 4 */
    double *dg = C->fit, *up = dg + L->Fmax, *rhs = up + L->Fmax;
    memset(dg, 0, (size_t)m * sizeof(double));
    memset(up, 0, (size_t)m * sizeof(double));
    for (uint32_t i = 0; i + 1 < m; i++) {
        uint32_t a = SUB * key_frame(fr, k, F, i), b = SUB * key_frame(fr, k, F, i + 1);
        for (uint32_t p = a; p < b; p++) {
            double al = (double)(p - a) / (double)(b - a);
            dg[i] += (1.0 - al) * (1.0 - al);
            up[i] += al * (1.0 - al);
            dg[i + 1] += al * al;
        }
    }
    /* factor keys 1 .. m - 2 */
    for (uint32_t i = 2; i + 1 < m; i++) {
        double c = up[i - 1] / dg[i - 1];
        dg[i] -= c * up[i - 1];
    }
    for (uint32_t l = 0; l < 8; l++) {
        if (!L->keep[(q * 8 + l) * 3 + ch]) continue;
        uint32_t vary = 0;
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t i = 1; i < m && !(vary >> r & 1u); i++)
                if (C->K[(size_t)i * 32 + r * 8 + l] != C->K[r * 8 + l]) vary |= 1u << r;
        if (!vary) continue;
        memset(rhs, 0, (size_t)m * 4 * sizeof(double));
        for (uint32_t i = 0; i + 1 < m; i++) {
            uint32_t a = SUB * key_frame(fr, k, F, i), b = SUB * key_frame(fr, k, F, i + 1);
            const float *ka = C->K + (size_t)i * 32;
            for (uint32_t p = a; p < b; p++) {
                const float *g = grid_rows(L, p, q, ch);
                double al = (double)(p - a) / (double)(b - a), sg = 1.0;
                if (ch == 1) { /* the exact rotation on the key's side */
                    double dot = 0.0;
                    for (uint32_t r = 0; r < 4; r++)
                        dot += (double)g[r * 8 + l] * (double)ka[r * 8 + l];
                    if (dot < 0.0) sg = -1.0;
                }
                for (uint32_t r = 0; r < n; r++) {
                    double v = sg * (double)g[r * 8 + l];
                    rhs[(size_t)i * 4 + r] += (1.0 - al) * v;
                    rhs[(size_t)(i + 1) * 4 + r] += al * v;
                }
            }
        }
        for (uint32_t r = 0; r < n; r++) {
            if (!(vary >> r & 1u)) continue;
            /* the held ends move to the right-hand side */
            double k0 = (double)C->K[r * 8 + l],
                   k1 = (double)C->K[(size_t)(m - 1) * 32 + r * 8 + l];
            rhs[4 + r] -= up[0] * k0;
            rhs[(size_t)(m - 2) * 4 + r] -= up[m - 2] * k1;
            for (uint32_t i = 2; i + 1 < m; i++)
                rhs[(size_t)i * 4 + r] -= up[i - 1] / dg[i - 1] * rhs[(size_t)(i - 1) * 4 + r];
            double x = rhs[(size_t)(m - 2) * 4 + r] / dg[m - 2];
            C->K[(size_t)(m - 2) * 32 + r * 8 + l] = (float)x;
            for (uint32_t i = m - 2; i-- > 1;) {
                x = (rhs[(size_t)i * 4 + r] - up[i] * x) / dg[i];
                C->K[(size_t)i * 32 + r * 8 + l] = (float)x;
            }
        }
        if (ch == 1)
            for (uint32_t i = 1; i + 1 < m; i++) {
                float *o = C->K + (size_t)i * 32 + l;
                double s = 0.0;
                for (uint32_t r = 0; r < 4; r++)
                    s += (double)o[r * 8] * (double)o[r * 8];
                s = s > 0.0 ? 1.0 / sqrt(s) : 0.0;
                for (uint32_t r = 0; r < 4; r++)
                    o[r * 8] = (float)((double)o[r * 8] * s);
            }
    }
}

/* Kept key values of stream (q, ch) at frames fr[0 .. m) into C->K
 * ([key][row][lane]). Uniform streams of grids past 65535 frames pass fr
 * NULL and k. */
static void stream_keys(const pack_lay *L, pack_chooser *C, uint32_t q, uint32_t ch,
                        const uint16_t *fr, uint32_t k, uint32_t m, int derive, int fit) {
    uint32_t F = L->F, n = ch == 1 ? 4 : 3;
    fit = fit && fits_keys(L, k, m);
    for (uint32_t i = 0; i < m; i++) {
        const float *g = grid_rows(L, SUB * key_frame(fr, k, F, i), q, ch);
        float *o = C->K + (size_t)i * 32;
        for (uint32_t r = 0; r < n; r++)
            for (uint32_t l = 0; l < 8; l++) {
                uint32_t c = (uint32_t)first_comp[ch] + r;
                o[r * 8 + l] =
                    L->keep[(q * 8 + l) * 3 + ch] ? g[r * 8 + l] : L->fill[q * 80 + c * 8 + l];
            }
        if (ch == 1 && derive && !fit) {
            derive_key(C, o, derive);
        } else if (ch == 1 && i > 0) { /* sign-continuous per lane */
            const float *pr = o - 32;
            for (uint32_t l = 0; l < 8; l++) {
                float dot = 0.0f;
                for (uint32_t r = 0; r < 4; r++)
                    dot += o[r * 8 + l] * pr[r * 8 + l];
                if (dot < 0.0f)
                    for (uint32_t r = 0; r < 4; r++)
                        o[r * 8 + l] = -o[r * 8 + l];
            }
        }
    }
    if (fit) {
        fit_keys(L, C, q, ch, fr, k, m);
        if (ch == 1 && derive)
            for (uint32_t i = 0; i < m; i++)
                derive_key(C, C->K + (size_t)i * 32, derive);
    }
    /* each row's range over the keys (row_range) */
    for (uint32_t c = 0; c < n * 8; c++) {
        float a = C->K[c], b = a;
        for (uint32_t i = 1; i < m; i++) {
            float v = C->K[(size_t)i * 32 + c];
            if (v < a) a = v;
            if (v > b) b = v;
        }
        C->klo[c] = a, C->khi[c] = b;
    }
}

/* Whether interpolating frames a and b of stream (q, ch) (exact values)
 * keeps every kept lane within budget at the positions between them. */
static int seg_ok(const pack_lay *L, uint32_t q, uint32_t ch, uint32_t a, uint32_t b, double budget,
                  const double *thr) {
    uint32_t n = ch == 1 ? 4 : 3;
    const float *ga = grid_rows(L, SUB * a, q, ch), *gb = grid_rows(L, SUB * b, q, ch);
    lmb_v8f va[4], vb[4], r[4];
    float d[32];
    for (uint32_t m = 0; m < n; m++)
        va[m] = pack_ld(ga + m * 8), vb[m] = pack_ld(gb + m * 8);
    for (uint32_t p = SUB * a + 1; p < SUB * b; p++) {
        float al =
            L->interp == LMB_STEP ? 0.0f : ((float)p / (float)SUB - (float)a) / (float)(b - a);
        pack_interp((int)ch, va, vb, al, r);
        memcpy(d, r, sizeof(lmb_v8f) * n);
        const float *e = grid_rows(L, p, q, ch);
        for (uint32_t l = 0; l < 8; l++)
            if (L->keep[(q * 8 + l) * 3 + ch] && lane_over(L, ch, q * 8 + l, e, d, l, thr, budget))
                return 0;
    }
    return 1;
}

/* Keys of stream (q, ch) chosen greedily: from each key, a far next frame
 * (at most IRREGULAR_GAP away) whose interpolation reproduces every frame
 * between within budget: the gap doubles while it passes, then a binary
 * search between the last passing gap and the first failing one (a gap
 * costs its length to check: a scan of every gap would cost its square).
 * Returns the key count. */
#define IRREGULAR_GAP 255u
/* The irregular candidates: keys chosen with these shares of the budget
 * for their interpolation (the rest for quantisation); the last is tried
 * with fitted keys only (fitted chords err about half as much as the ones
 * it was chosen by). */
#define IRREGULAR_CANDIDATES 3u
static const double irregular_share[IRREGULAR_CANDIDATES] = {0.5, 0.25, 1.0};
static uint32_t irregular_keys(const pack_lay *L, uint32_t q, uint32_t ch, double budget,
                               uint16_t *fr) {
    uint32_t F = L->F, m = 0, a = 0;
    double thr[8];
    if (ch == 1) rotation_limits(L, q, budget, thr);
    fr[m++] = 0;
    while (a < F - 1) {
        uint32_t last = F - 1 - a < IRREGULAR_GAP ? F - 1 - a : IRREGULAR_GAP;
        uint32_t ok = 1, bad = last + 1; /* gaps: ok passes, bad fails (or is past the end) */
        for (uint32_t g = 2; g <= last; g = g * 2 < last || g == last ? g * 2 : last) {
            if (!seg_ok(L, q, ch, a, a + g, budget, thr)) {
                bad = g;
                break;
            }
            ok = g;
        }
        while (bad - ok > 1) {
            uint32_t g = ok + (bad - ok) / 2;
            if (seg_ok(L, q, ch, a, a + g, budget, thr))
                ok = g;
            else
                bad = g;
        }
        uint32_t best = a + ok;
        fr[m++] = (uint16_t)best;
        a = best;
    }
    return m;
}

/* Smallest and largest key value of row r, lane l (stream_keys keeps them). */
static void row_range(const pack_chooser *C, uint32_t r, uint32_t l, float *lo, float *hi) {
    *lo = C->klo[r * 8 + l], *hi = C->khi[r * 8 + l];
}

/* Encodes C->K (m keys) of stream (q, ch) with the given kinds (V rows: with
 * the reduction words red[r]) at the data / range cursors. Lanes whose track
 * the clip drops (or that have no joint) hold their rest value in K
 * (stream_keys): a range of scale 0, and no bits in quantized rows (the
 * stream's skip mask). A lane of width 0 in a V row holds the middle of its
 * range, as CONST rows do. */
static void stream_encode(pack_lay *L, const pack_chooser *C, uint32_t q, uint32_t ch, uint32_t m,
                          uint32_t n, uint32_t k, const uint8_t *kind, const uint32_t *red,
                          lmb_pstream *s) {
    s->data = C->data, s->range = C->range, s->keys = m, s->step = (uint16_t)k;
    s->kf = 0;
    if (k == 0) { /* irregular keys: their frames (C->kfc) at the key frame cursor */
        s->kf = C->kf;
        memcpy(L->kf + C->kf, C->kfc, (size_t)m * sizeof(uint16_t));
    }
    memcpy(s->kind, kind, 4);
    if (n == 3) s->kind[3] = LMB_PK_SKIP;
    uint32_t skip = 0;
    for (uint32_t l = 0; l < 8; l++)
        skip |= (uint32_t)!L->keep[(q * 8 + l) * 3 + ch] << l;
    s->skip = (uint8_t)skip;
    float *rg = L->rg + s->range;
    uint32_t rec = 0;
    for (uint32_t r = 0; r < n; r++) {
        if (kind[r] == LMB_PK_SKIP || kind[r] == LMB_PK_DERIVE || kind[r] == LMB_PK_SAME) continue;
        if (kind[r] == LMB_PK_DERIVE_ANY) {
            uint32_t word = 0;
            for (uint32_t l = 0; l < 8; l++)
                word |= C->didx[l] << (2 * l);
            *rg++ = (float)word;
            continue;
        }
        float lo[8], hi[8];
        for (uint32_t l = 0; l < 8; l++)
            row_range(C, (uint32_t)r, l, lo + l, hi + l);
        if (kind[r] == LMB_PK_CONST) {
            for (uint32_t l = 0; l < 8; l++)
                rg[l] = lo[l] == hi[l] ? lo[l] : 0.5f * (lo[l] + hi[l]);
            rg += 8;
            continue;
        }
        if (kind[r] == LMB_PK_F32) {
            rec += 32;
            continue;
        }
        uint32_t w[8];
        if (lmb_pk_var(kind[r])) {
            rg[16] = (float)red[r];
            lmb_pk_var_widths(kind[r], skip, rg[16], w);
        } else {
            for (uint32_t l = 0; l < 8; l++)
                w[l] = kind[r] - 16u;
        }
        for (uint32_t l = 0; l < 8; l++) {
            if (w[l] == 0 && !(skip >> l & 1u)) { /* a kept lane of width 0 */
                rg[l] = lo[l] == hi[l] ? lo[l] : 0.5f * (lo[l] + hi[l]);
                rg[8 + l] = 0.0f;
                continue;
            }
            float levels = (float)((1u << w[l]) - 1u);
            rg[l] = lo[l];
            rg[8 + l] = hi[l] > lo[l] ? (hi[l] - lo[l]) / levels : 0.0f;
        }
        rec += lmb_pk_row_bytes(kind[r], skip, rg);
        rg += lmb_pk_range_floats(kind[r]);
    }
    s->rec = (uint8_t)rec;
    /* the records: rows one after the other, per key (4 bytes of padding
     * follow the data: b-bit rows are read four bytes at a time) */
    const float *rr = L->rg + s->range;
    uint32_t off = 0;
    for (uint32_t r = 0; r < n; r++) {
        uint8_t kd = kind[r];
        if (kd == LMB_PK_SKIP || kd == LMB_PK_DERIVE || kd == LMB_PK_SAME) continue;
        if (kd == LMB_PK_CONST || kd == LMB_PK_DERIVE_ANY) {
            rr += lmb_pk_range_floats(kd);
            continue;
        }
        uint32_t rb = lmb_pk_row_bytes(kd, skip, rr), w[8];
        if (lmb_pk_var(kd)) {
            lmb_pk_var_widths(kd, skip, rr[16], w);
        } else {
            for (uint32_t l = 0; l < 8; l++)
                w[l] = skip >> l & 1u ? 0u : kd - 16u;
        }
        for (uint32_t i = 0; i < m; i++) {
            uint8_t *dst = L->data + s->data + (size_t)i * rec + off;
            const float *v = C->K + (size_t)i * 32 + r * 8;
            if (kd == LMB_PK_F32) {
                memcpy(dst, v, 32);
                continue;
            }
            uint32_t qv[8];
            for (uint32_t l = 0; l < 8; l++) {
                qv[l] = 0;
                if (!w[l]) continue;
                float top = (float)((1u << w[l]) - 1u);
                float sc = rr[8 + l], x = sc > 0.0f ? (v[l] - rr[l]) / sc : 0.0f;
                x = x > 0.0f ? (x < top ? x : top) : 0.0f;
                qv[l] = (uint32_t)lrintf(x);
            }
            if (!skip && (kd == LMB_PK_U8 || kd == LMB_PK_U16)) { /* read as native u8 / u16 */
                for (uint32_t l = 0; l < 8; l++) {
                    uint16_t h = (uint16_t)qv[l];
                    if (kd == LMB_PK_U8)
                        dst[l] = (uint8_t)h;
                    else
                        memcpy(dst + l * 2, &h, 2);
                }
                continue;
            }
            /* the lanes' bits one after the other, low bit first: at most
             * 16 bytes, gathered in two 64-bit words */
            uint64_t word[2] = {0, 0};
            uint32_t at = 0;
            for (uint32_t l = 0; l < 8; l++) {
                if (!w[l]) continue;
                if (at < 64) {
                    word[0] |= (uint64_t)qv[l] << at;
                    if (at + w[l] > 64) word[1] |= (uint64_t)qv[l] >> (64 - at);
                } else {
                    word[1] |= (uint64_t)qv[l] << (at - 64);
                }
                at += w[l];
            }
            for (uint32_t y = 0; y < rb; y++)
                dst[y] = (uint8_t)(word[y >> 3] >> ((y & 7u) * 8u));
        }
        off += rb;
        rr += lmb_pk_range_floats(kd);
    }
}

/* One check of stream_fails (below), shared by its runs of positions. */
typedef struct fails_job {
    const pack_lay *L;
    const lmb_pstream *s;
    uint32_t q, ch, kept, enough, positions, per;
    double budget, thr[8];
    uint32_t found;                          /* lanes any run found failing (atomic) */
    uint32_t fail[LMB_POOL_MAX_THREADS + 1]; /* per worker */
} fails_job;

/* Positions [item per, (item + 1) per) of a fails_job: the lanes failing
 * there into the worker's mask, until the lanes found by every run reach
 * `enough`. */
static void fails_item(void *vjob, uint32_t item, uint32_t worker) {
    fails_job *f = (fails_job *)vjob;
    const pack_lay *L = f->L;
    /* the decoder's key cache (chunk layout: keys a and b of the 10 rows)
     * decodes each key pair once, not at each of its SUB positions */
    float cache[160] __attribute__((aligned(32))), out[80];
    uint32_t tag = 0, fail = 0;
    const float *d = out + first_comp[f->ch] * 8;
    uint32_t p0 = item * f->per, p1 = p0 + f->per < f->positions ? p0 + f->per : f->positions;
    for (uint32_t p = p0; p < p1; p++) {
        if ((fail | __atomic_load_n(&f->found, __ATOMIC_RELAXED)) >= f->enough) break;
        pack_cached_stream(&L->pk, f->s, (int)f->ch, (float)p / (float)SUB, cache, &tag, out, 8);
        const float *e = grid_rows(L, p, f->q, f->ch);
        uint32_t now = 0;
        for (uint32_t l = 0; l < 8; l++)
            if ((f->kept & ~fail) >> l & 1u &&
                lane_over(L, f->ch, f->q * 8 + l, e, d, l, f->thr, f->budget))
                now |= 1u << l;
        if (now) {
            fail |= now;
            __atomic_fetch_or(&f->found, now, __ATOMIC_RELAXED);
        }
    }
    f->fail[worker] |= fail;
}

/* The kept lanes of candidate stream s (chunk q, channel ch) whose decoded
 * values err by more than budget at some grid position; with `first`, any
 * nonzero subset of them once one is found. The search ends once every
 * kept lane fails, so the result is the same on any number of workers
 * (L->pool shares out long grids' positions in runs). */
static uint32_t stream_fails(pack_lay *L, const pack_chooser *C, uint32_t q, uint32_t ch,
                             const lmb_pstream *s, double budget, int first) {
    fails_job f;
    f.L = L, f.s = s, f.q = q, f.ch = ch, f.budget = budget, f.found = 0;
    if (ch == 1) rotation_limits(L, q, budget, f.thr);
    f.kept = 0;
    for (uint32_t l = 0; l < 8; l++)
        f.kept |= (uint32_t)L->keep[(q * 8 + l) * 3 + ch] << l;
    /* fail is a subset of kept: fail < kept until every kept lane fails */
    f.enough = first && f.kept ? 1u : f.kept;
    f.positions = SUB * (L->F - 1) + 1;
    uint32_t workers = L->pool && !C->alone ? L->workers : 1u;
    memset(f.fail, 0, (size_t)workers * sizeof(uint32_t));
    /* runs of at least FAILS_RUN positions, about 2 per worker */
    uint32_t want = workers * 2u, per = (f.positions + want - 1) / want;
    f.per = per < FAILS_RUN ? FAILS_RUN : per;
    uint32_t items = (f.positions + f.per - 1) / f.per;
    if (workers > 1 && items > 1)
        lmb_pool_run_workers(L->pool, items, L->workers, fails_item, &f);
    else
        for (uint32_t i = 0; i < items; i++)
            fails_item(&f, i, 0);
    uint32_t fail = 0;
    for (uint32_t w = 0; w < workers; w++)
        fail |= f.fail[w];
    return fail;
}

/* Final row kinds (and V rows' reduction words) of quantized rows given as
 * per-lane widths lw[r] (kind[r] quantized: any Q kind marks the row): a
 * row whose kept lanes share one width is Q(b) (Q(16) once a lane needs
 * 16), one whose widths are all 0 CONST, else V(b) of its widest lane when
 * that takes fewer bytes over m keys (lanes more than 7 bits narrower take
 * b - 7). lw is updated to the widths the rows get. */
static void rows_final(const uint8_t *kind, uint8_t (*lw)[8], uint32_t n, uint32_t kept, uint32_t m,
                       uint8_t *out, uint32_t *red) {
    uint32_t stored = (uint32_t)__builtin_popcount(kept);
    for (uint32_t r = 0; r < n; r++) {
        out[r] = kind[r], red[r] = 0;
        if (!lmb_pk_quantized(kind[r])) continue;
        uint32_t b = 0, same = 1, sum = 0, first = 99;
        for (uint32_t l = 0; l < 8; l++) {
            if (!(kept >> l & 1u)) continue;
            if (lw[r][l] > b) b = lw[r][l];
            if (first == 99) first = lw[r][l];
            same &= lw[r][l] == first;
        }
        if (b == 0) {
            out[r] = LMB_PK_CONST;
            continue;
        }
        if (b >= 16 || same) {
            out[r] = (uint8_t)LMB_PK_Q(b >= 16 ? 16 : b);
            for (uint32_t l = 0; l < 8; l++)
                lw[r][l] = (uint8_t)(kept >> l & 1u ? (b >= 16 ? 16 : b) : 0);
            continue;
        }
        uint32_t word = 0;
        for (uint32_t l = 0; l < 8; l++) {
            if (!(kept >> l & 1u)) continue;
            uint32_t d = b - lw[r][l];
            if (d > 7) d = 7;
            word |= d << (3 * l);
            sum += b - d;
        }
        /* V: the bits its lanes take plus 4 bytes of width word, against Q(b) */
        if ((uint64_t)m * ((sum + 7) / 8) + 4 < (uint64_t)m * ((stored * b + 7) / 8)) {
            out[r] = (uint8_t)LMB_PK_V(b);
            red[r] = word;
            for (uint32_t l = 0; l < 8; l++)
                if (kept >> l & 1u) lw[r][l] = (uint8_t)(b - (word >> (3 * l) & 7u));
        } else {
            out[r] = (uint8_t)LMB_PK_Q(b);
            for (uint32_t l = 0; l < 8; l++)
                lw[r][l] = (uint8_t)(kept >> l & 1u ? b : 0);
        }
    }
}

static size_t stream_cost(const lmb_pstream *s, uint32_t n) {
    size_t floats = s->step == 0 ? (size_t)s->keys / 2u + 1u : 0u; /* 2 bytes per key frame */
    for (uint32_t r = 0; r < n; r++)
        floats += lmb_pk_range_floats(s->kind[r]);
    return (size_t)s->keys * s->rec + floats * 4;
}

/* Chooses and encodes stream (q, ch) at the cursors with budget `budget`. */
static void stream_choose(pack_lay *L, pack_chooser *C, uint32_t q, uint32_t ch, double budget) {
    lmb_pstream *out = L->st + q * 3 + ch;
    uint32_t n = ch == 1 ? 4u : 3u, any = 0;
    for (uint32_t l = 0; l < 8; l++)
        any |= L->keep[(q * 8 + l) * 3 + ch];
    if (!any) {
        memset(out, 0, sizeof *out);
        out->keys = 1, out->step = 1;
        out->data = C->data, out->range = C->range;
        return;
    }
    uint8_t best_kind[4] = {0, 0, 0, 0};
    uint32_t best_k = 1, best_m = 0, best_red[4] = {0, 0, 0, 0}, kept = 0;
    for (uint32_t l = 0; l < 8; l++)
        kept |= (uint32_t)L->keep[(q * 8 + l) * 3 + ch] << l;
    size_t best_cost = (size_t)-1;
    int best_dv = 0, best_fit = 0;
    int irregular = L->F >= 3 && L->F <= 65536;
    /* rotations: first with one component per joint derived from the
     * other three, the one farthest from 0 over the grid (three rows and
     * a word; skipped when that is w for every joint), then with w derived,
     * then all four stored */
    int other = 0;
    for (uint32_t l = 0; l < 8; l++) {
        C->didx[l] = 3;
        if (ch != 1 || !L->keep[(q * 8 + l) * 3 + 1]) continue;
        double low[4] = {(double)INFINITY, (double)INFINITY, (double)INFINITY, (double)INFINITY};
        for (uint32_t f = 0; f < L->F; f++) {
            const float *g = grid_rows(L, SUB * f, q, 1);
            for (uint32_t c = 0; c < 4; c++) {
                double a = fabs((double)g[c * 8 + l]);
                if (a < low[c]) low[c] = a;
            }
        }
        for (uint32_t c = 0; c < 3; c++)
            if (low[c] > low[C->didx[l]]) C->didx[l] = c;
        other |= C->didx[l] != 3;
    }
    /* translation and scale rows y and z equal to row x in every lane (the
     * lanes the clip drops: their rest values) at every grid sample: SAME */
    uint32_t same = ch == 1 ? 0u : 6u;
    for (uint32_t p = 0; same && p < SUB * (L->F - 1) + 1; p++) {
        const float *g = grid_rows(L, p, q, ch);
        for (uint32_t l = 0; l < 8; l++) {
            uint32_t j = q * 8 + l, c = (uint32_t)first_comp[ch];
            const float *f = L->fill + q * 80 + l;
            int kept_lane = L->keep[j * 3 + ch];
            float x = kept_lane ? g[l] : f[c * 8];
            for (uint32_t r = 1; r < 3; r++)
                if ((kept_lane ? g[r * 8 + l] : f[(c + r) * 8]) != x) same &= ~(1u << r);
        }
    }
    /* the irregular candidates' keys (irregular_share) depend on the grid
     * alone: found once for every dv */
    uint32_t mi[IRREGULAR_CANDIDATES] = {0, 0, 0};
    if (irregular)
        for (uint32_t h = 0; h < IRREGULAR_CANDIDATES; h++)
            if (h < IRREGULAR_CANDIDATES - 1 || (!L->source_keys && L->interp == LMB_LINEAR))
                mi[h] = irregular_keys(L, q, ch, budget * irregular_share[h], C->kfi + h * L->Fmax);
    for (int dv = ch == 1 ? 2 : 0; dv >= 0; dv--) {
        if (dv == 2 && !other) continue;
        int tries = 0;
        /* candidates: one key every k frames (the largest feasible steps), then
         * keys chosen per stream with shares of the budget for their
         * interpolation (irregular_share: the rest for quantisation), unless
         * they keep more than 9 in 10 frames */
        int counted = 0; /* this candidate's keys as sampled passed */
        /* its keys as sampled failed, but within 2.5 times the budget: a
         * fitted chord errs about half as much as a chord through the
         * source's values at best, so further off the fitted variant is
         * not tried */
        int near = 0;
        int passed = 0; /* some candidate passed (keys as sampled or fitted) */
        for (size_t ci = 0; ci < 2 * (STEP_COUNT + IRREGULAR_CANDIDATES); ci++) {
            /* each candidate's keys as sampled (fit 0), then fitted (fit 1) */
            const size_t si = ci / 2;
            const int fit = (int)(ci & 1u);
            uint32_t k, m;
            if (!fit) counted = near = 0;
            if (si < STEP_COUNT) {
                k = step_list[si];
                if ((!fit && tries >= STEP_TRIES) || (k > 1 && (L->F < 2 || k > L->F - 1)))
                    continue;
                m = L->F > 1 ? (L->F - 2) / k + 2 : 1;
                if (fit && !fitted_try(L, k, m, counted, near, passed)) continue;
                stream_keys(L, C, q, ch, NULL, k, m, dv, fit);
            } else {
                if (!irregular) break;
                k = 0;
                const uint32_t h = (uint32_t)(si - STEP_COUNT);
                const int fitted_only = h == IRREGULAR_CANDIDATES - 1;
                m = mi[h];
                if (fitted_only && (!fit || !m)) continue;
                if ((uint64_t)m * 10 > (uint64_t)L->F * 9) continue; /* hardly fewer keys */
                if (fit && !(fitted_only ? fits_keys(L, k, m)
                                         : fitted_try(L, k, m, counted, near, passed)))
                    continue;
                memcpy(C->kfc, C->kfi + h * L->Fmax, (size_t)m * sizeof(uint16_t));
                stream_keys(L, C, q, ch, C->kfc, 0, m, dv, fit);
            }
            /* rows: exactly constant rows CONST, else raw floats first; then the
             * quantised start: per row and lane the fewest bits whose step
             * keeps the lane's error within half the budget (CONST rows when
             * within a tenth) */
            uint8_t kind[4] = {0, 0, 0, 0}, init[4] = {0, 0, 0, 0}, fk[4];
            uint8_t lw[4][8], lw0[4][8];
            uint32_t red[4] = {0, 0, 0, 0};
            double span[4] = {0, 0, 0, 0}; /* per row: the largest range x weight / budget */
            double lspan[4][8];            /* per row and lane */
            memset(lw0, 0, sizeof lw0);
            for (uint32_t r = 0; r < n; r++) {
                for (uint32_t l = 0; l < 8; l++)
                    lspan[r][l] = 0.0;
                if (r == 3 && dv) {
                    kind[r] = init[r] = dv == 2 ? LMB_PK_DERIVE_ANY : LMB_PK_DERIVE;
                    continue;
                }
                if (same >> r & 1u) {
                    kind[r] = init[r] = LMB_PK_SAME;
                    continue;
                }
                int exact = 1;
                for (uint32_t l = 0; l < 8; l++) {
                    float lo, hi;
                    row_range(C, (uint32_t)r, l, &lo, &hi);
                    uint32_t j = q * 8 + l;
                    if (!L->keep[j * 3 + ch]) continue;
                    if (hi != lo) exact = 0;
                    double v = (double)(hi - lo) * joint_weight(L, ch, j) / budget;
                    lspan[r][l] = v;
                    if (v > span[r]) span[r] = v;
                }
                kind[r] = exact ? LMB_PK_CONST : LMB_PK_F32;
                if (exact || 0.5 * span[r] <= 0.1) {
                    init[r] = LMB_PK_CONST;
                } else {
                    init[r] = (uint8_t)LMB_PK_Q(1);
                    for (uint32_t l = 0; l < 8; l++) {
                        uint32_t b = 0;
                        if (lspan[r][l] > 0.0) {
                            b = 1;
                            while (b < 16 && lspan[r][l] / (double)((1u << b) - 1u) > 0.5)
                                b++;
                        }
                        lw0[r][l] = (uint8_t)b;
                    }
                }
            }
            lmb_pstream s;
            stream_encode(L, C, q, ch, m, n, k, kind, red, &s);
            if (stream_fails(L, C, q, ch, &s, budget, 1)) {
                if (!fit && !passed && fits_keys(L, k, m))
                    near = !stream_fails(L, C, q, ch, &s, 2.5 * budget, 1);
                continue;
            }
            if (k && !fit) tries++; /* passes of keys as sampled count as tries */
            counted = passed = 1;   /* (counted: read by this candidate's fitted variant) */
            if (stream_cost(&s, n) < best_cost) {
                best_cost = stream_cost(&s, n), best_k = k, best_dv = dv, best_m = m;
                best_fit = fit;
                memcpy(best_kind, kind, 4);
                memcpy(best_red, red, sizeof red);
                if (!k) memcpy(C->kfb, C->kfc, (size_t)m * sizeof(uint16_t));
            }
            /* quantise: add a bit to each failing lane's coarsest row until
             * every lane fits (lanes are joints: each fails on its own) */
            memcpy(kind, init, 4);
            memcpy(lw, lw0, sizeof lw);
            for (;;) {
                rows_final(kind, lw, n, kept, m, fk, red);
                stream_encode(L, C, q, ch, m, n, k, fk, red, &s);
                if (stream_cost(&s, n) >= best_cost) break;
                uint32_t fail = stream_fails(L, C, q, ch, &s, budget, 0);
                if (!fail) {
                    best_cost = stream_cost(&s, n), best_k = k, best_dv = dv, best_m = m;
                    best_fit = fit;
                    memcpy(best_kind, fk, 4);
                    memcpy(best_red, red, sizeof red);
                    if (!k) memcpy(C->kfb, C->kfc, (size_t)m * sizeof(uint16_t));
                    break;
                }
                int grew = 0;
                for (uint32_t l = 0; l < 8; l++) {
                    if (!(fail >> l & 1u)) continue;
                    int pick = -1;
                    double most = 0.0;
                    for (uint32_t r = 0; r < n; r++) {
                        uint8_t kd = kind[r];
                        if (kd == LMB_PK_F32 || kd == LMB_PK_DERIVE || kd == LMB_PK_DERIVE_ANY ||
                            kd == LMB_PK_SAME)
                            continue;
                        double v = kd == LMB_PK_CONST || lw[r][l] == 0
                                       ? 0.5 * lspan[r][l]
                                       : lspan[r][l] / (double)((1u << lw[r][l]) - 1u);
                        if (v > most) most = v, pick = (int)r;
                    }
                    if (pick < 0) continue;
                    grew = 1;
                    if (kind[pick] == LMB_PK_CONST) { /* quantized, other lanes at width 0 */
                        kind[pick] = (uint8_t)LMB_PK_Q(1);
                        memset(lw[pick], 0, 8);
                    }
                    if (lw[pick][l] < 16) {
                        lw[pick][l]++;
                    } else {
                        kind[pick] = LMB_PK_F32;
                    }
                }
                if (!grew) break;
            }
        }
    }
    if (best_cost == (size_t)-1) { /* nothing fits: raw floats at every frame */
        best_k = 1, best_dv = 0, best_m = L->F;
        for (uint32_t r = 0; r < n; r++)
            best_kind[r] = LMB_PK_F32;
    }
    uint32_t m = best_m;
    if (best_k == 0) memcpy(C->kfc, C->kfb, (size_t)m * sizeof(uint16_t));
    stream_keys(L, C, q, ch, best_k ? NULL : C->kfc, best_k, m, best_dv, best_fit);
    stream_encode(L, C, q, ch, m, n, best_k, best_kind, best_red, out);
    if (best_k == 0) C->kf += m;
    for (uint32_t r = 0; r < n; r++) {
        uint8_t kd = out->kind[r];
        C->range += lmb_pk_range_floats(kd);
    }
    C->data += out->keys * out->rec;
}

/* Whether (joint, channel) stays within budget at the rest pose everywhere. */
static int rest_fits(const pack_lay *L, uint32_t j, uint32_t ch, double budget) {
    uint32_t q = j / 8, l = j % 8;
    const float *f = L->fill + q * 80 + first_comp[ch] * 8;
    double thr[8];
    if (ch == 1) rotation_limits(L, q, 0.25 * budget, thr);
    for (uint32_t p = 0; p < SUB * (L->F - 1) + 1; p++) {
        const float *e = grid_rows(L, p, q, ch);
        if (lane_over(L, ch, j, e, f, l, thr, 0.25 * budget)) return 0;
    }
    return 1;
}

/* One choice of every stream (choose_all), shared by the workers. */
typedef struct choose_job {
    pack_lay *L;
    double budget;
    int alone; /* the workers' checks stay on their threads */
} choose_job;

/* Stream i of choose_all, into its own slot of the data, ranges and key
 * frames (they hold every stream at its largest). */
static void choose_item(void *vjob, uint32_t i, uint32_t worker) {
    const choose_job *cj = (const choose_job *)vjob;
    pack_lay *L = cj->L;
    pack_chooser *C = L->cs + worker;
    C->alone = cj->alone;
    C->data = (uint32_t)(i * slot_bytes(L->Fmax)), C->range = i * 68, C->kf = i * L->Fmax;
    stream_choose(L, C, i / 3, i % 3, cj->budget * L->mult[i]);
}

/* Chooses every stream at budget x its multiple: each into a slot of its
 * own (the streams shared out among the pool's workers), then moved in
 * order behind one another, so the packing is the same bytes on any number
 * of threads. */
static void choose_all(pack_lay *L, double budget) {
    L->range_floats = 0, L->data_bytes = 0, L->kept = 0, L->kf_count = 0;
    for (uint32_t j = 0; j < L->Q * 8; j++)
        for (uint32_t ch = 0; ch < 3; ch++) {
            uint8_t k =
                L->has[j * 3 + ch] && !rest_fits(L, j, ch, budget * L->mult[j / 8 * 3 + ch]);
            L->keep[j * 3 + ch] = k;
            L->kept += k;
        }
    uint32_t n = L->Q * 3;
    choose_job cj = {L, budget, 1};
    if (L->pool && L->workers > 1 && n > 1) {
        lmb_pool_run_workers(L->pool, n, L->workers, choose_item, &cj);
    } else {
        cj.alone = 0; /* one worker: its checks may use the pool */
        for (uint32_t i = 0; i < n; i++)
            choose_item(&cj, i, 0);
    }
    /* the slots behind one another (each moves down or stays) */
    uint32_t d = 0, r = 0, k = 0;
    for (uint32_t i = 0; i < n; i++) {
        lmb_pstream *st = L->st + i;
        uint32_t bytes = st->keys * st->rec, rf = 0, kn = st->step == 0 ? st->keys : 0u;
        for (uint32_t m = 0; m < 4; m++)
            rf += lmb_pk_range_floats(st->kind[m]);
        memmove(L->data + d, L->data + st->data, bytes);
        memmove(L->rg + r, L->rg + st->range, (size_t)rf * sizeof(float));
        if (kn) memmove(L->kf + k, L->kf + st->kf, (size_t)kn * sizeof(uint16_t));
        st->data = d, st->range = r;
        if (kn) st->kf = k;
        d += bytes, r += rf, k += kn;
    }
    L->data_bytes = d, L->range_floats = r, L->kf_count = k;
    L->pk.range_floats = L->range_floats, L->pk.data_bytes = L->data_bytes;
    L->pk.keyframe_count = L->kf_count;
}

/* Chooses stream i again at budget x its multiple, the other streams kept:
 * what follows it in the data, ranges and key frames moves to the ends of
 * their arrays while it is chosen (each array holds every stream at its
 * largest), then back behind it, and the streams after it are offset. */
static void rechoose(pack_lay *L, uint32_t i, double budget) {
    uint32_t q = i / 3, ch = i % 3, n = L->Q * 3;
    lmb_pstream *st = L->st + i;
    uint32_t kf0 = 0;
    for (uint32_t k = 0; k < i; k++)
        kf0 += L->st[k].step == 0 ? L->st[k].keys : 0u;
    uint32_t rf = 0;
    for (uint32_t r = 0; r < 4; r++)
        rf += lmb_pk_range_floats(st->kind[r]);
    size_t d0 = st->data, d1 = d0 + (size_t)st->keys * st->rec, r0 = st->range, r1 = r0 + rf;
    size_t k1 = kf0 + (st->step == 0 ? st->keys : 0u);
    size_t dcap = (size_t)n * slot_bytes(L->Fmax), rcap = (size_t)n * 68,
           kcap = (size_t)n * L->Fmax;
    size_t dt = L->data_bytes - d1, rt = L->range_floats - r1, kt = L->kf_count - k1;
    memmove(L->data + dcap - dt, L->data + d1, dt);
    memmove(L->rg + rcap - rt, L->rg + r1, rt * sizeof(float));
    memmove(L->kf + kcap - kt, L->kf + k1, kt * sizeof(uint16_t));
    L->data_bytes = (uint32_t)d0, L->range_floats = (uint32_t)r0, L->kf_count = (uint32_t)kf0;
    double b = budget * L->mult[i];
    for (uint32_t l = 0; l < 8; l++) {
        uint32_t j = q * 8 + l;
        L->kept -= L->keep[j * 3 + ch];
        L->keep[j * 3 + ch] = L->has[j * 3 + ch] && !rest_fits(L, j, ch, b);
        L->kept += L->keep[j * 3 + ch];
    }
    pack_chooser *C = L->cs;
    C->alone = 0, C->data = L->data_bytes, C->range = L->range_floats, C->kf = L->kf_count;
    stream_choose(L, C, q, ch, b);
    L->data_bytes = C->data, L->range_floats = C->range, L->kf_count = C->kf;
    int64_t dd = (int64_t)L->data_bytes - (int64_t)d1, dr = (int64_t)L->range_floats - (int64_t)r1,
            dk = (int64_t)L->kf_count - (int64_t)k1;
    memmove(L->data + L->data_bytes, L->data + dcap - dt, dt);
    memmove(L->rg + L->range_floats, L->rg + rcap - rt, rt * sizeof(float));
    memmove(L->kf + L->kf_count, L->kf + kcap - kt, kt * sizeof(uint16_t));
    for (uint32_t k = i + 1; k < n; k++) {
        lmb_pstream *o = L->st + k;
        o->data = (uint32_t)((int64_t)o->data + dd);
        o->range = (uint32_t)((int64_t)o->range + dr);
        if (o->step == 0) o->kf = (uint32_t)((int64_t)o->kf + dk);
    }
    L->data_bytes = (uint32_t)((int64_t)L->data_bytes + (int64_t)dt);
    L->range_floats = (uint32_t)((int64_t)L->range_floats + (int64_t)rt);
    L->kf_count = (uint32_t)((int64_t)L->kf_count + (int64_t)kt);
    L->pk.range_floats = L->range_floats, L->pk.data_bytes = L->data_bytes;
    L->pk.keyframe_count = L->kf_count;
}

/* ---- the job --------------------------------------------------------------- */

/* Array sizes of the packed clip lmb_pack_write lays out for the current choice. */
static lmb_packed_sizes packed_sizes(const pack_lay *L) {
    lmb_packed_sizes z = {L->node_tracks,      L->node_times, L->node_values,  L->Q,         L->F,
                          L->pk.times != NULL, L->kf_count,   L->range_floats, L->data_bytes};
    return z;
}

static size_t packed_bytes(const pack_lay *L) {
    lmb_packed_sizes z = packed_sizes(L);
    return lmb_packed_clip_bytes(&z);
}

/* Marks for a measure of what chunk q's streams move: its joints and their
 * descendants measured (2), their ancestors computed (1). */
static void mark_subtrees(pack_lay *L, const lmb_skeleton *sk, uint32_t q) {
    uint32_t J = sk->joint_count;
    uint8_t *mk = L->marks, *qm = L->marks + (L->Q * 8 > J ? L->Q * 8 : J);
    for (uint32_t j = 0; j < J; j++) {
        uint32_t p = sk->parent[j];
        mk[j] = j / 8 == q || (p != LMB_NO_PARENT && mk[p] == 2) ? 2 : 0;
    }
    for (uint32_t j = J; j-- > 0;) {
        uint32_t p = sk->parent[j];
        if (mk[j] && p != LMB_NO_PARENT && !mk[p]) mk[p] = 1;
    }
    memset(qm, 0, L->Q);
    for (uint32_t j = 0; j < J && j / 8 < L->Q; j++)
        qm[j / 8] |= mk[j] != 0;
    L->mark = mk, L->qmark = qm;
}

/* Grows each stream's budget by the slack its joints leave: the chain errors
 * of the last measure (at best the tolerance) tell, per stream, how far the
 * largest error in the subtrees of its joints stays under the tolerance;
 * its budget grows by that ratio (at most RELAX_MAX), all streams at once,
 * and the skeleton is measured again. A round that passes the tolerance
 * with fewer bytes is kept; one that does not is retried with the square
 * root of each ratio. The uniform budget search before cannot do this: the
 * chain with the least slack stops it for every joint. */
#define RELAX_ROUNDS 4
/* Joint samples the stream-by-stream tries may measure in all. */
#define TRY_WORK 1e7
/* ... and at the sample times only (long clips) */
#define TRY_WORK_FAST 6e7
#define RELAX_MAX 4.0
static void relax(const lmb_clip *src, const lmb_skeleton *sk, lmb_pack_job *job, pack_lay *L,
                  double budget, double tol) {
    uint32_t J = sk->joint_count, n = L->Q * 3;
    uint32_t all = L->Q * 8 > J ? L->Q * 8 : J;
    double *was = L->mult + n, *sub = L->chain + all, *jkept = L->jerr + all;
    size_t best = packed_bytes(L);
    lmb_pack_stats kept = job->stats;
    double power = 1.0;
    for (int round = 0; round < RELAX_ROUNDS; round++) {
        /* the largest error in each joint's subtree (parents come first) */
        for (uint32_t j = 0; j < J; j++)
            sub[j] = L->jerr[j];
        for (uint32_t j = J; j-- > 0;) {
            uint32_t p = sk->parent[j];
            if (p != LMB_NO_PARENT && sub[j] > sub[p]) sub[p] = sub[j];
        }
        memcpy(was, L->mult, (size_t)n * sizeof(double));
        memcpy(jkept, L->jerr, (size_t)J * sizeof(double));
        int grew = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t q = i / 3, ch = i % 3;
            double m = 0.0;
            for (uint32_t l = 0; l < 8; l++) {
                uint32_t j = q * 8 + l;
                if (j < J && L->has[j * 3 + ch] && sub[j] > m) m = sub[j];
            }
            double r = m > 0.0 ? 0.9 * tol / m : RELAX_MAX;
            r = pow(r < RELAX_MAX ? r : RELAX_MAX, power);
            if (r > 1.05) L->mult[i] *= r, grew = 1;
        }
        if (!grew) break;
        choose_all(L, budget);
        measure(src, sk, job->distance, L, pose_packed, sk, &job->stats, &L->pk);
        size_t bytes = packed_bytes(L);
        if (job->stats.max_distance <= tol && bytes && bytes < best) {
            best = bytes, kept = job->stats;
            continue;
        }
        /* back to the kept choice and its errors */
        memcpy(L->mult, was, (size_t)n * sizeof(double));
        memcpy(L->jerr, jkept, (size_t)J * sizeof(double));
        power *= 0.5;
        choose_all(L, budget);
    }
    /* then stream by stream, the largest first: its budget doubled (then
     * x1.4), kept when the skeleton stays within the tolerance in fewer
     * bytes. Each try measures the whole skeleton: tries stop after about
     * TRY_WORK joint samples measured. A clip too long for every stream's
     * tries (dense long clips) measures them at its sample times only, a
     * quarter of the points, against the tolerance scaled by how much the
     * quarter points add on the packing so far; one full measure at the end
     * confirms the tries, else the packing before them stays. */
    uint32_t ns = SUB * (L->F - 1) + 1, *order = L->order, keyed = 0, pts = SUB;
    for (uint32_t i = 0; i < n; i++)
        keyed += L->st[i].keys * L->st[i].rec != 0;
    double work = (double)ns * J, lim = tol;
    int tries = work > 0.0 ? (int)(TRY_WORK / work) : 0;
    int fast = work > 0.0 ? (int)(TRY_WORK_FAST / ((double)L->F * J)) : 0; /* at pts 1 */
    double *saved = L->chain + all; /* the budgets before the tries (pts 1) */
    if (tries < 2 * (int)keyed && fast > tries) {
        lmb_pack_stats s1;
        measure_at(src, sk, job->distance, L, pose_packed, sk, &s1, &L->pk, 1);
        if (kept.max_distance > 0.0 && s1.max_distance > 0.0) {
            pts = 1;
            tries = fast;
            lim = tol * s1.max_distance / kept.max_distance;
            memcpy(saved, L->mult, (size_t)n * sizeof(double));
        }
    }
    if (tries <= 0) {
        job->stats = kept;
        return;
    }
    size_t before = best;
    /* by bytes, largest first: a stable insertion sort on costs computed
     * once (the slack rounds are done with `was`) */
    for (uint32_t i = 0; i < n; i++)
        order[i] = i, was[i] = (double)stream_cost(L->st + i, 4);
    for (uint32_t a = 1; a < n; a++)
        for (uint32_t b = a; b > 0 && was[order[b]] > was[order[b - 1]]; b--) {
            uint32_t t = order[b];
            order[b] = order[b - 1], order[b - 1] = t;
        }
    static const double grows[2] = {2.0, 1.4};
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t k = 0; k < n && tries > 0; k++) {
            uint32_t i = order[k];
            if (L->st[i].keys * L->st[i].rec == 0) continue; /* nothing keyed to save */
            double m = L->mult[i];
            L->mult[i] = m * grows[pass];
            rechoose(L, i, budget);
            if (pts != SUB) { /* the stream's joints and their subtrees */
                mark_subtrees(L, sk, i / 3);
                memcpy(jkept, L->jerr, (size_t)J * sizeof(double));
            }
            measure_at(src, sk, job->distance, L, pose_packed, sk, &job->stats, &L->pk, pts);
#ifdef LMB_SELF_CHECK
            if (L->mark && tries % 4 == 0) { /* (sanitized builds, every 4th try) the
                                              * joints not measured did not move */
                lmb_pack_stats whole;
                L->mark = NULL;
                measure_at(src, sk, job->distance, L, pose_packed, sk, &whole, &L->pk, pts);
                if (whole.max_distance != job->stats.max_distance) abort();
            }
#endif
            L->mark = NULL;
            tries--;
            size_t bytes = packed_bytes(L);
            if (job->stats.max_distance <= lim && bytes && bytes < best) {
                best = bytes, kept = job->stats;
                continue;
            }
            if (pts != SUB) memcpy(L->jerr, jkept, (size_t)J * sizeof(double));
            L->mult[i] = m;
            rechoose(L, i, budget);
        }
    if (pts != SUB && best < before) {
        measure(src, sk, job->distance, L, pose_packed, sk, &job->stats, &L->pk);
        if (job->stats.max_distance <= tol) return;
        memcpy(L->mult, saved, (size_t)n * sizeof(double)); /* the packing before the tries */
        choose_all(L, budget);
        measure(src, sk, job->distance, L, pose_packed, sk, &job->stats, &L->pk);
        return;
    }
    job->stats = kept;
}

lmb_status lmb_pack_plan(lmb_pack_job *job, void *scratch, lmb_error *err) {
    lmb_error_clear(err);
    const lmb_clip *src = job->src;
    const lmb_skeleton *sk = job->skel;
    if (src->packed.streams)
        return lmb_error_set(err, LMB_EINVAL, "clip", "the clip is packed already", 0, 0, 0, 0);
    if (src->joint_span > sk->joint_count)
        return lmb_error_set(err, LMB_EMISMATCH, "skeleton",
                             "the clip animates joint {v} of a {l}-joint skeleton", 0, 0,
                             (double)src->joint_span, (double)sk->joint_count);
    if (!(job->tolerance > 0.0f) || !isfinite(job->tolerance))
        return lmb_error_set(err, LMB_ERANGE, "tolerance", "tolerance {v} must be finite and > 0",
                             0, 0, (double)job->tolerance, 0);
    if (!(job->distance >= 0.0f) || !isfinite(job->distance))
        return lmb_error_set(err, LMB_ERANGE, "distance", "distance {v} must be finite and >= 0", 0,
                             0, (double)job->distance, 0);
    pack_lay *L = NULL;
    uint32_t workers = job->pool && job->workers ? job->workers : 1u;
    if (!lay_out(src, sk, job->cache_bytes, workers, scratch, &L))
        return lmb_error_set(err, LMB_ERANGE, "clip", "the clip is too large to pack", 0, 0, 0, 0);
    L->pool = job->pool;
    L->source_keys = job->source_keys != 0;
    memset(L->has, 0, (size_t)L->Q * 24);
    for (uint32_t m = 0; m < src->joint_track_count; m++)
        L->has[src->tracks[m].target * 3 + src->tracks[m].path] = 1;
    reaches(L, sk, job->distance);
    /* candidates are encoded here; b-bit rows read up to 2 bytes past their end */
    memset(L->data, 0, (size_t)L->Q * 3 * L->Fmax * 128);
    L->node_tracks = src->track_count - src->joint_track_count;
    L->node_times = L->node_values = 0;
    for (uint32_t m = src->joint_track_count; m < src->track_count; m++) {
        L->node_times += src->tracks[m].key_count;
        L->node_values += src->tracks[m].key_count * src->tracks[m].stride;
    }
    double tol = (double)job->tolerance, best = (double)INFINITY;
    L->F = L->F0;
    grid_times(src, L);
    for (int g = 0; g < GRID_TRIES; g++) {
        if (g > 0) {
            if (L->F < 2 || 2 * L->F - 1 > L->Fmax) break;
            grid_refine(L);
        }
        L->srcM_ns = 0; /* measure samples this grid's times */
        uint32_t F = L->F;
        L->pk.chunks = L->Q, L->pk.frames = F, L->pk.interp = (uint32_t)L->interp;
        L->pk.stream_count = L->Q * 3;
        L->pk.t0 = L->gt[0];
        L->pk.times = L->mode == GRID_UNION ? L->gt : NULL;
        L->pk.dt = (float)L->dt, L->pk.inv_dt = L->dt > 0.0 ? (float)(1.0 / L->dt) : 0.0f;
        L->pk.streams = L->st, L->pk.ranges = L->rg, L->pk.data = L->data;
        L->pk.keyframes = L->kf;
        build_grid(src, sk, L);
        /* the per-joint budget is f x tolerance: shrink f while the measured
         * error is over the tolerance; grow it while it is well under (errors
         * of a chain's joints rarely add up fully), keeping the smallest
         * packing that met the tolerance */
        for (uint32_t i = 0; i < L->Q * 3; i++)
            L->mult[i] = 1.0;
        double f = 1.0, best_f = -1.0, fail_f = -1.0;
        size_t best_bytes = (size_t)-1;
        int last_ok = 0;
        for (int it = 0; it < BUDGET_TRIES; it++) {
            choose_all(L, f * tol);
            measure(src, sk, job->distance, L, pose_packed, sk, &job->stats, &L->pk);
            double e = job->stats.max_distance;
            if (e < best) best = e;
            last_ok = e <= tol;
            if (last_ok) {
                size_t bytes = packed_bytes(L);
                if (bytes && bytes < best_bytes) best_bytes = bytes, best_f = f;
                if (e >= 0.9 * tol) break;
                if (fail_f > 0.0) { /* between a passing and a failing budget */
                    f = sqrt(f * fail_f);
                } else {
                    double grow = 0.95 * tol / (e > 0.0 ? e : 1e-30 * tol);
                    f *= grow < 2.0 ? grow : 2.0;
                }
            } else if (best_f > 0.0) {
                fail_f = f;
                if (fail_f < 1.05 * best_f) break;
                f = sqrt(best_f * fail_f);
            } else {
                double shrink = 0.9 * tol / e;
                f *= shrink < 0.9 ? shrink : 0.9;
            }
        }
        if (best_f > 0.0) {
            if (!last_ok || f != best_f) {
                choose_all(L, best_f * tol);
                measure(src, sk, job->distance, L, pose_packed, sk, &job->stats, &L->pk);
            }
            relax(src, sk, job, L, best_f * tol, tol);
            job->bytes = packed_bytes(L);
            if (job->bytes) return LMB_OK;
            return lmb_error_set(err, LMB_ERANGE, "clip", "the packed clip would be too large", 0,
                                 0, 0, 0);
        }
    }
    return lmb_error_set(err, LMB_ERANGE, "tolerance",
                         "no packing meets tolerance {l} (the best reached {v}): keep the clip "
                         "exact",
                         0, 0, best, tol);
}

lmb_clip *lmb_pack_write(const lmb_pack_job *job, void *scratch, void *mem) {
    const lmb_clip *src = job->src;
    pack_lay *L = (pack_lay *)lmb_align_ptr(scratch, SECTION);
    lmb_packed_sizes z = packed_sizes(L);
    lmb_clip *c = lmb_packed_clip_place(mem, &z);
    if (L->node_values) memset(c->values, 0, ((size_t)L->node_values + 16) * 4);
    uint8_t *tracked = (uint8_t *)(uintptr_t)c->packed.tracked;
    for (uint32_t j = 0; j < L->Q * 8; j++)
        tracked[j] = (uint8_t)(L->keep[j * 3] | L->keep[j * 3 + 1] << 1 | L->keep[j * 3 + 2] << 2);
    memcpy((void *)(uintptr_t)c->packed.streams, L->st, (size_t)L->Q * 3 * sizeof(lmb_pstream));
    if (L->pk.times)
        memcpy((void *)(uintptr_t)c->packed.times, L->gt, (size_t)L->F * sizeof(float));
    memcpy((void *)(uintptr_t)c->packed.keyframes, L->kf, (size_t)L->kf_count * sizeof(uint16_t));
    memcpy((void *)(uintptr_t)c->packed.ranges, L->rg, (size_t)L->range_floats * 4);
    memcpy((void *)(uintptr_t)c->packed.data, L->data, L->data_bytes);
    lmb_packed keep = c->packed;
    c->packed = L->pk;
    c->packed.streams = keep.streams, c->packed.ranges = keep.ranges, c->packed.data = keep.data;
    c->packed.times = keep.times, c->packed.keyframes = keep.keyframes;
    c->packed.tracked = keep.tracked, c->packed.tracked_count = L->kept;
    /* the joint tracks are the tracked bits; the node tracks are copied exact */
    uint32_t n = 0, kt = 0, kv = 0;
    for (uint32_t m = src->joint_track_count; m < src->track_count; m++) {
        const lmb_track *tr = src->tracks + m;
        lmb_track *o = c->tracks + n;
        *o = *tr;
        o->shared = 0;
        memcpy(c->times + kt, src->times + tr->times, (size_t)tr->key_count * 4);
        memcpy(c->values + kv, src->values + tr->values, (size_t)tr->key_count * tr->stride * 4);
        o->times = kt, o->values = kv;
        kt += tr->key_count, kv += tr->key_count * tr->stride;
        n++;
    }
    c->track_count = n;
    c->joint_track_count = 0;
    c->joint_span = src->joint_span;
    c->key_total = kt;
    c->value_total = kv;
    c->duration = src->duration;
    return c;
}

void lmb_pack_measure(const lmb_clip *src, const lmb_clip *c, const lmb_skeleton *skel,
                      float distance, lmb_pool *pool, uint32_t workers, void *scratch,
                      lmb_pack_stats *out) {
    pack_lay *L = NULL;
    lay_out(src, skel, LMB_PACK_CACHE_BYTES, pool && workers ? workers : 1u, scratch, &L);
    L->pool = pool;
    clip_ctx x = {c, skel};
    measure(src, skel, distance, L, pose_clip, &x, out, &c->packed);
}
