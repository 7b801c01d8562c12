/* plan.c: the frame plan (see plan.h). */
#include "plan.h"

#include <math.h>
#include <string.h>
#include <time.h>

#define JS (LMB_TRS_FLOATS * LMB_LANES)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t lmb_plan_worker_bytes(uint32_t joints, uint32_t sources, uint32_t layers) {
    size_t pose = lmb_pose_bytes(joints, LMB_LANES);
    if (pose == 0) return 0;
    return pose + 64 + (size_t)sources * joints * JS * sizeof(float) +
           (size_t)((joints + 7) / 8) * 32 * sizeof(float) + (size_t)joints * 2 +
           (size_t)layers * ((joints + 7) / 8) + (size_t)joints + 4 * (size_t)((joints + 7) / 8) +
           64;
}

void lmb_plan_worker_place(lmb_plan_worker *w, void *mem, const lmb_skeleton *s, uint32_t sources) {
    uint32_t J = s->joint_count;
    size_t pose = lmb_pose_bytes(J, LMB_LANES);
    w->pose = lmb_pose_place(mem, s, LMB_LANES);
    w->src = (float *)lmb_align_ptr((unsigned char *)mem + pose + 64, 64);
    w->rest_q = w->src + (size_t)sources * J * JS;
    w->top = (int16_t *)(void *)(w->rest_q + (size_t)((J + 7) / 8) * 32);
    /* the rest rotations per chunk of 8 joints, one row of 8 per component
     * (joints past the last: the identity), for the fused first layer */
    for (uint32_t j = 0; j < (J + 7) / 8 * 8; j++)
        for (uint32_t c = 0; c < 4; c++)
            w->rest_q[(j / 8) * 32 + c * 8 + j % 8] =
                j < J ? s->rest[(size_t)j * LMB_TRS_FLOATS + 3 + c] : (c == 3 ? 1.0f : 0.0f);
    w->chunk_pids = (uint32_t *)lmb_align_ptr(w->top + J, 4);
    w->pid = (uint8_t *)(void *)(w->chunk_pids + (J + 7) / 8);
    w->need = w->pid + J;
    w->pat_count = 0, w->pat_run = 0, w->pat_valid = 0;
    /* every source block at the rest pose: lanes never sampled stay finite */
    for (uint32_t k = 0; k < sources; k++)
        memcpy(w->src + (size_t)k * J * JS, w->pose->local, (size_t)J * JS * sizeof(float));
    w->sample = w->blend = w->model = w->ik = w->output = 0.0;
}

lmb_status lmb_plan_validate(const lmb_plan *p, lmb_error *err) {
    lmb_error_clear(err);
    if (!p->pose) return lmb_error_set(err, LMB_EINVAL, "pose", "the plan has no pose", 0, 0, 0, 0);
    const lmb_pose *pose = p->pose;
    lmb_status st =
        lmb_stack_validate(p->layers, p->layer_count, pose->joint_count, p->source_count, err);
    if (st != LMB_OK) return st;
    for (uint32_t k = 0; k < p->source_count; k++) {
        const lmb_sampler *s = p->src + k;
        if (s->pose != pose || s->clips != p->src[0].clips || s->clip_count != p->src[0].clip_count)
            return lmb_error_set(err, LMB_EINVAL, "sources",
                                 "source {i} does not sample the plan's pose and clips", k, 0, 0,
                                 0);
        st = lmb_sampler_validate(s, 0, pose->instance_count, err);
        if (st != LMB_OK) return st;
    }
    for (uint32_t m = 0; m < p->palette_count; m++) {
        const lmb_plan_palette *pl = p->palettes + m;
        st = lmb_palette_validate(pose, pl->skin, pl->layout, 0, pose->instance_count, err);
        if (st != LMB_OK) {
            err->index = m;
            err->field = "palettes";
            return st;
        }
    }
    for (uint32_t m = 0; !p->all_models && m < p->slot_count; m++)
        if (p->slots[m] >= pose->joint_count)
            return lmb_error_set(err, LMB_ERANGE, "slots", "slot joint {v} out of range [1, {l}]",
                                 m, 0, (double)p->slots[m] + 1.0, (double)pose->joint_count);
    for (uint32_t c = 0; c < p->ik_count; c++) {
        lmb_plan_ik ik = p->ik[c]; /* a copy: the job over no instances */
        ik.two_bone.pose = ik.aim.pose = p->pose;
        ik.two_bone.first = ik.two_bone.count = ik.aim.first = ik.aim.count = 0;
        if (ik.kind == LMB_PLAN_IK_TWO_BONE)
            st = lmb_ik_two_bone_validate(&ik.two_bone, err);
        else if (ik.kind == LMB_PLAN_IK_AIM)
            st = lmb_ik_aim_validate(&ik.aim, err);
        else
            st = lmb_error_set(err, LMB_EINVAL, "ik", "constraint {i}: unknown kind {v}", c, 0,
                               (double)ik.kind, 0);
        if (st != LMB_OK) {
            err->index = c;
            return st;
        }
        if (!ik.target || !ik.pole || !ik.has_pole || !ik.weight)
            return lmb_error_set(err, LMB_EINVAL, "ik", "constraint {i} has no per-instance data",
                                 c, 0, 0, 0);
    }
    if (p->worker_count < 1 || !p->workers)
        return lmb_error_set(err, LMB_EINVAL, "workers", "the plan has no worker scratch", 0, 0, 0,
                             0);
    return LMB_OK;
}

void lmb_plan_touch_all(lmb_plan *p) {
    for (uint32_t i = 0; i < p->pose->instance_count; i++)
        lmb_plan_touch(p, i);
}

/* Moves *w toward *to by speed * step; returns 1 when *w changed. */
static int fade(float *w, float *to, float *speed, double step) {
    if (*speed <= 0.0f) return 0;
    double d = (double)*to - (double)*w, move = (double)*speed * step;
    float old = *w;
    if (fabs(d) <= move) {
        *w = *to;
        *speed = 0.0f;
    } else {
        *w = (float)((double)*w + (d > 0 ? move : -move));
    }
    return *w != old;
}

uint32_t lmb_plan_stepped(const lmb_plan *p, const uint8_t *flags, uint32_t *out) {
    const uint32_t N = p->pose->instance_count;
    uint32_t count = 0;
    for (uint32_t i = 0; i < N; i++) {
        for (uint32_t k = 0; k < p->source_count; k++) {
            const lmb_sampler *s = p->src + k;
            int32_t c = s->clip[i];
            if (c < 0 || !(p->weight[(size_t)k * N + i] > 0.0f)) continue;
            double d = (double)s->clips[c]->duration;
            double prev = p->prev_time[(size_t)k * N + i], t = s->time[i];
            int hit;
            if (s->loop[i]) {
                double delta = (double)s->rate[i] * p->last_dt;
                hit = delta != 0.0 && ((flags && flags[c]) ||
                                       (d > 0.0 && floor((prev + delta) / d) != floor(prev / d)));
            } else {
                hit = t != prev &&
                      ((flags && flags[c]) || (t >= d && prev < d) || (t <= 0.0 && prev > 0.0));
            }
            if (hit) {
                out[count++] = i;
                break;
            }
        }
    }
    return count;
}

uint32_t lmb_plan_advance(lmb_plan *p, double dt) {
    double t0 = now();
    const uint32_t N = p->pose->instance_count, J = p->pose->joint_count;
    double step = fabs(dt);
    p->run++;
    p->last_dt = dt;
    for (uint32_t k = 0; k < p->source_count; k++) {
        lmb_sampler *s = p->src + k;
        float *w = p->weight + (size_t)k * N, *to = p->weight_to + (size_t)k * N;
        float *sp = p->weight_speed + (size_t)k * N;
        for (uint32_t i = 0; i < N; i++) {
            if (fade(w + i, to + i, sp + i, step)) lmb_plan_touch(p, i);
            if (s->clip[i] < 0) continue;
            double old = s->time[i];
            p->prev_time[(size_t)k * N + i] = old;
            if (dt != 0.0 && s->rate[i] != 0.0f)
                s->time[i] = lmb_clip_time_d(s->clips[s->clip[i]], old + (double)s->rate[i] * dt,
                                             s->loop[i]);
            if (s->time[i] != old) lmb_plan_touch(p, i);
        }
    }
    for (uint32_t n = 0; n < p->layer_count; n++) {
        float *w = p->layer_weight + (size_t)n * N, *to = p->layer_to + (size_t)n * N;
        float *sp = p->layer_speed + (size_t)n * N;
        for (uint32_t i = 0; i < N; i++)
            if (fade(w + i, to + i, sp + i, step)) lmb_plan_touch(p, i);
    }
    uint32_t count = 0;
    for (uint32_t i = 0; i < N; i++) {
        if (p->pose->first_dirty[i] < J) lmb_plan_touch(p, i); /* a new root matrix */
        uint8_t d = p->dirty[i];
        if (d == 2 || (d == 1 && (p->run + p->phase[i]) % p->every[i] == 0)) p->active[count++] = i;
    }
    p->active_count = count;
    p->advance = now() - t0;
    return (count + LMB_LANES - 1) / LMB_LANES;
}

/* The IK stage of a block: every constraint, in order, on the lanes where
 * it is on (the others get weight 0: untouched), on the worker pose whose
 * model matrices and scratch local-to-model just filled. */
static void ik_block(const lmb_plan *p, lmb_pose *wp, const uint32_t inst[LMB_LANES],
                     unsigned valid) {
    float target[LMB_LANES * 3], pole[LMB_LANES * 3], weight[LMB_LANES];
    uint8_t pole_on[LMB_LANES];
    for (uint32_t l = 0; l < LMB_LANES; l++)
        wp->first_dirty[l] = wp->joint_count; /* every matrix is current */
    for (uint32_t c = 0; c < p->ik_count; c++) {
        const lmb_plan_ik *ik = p->ik + c;
        int any = 0;
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            uint32_t i = inst[l];
            float w = (valid >> l & 1u) ? ik->weight[i] : 0.0f;
            weight[l] = w;
            any |= w > 0.0f;
            for (uint32_t k = 0; k < 3; k++) {
                target[l * 3 + k] = w > 0.0f ? ik->target[(size_t)i * 3 + k] : 0.0f;
                pole[l * 3 + k] = w > 0.0f ? ik->pole[(size_t)i * 3 + k] : 0.0f;
            }
            pole_on[l] = w > 0.0f && ik->has_pole[i];
        }
        if (!any) continue;
        if (ik->kind == LMB_PLAN_IK_TWO_BONE) {
            lmb_ik_two_bone j = ik->two_bone;
            j.pose = wp, j.first = 0, j.count = LMB_LANES;
            j.targets = target, j.poles = pole, j.pole_on = pole_on, j.weights = weight;
            lmb_ik_two_bone_run(&j);
        } else {
            lmb_ik_aim j = ik->aim;
            j.pose = wp, j.first = 0, j.count = LMB_LANES;
            j.targets = target, j.poles = pole, j.pole_on = pole_on, j.weights = weight;
            lmb_ik_aim_run(&j);
        }
    }
}

/* The worker's mask patterns for this run (lmb_plan_worker.pid): made on
 * its first block of a run, masks being fixed during a run. 0 when the
 * masks make more than 32 patterns (the block then works joint by joint). */
static int mask_patterns(const lmb_plan *p, lmb_plan_worker *wk) {
    if (wk->pat_valid && wk->pat_run == p->run) return wk->pat_count <= 32;
    const uint32_t J = p->pose->joint_count, chunks = (J + 7) / 8;
    wk->pat_count = 0;
    memset(wk->chunk_pids, 0, (size_t)chunks * sizeof(uint32_t));
    for (uint32_t j = 0; j < J && wk->pat_count <= 32; j++) {
        uint64_t pat = 0;
        for (uint32_t n = 0; n < p->layer_count; n++) {
            const float *mask = p->layers[n].mask;
            float m = mask ? mask[j] : 1.0f;
            if (m > 0.0f) pat |= (uint64_t)1u << n;
            if (m == 1.0f) pat |= (uint64_t)1u << (32 + n);
        }
        uint32_t k = 0;
        while (k < wk->pat_count && wk->pat[k] != pat)
            k++;
        if (k == wk->pat_count) {
            if (k == 32) {
                wk->pat_count = 33; /* too many: joint by joint */
                break;
            }
            wk->pat[k] = pat;
            wk->pat_count++;
        }
        wk->pid[j] = (uint8_t)k;
        wk->chunk_pids[j / 8] |= 1u << k;
    }
    wk->pat_run = p->run, wk->pat_valid = 1;
    return wk->pat_count <= 32;
}

/* Block b's instances (lanes past the active list: instance 0); returns the
 * valid lanes. */
static unsigned block_lanes(const lmb_plan *p, uint32_t b, uint32_t inst[LMB_LANES]) {
    unsigned valid = 0;
    for (uint32_t l = 0; l < LMB_LANES; l++) {
        uint32_t e = b * LMB_LANES + l;
        inst[l] = e < p->active_count ? p->active[e] : 0;
        if (e < p->active_count) valid |= 1u << l;
    }
    return valid;
}

/* Whether the block's first layer can be sampled and averaged in one pass
 * (lmb_sample_mean2_avx2): an override of two sources without a mask, at
 * weight 1 and playing in all 8 lanes (the fold's own shortcut for a first
 * layer), each source in some lane (the sampling loop meets the first one),
 * each lane of each source a dense or packed clip that tracks every
 * property of every joint (nothing for finish_lanes), no root motion. */
static int fusable_first(const lmb_plan *p, const uint32_t inst[LMB_LANES], unsigned valid,
                         const unsigned *want, const float *layer_w) {
    const lmb_stack_layer *ly = p->layers;
    if (valid != 0xFFu || ly->mode != LMB_LAYER_OVERRIDE || ly->mask || ly->source_count != 2)
        return 0;
    const uint32_t k0 = ly->first_source;
    if ((want[k0] | want[k0 + 1]) != 0xFFu || !want[k0] || !want[k0 + 1]) return 0;
    for (uint32_t l = 0; l < LMB_LANES; l++)
        if (layer_w[l] != 1.0f) return 0;
    const uint32_t chunks = (p->pose->joint_count + 7) / 8;
    for (uint32_t k = k0; k < k0 + 2; k++) {
        const lmb_sampler *s = p->src + k;
        if (s->root_joint >= 0) return 0;
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            if (!(want[k] >> l & 1u)) continue;
            const int32_t c = s->clip[inst[l]];
            const lmb_clip *clip = s->clips[c];
            if (s->untracked_first[c] != s->untracked_first[c + 1]) return 0;
            if (clip->packed.streams ? (clip->joint_span + 7u) / 8u != chunks
                                     : !clip->dense.data || clip->dense.chunks != chunks)
                return 0;
        }
    }
    return 1;
}

void lmb_plan_block(lmb_plan *p, uint32_t b, uint32_t worker) {
    lmb_plan_worker *wk = p->workers + worker;
    lmb_pose *pose = p->pose, *wp = wk->pose;
    const uint32_t N = pose->instance_count, J = pose->joint_count;
    uint32_t inst[LMB_LANES];
    const unsigned valid = block_lanes(p, b, inst);
    /* the slot joints' model matrices this block writes at its end: their
     * lines start coming now, so the writes do not wait for them */
    if (!p->all_models)
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            if (!(valid >> l & 1u)) continue;
            const float *to = pose->model + (size_t)inst[l] * J * 16;
            for (uint32_t m = 0; m < p->slot_count; m++)
                __builtin_prefetch(to + (size_t)p->slots[m] * 16, 1);
        }
    double t0 = now();
    /* 1. every source that plays with weight in some lane, into its scratch block */
    const float *src[LMB_STACK_MAX_LAYERS * LMB_STACK_MAX_SOURCES];
    float src_w[LMB_STACK_MAX_LAYERS * LMB_STACK_MAX_SOURCES * LMB_LANES];
    float layer_w[LMB_STACK_MAX_LAYERS * LMB_LANES];
    for (uint32_t n = 0; n < p->layer_count; n++)
        for (uint32_t l = 0; l < LMB_LANES; l++)
            layer_w[n * LMB_LANES + l] =
                (valid >> l & 1u) ? p->layer_weight[(size_t)n * N + inst[l]] : 0.0f;
    unsigned want[LMB_STACK_MAX_LAYERS * LMB_STACK_MAX_SOURCES];
    unsigned plays[LMB_STACK_MAX_LAYERS] = {0};
    for (uint32_t k = 0; k < p->source_count; k++) {
        const lmb_sampler *s = p->src + k;
        const float *lw = layer_w + p->layer_of[k] * LMB_LANES, *w = p->weight + (size_t)k * N;
        want[k] = 0;
        for (uint32_t l = 0; l < LMB_LANES; l++)
            if ((valid >> l & 1u) && lw[l] > 0.0f && w[inst[l]] > 0.0f && s->clip[inst[l]] >= 0)
                want[k] |= 1u << l;
        plays[p->layer_of[k]] |= want[k];
    }
    /* Lanes an override layer replaces (layer weight 1, playing): where its
     * mask is 1, the layers below need not be sampled in those lanes, and
     * where that holds in every lane they need not be folded either (the
     * weight-1 fold is a select: the result is the same bits). */
    unsigned cover[LMB_STACK_MAX_LAYERS];
    int any_cover = 0, masked = 0;
    for (uint32_t n = 0; n < p->layer_count; n++) {
        const lmb_stack_layer *ly = p->layers + n;
        masked |= ly->mask != NULL;
        cover[n] = 0;
        if (n == 0 || ly->mode != LMB_LAYER_OVERRIDE) continue;
        for (uint32_t l = 0; l < LMB_LANES; l++)
            if ((plays[n] >> l & 1u) && layer_w[n * LMB_LANES + l] == 1.0f) cover[n] |= 1u << l;
        any_cover |= cover[n] != 0;
    }
    const uint32_t chunks = (J + 7) / 8;
    int covered = 0; /* some joint covered in every lane: wk->top is set */
    if ((any_cover || masked) && mask_patterns(p, wk)) {
        /* per pattern: the lanes each layer's sources must sample (those no
         * layer above replaces there) and the top covering layer */
        uint8_t contrib[32][LMB_STACK_MAX_LAYERS];
        int16_t ptop[32];
        for (uint32_t k = 0; k < wk->pat_count; k++) {
            const uint64_t pat = wk->pat[k];
            unsigned above = 0;
            int16_t top = -1;
            for (uint32_t n = p->layer_count; n-- > 0;) {
                const int pos = (int)(pat >> n & 1u), one = (int)(pat >> (32 + n) & 1u);
                contrib[k][n] = pos ? (uint8_t)(~above & 0xFFu) : 0u;
                if (one) above |= cover[n];
                if (top < 0 && one && cover[n] && (cover[n] & valid) == valid) top = (int16_t)n;
            }
            ptop[k] = top;
            covered |= top >= 0;
        }
        for (uint32_t q = 0; q < chunks; q++)
            for (uint32_t n = 0; n < p->layer_count; n++) {
                uint8_t m = 0;
                for (uint32_t bits = wk->chunk_pids[q]; bits; bits &= bits - 1)
                    m |= contrib[__builtin_ctz(bits)][n];
                wk->need[(size_t)n * chunks + q] = m;
            }
        for (uint32_t j = 0; j < J; j++)
            wk->top[j] = ptop[wk->pid[j]];
    } else if (any_cover || masked) {
        memset(wk->need, 0, (size_t)p->layer_count * chunks);
        for (uint32_t j = 0; j < J; j++) {
            unsigned above = 0; /* lanes replaced at j by a layer above n */
            int16_t top = -1;
            for (uint32_t n = p->layer_count; n-- > 0;) {
                const float *mask = p->layers[n].mask;
                float m = mask ? mask[j] : 1.0f;
                if (m > 0.0f) wk->need[(size_t)n * chunks + j / 8] |= (uint8_t)(~above & 0xFFu);
                if (m == 1.0f) above |= cover[n];
                if (top < 0 && m == 1.0f && cover[n] && (cover[n] & valid) == valid)
                    top = (int16_t)n;
            }
            wk->top[j] = top;
            covered |= top >= 0;
        }
    }
    const int needs = any_cover || masked;
    /* dense clips: the next source's frames are prefetched while one samples */
    const int simd = lmb_simd_active();
    const int fuse = simd && fusable_first(p, inst, valid, want, layer_w);
    lmb_dense_plan dp[2];
    int cur = 0;
    uint32_t k = 0;
    while (k < p->source_count && !want[k])
        src[k++] = NULL;
    if (simd && k < p->source_count) {
        lmb_sampler_dense_plan(p->src + k, inst, want[k], dp);
        dp[0].need = needs ? wk->need + (size_t)p->layer_of[k] * chunks : NULL;
    }
    for (; k < p->source_count; k++) {
        if (!want[k]) {
            src[k] = NULL;
            for (uint32_t l = 0; l < LMB_LANES; l++)
                src_w[k * LMB_LANES + l] = 0.0f;
            continue;
        }
        lmb_sampler *s = p->src + k;
        const float *w = p->weight + (size_t)k * N;
        float *blk = wk->src + (size_t)k * J * JS;
        const uint8_t *need = needs ? wk->need + (size_t)p->layer_of[k] * chunks : NULL;
        uint32_t k2 = fuse && k == p->layers[0].first_source ? k + 2 : k + 1;
        while (k2 < p->source_count && !want[k2])
            k2++;
        const lmb_dense_plan *next = NULL;
        if (simd && k2 < p->source_count) {
            lmb_sampler_dense_plan(p->src + k2, inst, want[k2], dp + (cur ^ 1));
            dp[cur ^ 1].need = needs ? wk->need + (size_t)p->layer_of[k2] * chunks : NULL;
            next = dp + (cur ^ 1);
        } else if (simd && (b + 1) * LMB_LANES < p->active_count) {
            /* the last source: the next block's first source's frames (the
             * block usually runs next on this worker; else they wait in L3) */
            uint32_t in2[LMB_LANES];
            unsigned v2 = block_lanes(p, b + 1, in2);
            for (uint32_t l = 0; l < LMB_LANES; l++)
                if (p->src[0].clip[in2[l]] < 0) v2 &= ~(1u << l);
            if (v2) {
                lmb_sampler_dense_plan(p->src, in2, v2, dp + (cur ^ 1));
                dp[cur ^ 1].need = NULL;
                next = dp + (cur ^ 1);
            }
        }
        if (fuse && k == p->layers[0].first_source) {
            /* the first layer's two sources, sampled and averaged chunk by
             * chunk straight into the worker pose (bit for bit what the
             * fold gives from the sources sampled apart) */
            lmb_dense_plan d1;
            lmb_sampler_dense_plan(p->src + k + 1, inst, want[k + 1], &d1);
            d1.need = need;
            float w0[LMB_LANES], w1[LMB_LANES];
            for (uint32_t l = 0; l < LMB_LANES; l++) {
                w0[l] = (want[k] >> l & 1u) ? w[inst[l]] : 0.0f;
                w1[l] = (want[k + 1] >> l & 1u) ? p->weight[(size_t)(k + 1) * N + inst[l]] : 0.0f;
            }
            lmb_sample_mean2_avx2(wp->local, J, dp + cur, &d1, w0, w1, wk->rest_q, need, next);
            cur ^= 1;
            src[k] = src[k + 1] = NULL; /* (the fold starts above their layer) */
            memcpy(src_w + k * LMB_LANES, w0, sizeof w0);
            memcpy(src_w + (k + 1) * LMB_LANES, w1, sizeof w1);
            k++;
            continue;
        }
        unsigned got =
            lmb_sampler_lanes(s, inst, want[k], blk, 1, simd ? dp + cur : NULL, next, need);
        cur ^= 1;
        src[k] = got ? blk : NULL;
        for (uint32_t l = 0; l < LMB_LANES; l++)
            src_w[k * LMB_LANES + l] = (got >> l & 1u) ? w[inst[l]] : 0.0f;
    }
    double t1 = now();
    /* 2. the layer stack, into the worker pose's locals */
    lmb_stack_block(pose->skel, p->layers, p->layer_count, src, src_w, layer_w,
                    covered ? wk->top : NULL, fuse, wp->local);
    double t2 = now();
    /* 3. local-to-model with each lane's root (invalid lanes: identity) */
    unsigned ik_lanes = 0; /* lanes with some constraint on */
    for (uint32_t c = 0; c < p->ik_count; c++)
        for (uint32_t l = 0; l < LMB_LANES; l++)
            if ((valid >> l & 1u) && p->ik[c].weight[inst[l]] > 0.0f) ik_lanes |= 1u << l;
    wp->has_root = pose->has_root;
    wp->skip_model = !p->all_models && !ik_lanes; /* IK reads the model matrices */
    for (uint32_t l = 0; l < LMB_LANES; l++)
        if (valid >> l & 1u) memcpy(wp->root + l * 16, pose->root + (size_t)inst[l] * 16, 64);
    if (lmb_simd_active())
        lmb_l2m_block_avx2(wp, 0, 0);
    else
        lmb_l2m_block_portable(wp, 0, 0);
    double t3 = now();
    if (ik_lanes) ik_block(p, wp, inst, valid);
    double t3b = now();
    if (p->write_locals) /* the final locals, for pose:trs() and custom stages */
        for (uint32_t l = 0; l < LMB_LANES; l++) {
            if (!(valid >> l & 1u)) continue;
            for (uint32_t j = 0; j < J; j++) {
                float *d = pose->local + lmb_pose_local_index(pose, inst[l], j);
                const float *f = wp->local + (size_t)j * LMB_TRS_FLOATS * LMB_LANES + l;
                for (uint32_t c = 0; c < LMB_TRS_FLOATS; c++)
                    d[(size_t)c * LMB_LANES] = f[(size_t)c * LMB_LANES];
            }
        }
    /* 4. what someone reads: palettes and slot (or every) model matrices,
     * from the block's 3x4 model matrices (SoA, in the worker's cache) */
    for (uint32_t m = 0; m < p->palette_count; m++) {
        const lmb_plan_palette *pl = p->palettes + m;
        size_t per = (size_t)pl->skin->joint_count * lmb_palette_width(pl->layout);
        float *outs[LMB_LANES];
        for (uint32_t l = 0; l < LMB_LANES; l++)
            outs[l] = (valid >> l & 1u) ? pl->out + inst[l] * per : NULL;
        lmb_palette_block(pl->skin, pl->layout, wp->scratch, outs);
    }
    for (uint32_t l = 0; l < LMB_LANES; l++) {
        if (!(valid >> l & 1u)) continue;
        float *to = pose->model + (size_t)inst[l] * J * 16;
        if (p->all_models) {
            memcpy(to, wp->model + (size_t)l * J * 16, (size_t)J * 16 * sizeof(float));
        } else {
            for (uint32_t m = 0; m < p->slot_count; m++) {
                const float *S = wp->scratch + (size_t)p->slots[m] * 12 * LMB_LANES + l;
                float *d = to + (size_t)p->slots[m] * 16;
                for (int c = 0; c < 4; c++) {
                    for (int r = 0; r < 3; r++)
                        d[c * 4 + r] = S[(c * 3 + r) * LMB_LANES];
                    d[c * 4 + 3] = c == 3 ? 1.0f : 0.0f;
                }
            }
        }
        p->dirty[inst[l]] = 0;
        pose->first_dirty[inst[l]] = J;
        pose->inst_generation[inst[l]]++; /* the scene's followers of this instance */
    }
    double t4 = now();
    wk->sample += t1 - t0, wk->blend += t2 - t1, wk->model += t3 - t2, wk->ik += t3b - t3;
    wk->output += t4 - t3b;
}

void lmb_plan_finish(lmb_plan *p) {
    if (p->active_count) p->pose->generation++;
}

void lmb_plan_float_track(const lmb_plan *p, const int32_t *track, uint32_t width,
                          const float *base, float *out) {
    const uint32_t N = p->pose->instance_count;
    float val[LMB_FLOAT_WIDTH], v[LMB_FLOAT_WIDTH];
    for (uint32_t i = 0; i < N; i++) {
        float *acc = out + (size_t)i * width;
        for (uint32_t c = 0; c < width; c++)
            acc[c] = base[c];
        for (uint32_t l = 0; l < p->layer_count; l++) {
            float lw = p->layer_weight[(size_t)l * N + i];
            if (!(lw > 0.0f)) continue;
            const lmb_stack_layer *ly = p->layers + l;
            float sum = 0.0f;
            for (uint32_t c = 0; c < width; c++)
                val[c] = 0.0f;
            for (uint32_t s = ly->first_source; s < ly->first_source + ly->source_count; s++) {
                float w = p->weight[(size_t)s * N + i];
                const lmb_sampler *sm = p->src + s;
                int32_t ci = sm->clip[i];
                if (!(w > 0.0f) || ci < 0) continue;
                int32_t k = track[ci];
                if (k >= 0) {
                    const lmb_clip *clip = sm->clips[ci];
                    lmb_cursor cur = {0, 0.0f, 0.0f};
                    lmb_track_sample(clip, clip->tracks + k,
                                     lmb_clip_time(clip, sm->time[i], sm->loop[i]), &cur, v);
                } else { /* no such track: the base */
                    for (uint32_t c = 0; c < width; c++)
                        v[c] = base[c];
                }
                for (uint32_t c = 0; c < width; c++)
                    val[c] += w * v[c];
                sum += w;
            }
            if (!(sum > 0.0f)) continue;
            for (uint32_t c = 0; c < width; c++) {
                float x = val[c] / sum;
                if (ly->mode == LMB_LAYER_ADDITIVE) /* its difference from the base */
                    acc[c] += lw * (x - base[c]);
                else
                    acc[c] += lw * (x - acc[c]);
            }
        }
    }
}
