/* machine.c: state machines and blend spaces stepped for a crowd (see
 * machine.h). */
#include "machine.h"

#include <math.h>
#include <string.h>

lmb_status lmb_mdef_validate(const lmb_mdef *d, uint32_t param_count, lmb_error *err) {
    lmb_error_clear(err);
    if (!d || d->state_count == 0 || !d->states)
        return lmb_error_set(err, LMB_EINVAL, "states", "a machine needs a state", 0, 0, 0, 0);
    for (uint32_t s = 0; s < d->state_count; s++) {
        const lmb_mstate *st = d->states + s;
        if (st->tr_first > d->trans_count || st->tr_count > d->trans_count - st->tr_first)
            return lmb_error_set(err, LMB_ERANGE, "states", "state {i}: transitions out of range",
                                 s, 0, 0, 0);
        if (st->space) {
            if (!(st->smooth >= 0.0f) || !isfinite(st->smooth))
                return lmb_error_set(err, LMB_EINVAL, "states", "state {i}: smooth must be >= 0", s,
                                     0, (double)st->smooth, 0);
            if (st->dims != 1 && st->dims != 2)
                return lmb_error_set(err, LMB_EINVAL, "states", "state {i}: dims must be 1 or 2", s,
                                     0, st->dims, 2);
            for (uint32_t k = 0; k < st->dims; k++)
                if (st->param[k] >= param_count)
                    return lmb_error_set(err, LMB_ERANGE, "states",
                                         "state {i}: parameter {v} out of range", s, 0,
                                         st->param[k], param_count);
        }
    }
    for (uint32_t t = 0; t < d->trans_count; t++) {
        const lmb_mtrans *tr = d->trans + t;
        if (tr->cond_first > d->cond_count || tr->cond_count > d->cond_count - tr->cond_first)
            return lmb_error_set(err, LMB_ERANGE, "transitions",
                                 "transition {i}: conditions out of range", t, 0, 0, 0);
        if (tr->trigger >= 0 && (uint32_t)tr->trigger >= param_count)
            return lmb_error_set(err, LMB_ERANGE, "transitions",
                                 "transition {i}: trigger parameter out of range", t, 0,
                                 tr->trigger, param_count);
        if (tr->has_phase && !(tr->phase >= 0.0 && tr->phase <= 1.0))
            return lmb_error_set(err, LMB_ERANGE, "transitions",
                                 "transition {i}: at_phase {v} outside [0, 1]", t, 0, tr->phase, 1);
        for (uint32_t c = tr->cond_first; c < tr->cond_first + tr->cond_count; c++) {
            const lmb_mcond *cd = d->conds + c;
            if (cd->param >= param_count || cd->op > LMB_OP_NE || !isfinite(cd->value))
                return lmb_error_set(err, LMB_EINVAL, "transitions",
                                     "transition {i}: condition {j} is not valid", t,
                                     c - tr->cond_first, 0, 0);
        }
    }
    return LMB_OK;
}

lmb_status lmb_space_validate(const lmb_space *s, lmb_error *err) {
    lmb_error_clear(err);
    if (s->dims != 1 && s->dims != 2)
        return lmb_error_set(err, LMB_EINVAL, "dims", "dims {v} must be 1 or 2", 0, 0, s->dims, 2);
    if (s->count < 1 || s->count > LMB_SPACE_MAX)
        return lmb_error_set(err, LMB_ERANGE, "points", "{v} points, the most is {l}", 0, 0,
                             s->count, LMB_SPACE_MAX);
    for (uint32_t k = 0; k < s->count * s->dims; k++)
        if (!isfinite(s->at[k]))
            return lmb_error_set(err, LMB_ENAN, "points", "point {i} is not finite", k / s->dims, 0,
                                 s->at[k], 0);
    if (s->dims == 1)
        for (uint32_t k = 1; k < s->count; k++)
            if (!(s->at[k] > s->at[k - 1]))
                return lmb_error_set(err, LMB_EINVAL, "points",
                                     "point {i} is not after the one before", k, 0, s->at[k], 0);
    for (uint32_t k = 0; k < s->count; k++)
        if (!(s->dur[k] >= 0.0) || !isfinite(s->dur[k]))
            return lmb_error_set(err, LMB_EINVAL, "durations", "duration {i} must be >= 0", k, 0,
                                 s->dur[k], 0);
    for (uint32_t k = 0; k < s->tri_count * 3; k++)
        if (s->tris[k] >= s->count)
            return lmb_error_set(err, LMB_ERANGE, "tris", "triangle {i}: point out of range", k / 3,
                                 0, s->tris[k], s->count);
    for (uint32_t k = 0; k < s->edge_count * 2; k++)
        if (s->edges[k] >= s->count)
            return lmb_error_set(err, LMB_ERANGE, "edges", "edge {i}: point out of range", k / 2, 0,
                                 s->edges[k], s->count);
    return LMB_OK;
}

static void weights_1d(const lmb_space *s, double x, double *w) {
    const double *at = s->at;
    uint32_t n = s->count;
    if (x <= at[0]) {
        w[0] = 1.0;
    } else if (x >= at[n - 1]) {
        w[n - 1] = 1.0;
    } else {
        for (uint32_t k = 0; k + 1 < n; k++) {
            if (x >= at[k] && x < at[k + 1]) {
                double f = (x - at[k]) / (at[k + 1] - at[k]);
                w[k] = 1.0 - f, w[k + 1] = f;
                break;
            }
        }
    }
}

static void weights_2d(const lmb_space *s, double x, double y, double *w) {
    const double *p = s->at;
    for (uint32_t k = 0; k < s->count; k++)
        if (p[2 * k] == x && p[2 * k + 1] == y) {
            w[k] = 1.0;
            return;
        }
    for (uint32_t t = 0; t < s->tri_count; t++) {
        const uint32_t *tr = s->tris + 3 * t;
        const double *a = p + 2 * tr[0], *b = p + 2 * tr[1], *c = p + 2 * tr[2];
        double det = (b[1] - c[1]) * (a[0] - c[0]) + (c[0] - b[0]) * (a[1] - c[1]);
        double l1 = ((b[1] - c[1]) * (x - c[0]) + (c[0] - b[0]) * (y - c[1])) / det;
        double l2 = ((c[1] - a[1]) * (x - c[0]) + (a[0] - c[0]) * (y - c[1])) / det;
        double l3 = 1.0 - l1 - l2, eps = -1e-9;
        if (l1 >= eps && l2 >= eps && l3 >= eps) {
            l1 = l1 > 0.0 ? l1 : 0.0, l2 = l2 > 0.0 ? l2 : 0.0, l3 = l3 > 0.0 ? l3 : 0.0;
            double sum = l1 + l2 + l3;
            w[tr[0]] = l1 / sum, w[tr[1]] = l2 / sum, w[tr[2]] = l3 / sum;
            return;
        }
    }
    /* outside: the nearest point of a hull edge */
    int found = 0;
    double best = 0.0, bt = 0.0;
    uint32_t ba = 0, bb = 0;
    for (uint32_t e = 0; e < s->edge_count; e++) {
        const double *a = p + 2 * s->edges[2 * e], *b = p + 2 * s->edges[2 * e + 1];
        double dx = b[0] - a[0], dy = b[1] - a[1], len2 = dx * dx + dy * dy;
        double t = len2 > 0.0 ? ((x - a[0]) * dx + (y - a[1]) * dy) / len2 : 0.0;
        t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
        double px = a[0] + t * dx - x, py = a[1] + t * dy - y, d2 = px * px + py * py;
        if (!found || d2 < best) {
            found = 1, best = d2, bt = t;
            ba = s->edges[2 * e], bb = s->edges[2 * e + 1];
        }
    }
    if (!found) {
        w[0] = 1.0;
        return;
    }
    w[ba] = 1.0 - bt, w[bb] = bt;
}

void lmb_space_weights(const lmb_space *s, double x, double y, double *w) {
    for (uint32_t k = 0; k < s->count; k++)
        w[k] = 0.0;
    if (s->dims == 1)
        weights_1d(s, x, w);
    else
        weights_2d(s, x, y, w);
}

void lmb_machines_keep(lmb_machines *m, uint32_t i) {
    if (m->kept[i]) return;
    const lmb_plan *p = m->plan;
    const uint32_t N = m->instance_count, S = p->source_count;
    lmb_kept *out = m->kept_src + (size_t)i * S;
    for (uint32_t k = 0; k < S; k++) {
        const lmb_sampler *s = p->src + k;
        size_t at = (size_t)k * N + i;
        out[k].clip = s->clip[i];
        out[k].time = s->time[i];
        out[k].rate = s->rate[i];
        out[k].loop = s->loop[i];
        out[k].weight = p->weight[at];
        out[k].prev = p->prev_time[at];
    }
    for (uint32_t n = 0; n < m->layer_count; n++)
        m->kept_layer[(size_t)i * m->layer_count + n] = p->layer_weight[(size_t)n * N + i];
    m->kept[i] = 1;
    m->kept_list[m->kept_count++] = i;
}

/* A weight set now or as a fade (as plan:set_weight). */
static void set_faded(lmb_plan *p, size_t at, float value, float fade) {
    float *w = p->weight + at, *to = p->weight_to + at, *speed = p->weight_speed + at;
    *to = value;
    if (fade > 0.0f && *w != value) {
        *speed = (float)(fabs((double)value - (double)*w) / (double)fade);
        if (!(*speed > 0.0f) || !isfinite(*speed)) *w = value, *speed = 0.0f;
    } else {
        *w = value;
        *speed = 0.0f;
    }
}

void lmb_machines_apply(lmb_machines *m, uint32_t key, double x, double y, float fade) {
    lmb_mrun *r = m->runs + key;
    const lmb_space *sp = r->space;
    if (!sp) return;
    lmb_plan *p = m->plan;
    const uint32_t N = m->instance_count, i = key / m->layer_count, n = key % m->layer_count;
    const uint32_t first = p->layers[n].first_source;
    double w[LMB_SPACE_MAX], D = 0.0;
    lmb_space_weights(sp, x, y, w);
    for (uint32_t k = 0; k < r->nslots; k++)
        D += w[k] * sp->dur[k];
    for (uint32_t k = 0; k < r->nslots; k++) {
        uint32_t src = first + r->slots[k];
        set_faded(p, (size_t)src * N + i, (float)w[k], fade);
        if (sp->sync && !r->marker && D > 0.0 && sp->dur[k] > 0.0)
            p->src[src].rate[i] = (float)(sp->dur[k] / D);
    }
    lmb_plan_touch(p, i);
    r->x[0] = x, r->x[1] = y, r->has_x = 1;
}

void lmb_machines_touch(lmb_machines *m, uint32_t i) {
    lmb_mrun *r = m->runs + (size_t)i * m->layer_count;
    for (uint32_t n = 0; n < m->layer_count; n++)
        if (r[n].def) r[n].dirty = 1;
}

static int compare(uint8_t op, double a, double b) {
    switch (op) {
    case LMB_OP_LT:
        return a < b;
    case LMB_OP_LE:
        return a <= b;
    case LMB_OP_GT:
        return a > b;
    case LMB_OP_GE:
        return a >= b;
    case LMB_OP_EQ:
        return a == b;
    default:
        return a != b;
    }
}

int lmb_machines_holds(const lmb_machines *m, uint32_t key, const lmb_mtrans *t, double dt) {
    const lmb_mrun *r = m->runs + key;
    const uint32_t N = m->instance_count, i = key / m->layer_count, n = key % m->layer_count;
    const double *pv = m->param + (size_t)i * m->param_count;
    const uint8_t *pt = m->param_type + (size_t)i * m->param_count;
    for (uint32_t c = 0; c < t->cond_count; c++) {
        const lmb_mcond *cd = r->def->conds + t->cond_first + c;
        uint8_t want = cd->boolean ? LMB_PARAM_BOOL : LMB_PARAM_NUMBER;
        if (pt[cd->param] != want || !compare(cd->op, pv[cd->param], cd->value)) return 0;
    }
    if (t->trigger >= 0 && !(pt[t->trigger] == LMB_PARAM_BOOL && pv[t->trigger] != 0.0)) return 0;
    if (t->at_end || t->has_phase) {
        if (r->slot < 0 || dt == 0.0) return 0;
        const lmb_plan *p = m->plan;
        uint32_t k = p->layers[n].first_source + (uint32_t)r->slot;
        const lmb_sampler *s = p->src + k;
        if (s->clip[i] < 0) return 0;
        double d = (double)s->clips[s->clip[i]]->duration;
        if (d <= 0.0) return t->at_end;
        double rate = (double)s->rate[i], prev = p->prev_time[(size_t)k * N + i];
        double p0 = prev / d, p1 = s->loop[i] ? p0 + rate * dt / d : s->time[i] / d;
        if (t->at_end) {
            if (s->loop[i]) {
                if (floor(p1) == floor(p0)) return 0;
            } else if (!(p1 >= 1.0 && p0 < 1.0) && !(rate < 0.0 && p1 <= 0.0 && p0 > 0.0)) {
                return 0;
            }
        }
        if (t->has_phase) {
            double a = p0 < p1 ? p0 : p1, b = p0 < p1 ? p1 : p0;
            double q = floor(a) + t->phase;
            if (q <= a) q += 1.0;
            if (q > b) return 0;
        }
    }
    return 1;
}

/* A space parameter's value: 0 unset, not a number or NaN, clamped to 1e15. */
static double space_value(const lmb_machines *m, uint32_t i, uint32_t param) {
    size_t at = (size_t)i * m->param_count + param;
    if (m->param_type[at] != LMB_PARAM_NUMBER) return 0.0;
    double v = m->param[at];
    if (v != v) return 0.0;
    return v < -1e15 ? -1e15 : (v > 1e15 ? 1e15 : v);
}

uint32_t lmb_machines_step(lmb_machines *m, double dt, uint32_t *out_key, int32_t *out_code) {
    for (uint32_t k = 0; k < m->kept_count; k++)
        m->kept[m->kept_list[k]] = 0;
    m->kept_count = 0;
    uint32_t count = 0, R = m->instance_count * m->layer_count;
    for (uint32_t key = 0; key < R; key++) {
        lmb_mrun *r = m->runs + key;
        if (!r->def) continue;
        const lmb_mstate *st = r->def->states + r->state;
        if (!r->dirty && !st->timed) continue;
        r->dirty = 0;
        uint32_t i = key / m->layer_count;
        if (st->space && r->space) { /* the space follows its parameters */
            double x = space_value(m, i, st->param[0]);
            double y = st->dims == 2 ? space_value(m, i, st->param[1]) : 0.0;
            if (!r->has_x || x != r->x[0] || (st->dims == 2 && y != r->x[1])) {
                if (r->marker) {
                    out_key[count] = key, out_code[count++] = 0;
                } else {
                    lmb_machines_keep(m, i);
                    lmb_machines_apply(m, key, x, y, st->smooth);
                }
            }
        }
        for (uint32_t t = 0; t < st->tr_count; t++) {
            const lmb_mtrans *tr = r->def->trans + st->tr_first + t;
            if (lmb_machines_holds(m, key, tr, dt)) {
                out_key[count] = key;
                out_code[count++] = tr->at_marker ? -(int32_t)(t + 1) : (int32_t)(t + 1);
                break;
            }
        }
    }
    return count;
}

void lmb_machines_source(const lmb_machines *m, uint32_t i, uint32_t k, lmb_kept *out) {
    const lmb_plan *p = m->plan;
    if (m->kept[i]) {
        *out = m->kept_src[(size_t)i * p->source_count + k];
        return;
    }
    size_t at = (size_t)k * m->instance_count + i;
    const lmb_sampler *s = p->src + k;
    out->clip = s->clip[i], out->time = s->time[i], out->rate = s->rate[i];
    out->loop = s->loop[i], out->weight = p->weight[at], out->prev = p->prev_time[at];
}

/* ---- root motion ---------------------------------------------------------- */

/* Clip c's track of (joint, path) into out: 1, or 0 when it has none. */
static int root_track(const lmb_clip *c, uint32_t joint, uint32_t path, lmb_track *out) {
    memset(out, 0, sizeof *out);
    if (c->packed.streams) {
        if (joint >= c->joint_span || !lmb_packed_tracks(&c->packed, joint, path)) return 0;
        out->target = joint, out->path = (uint8_t)path, out->width = path == LMB_PATH_R ? 4 : 3;
        return 1;
    }
    for (uint32_t k = 0; k < c->joint_track_count; k++)
        if (c->tracks[k].target == joint && c->tracks[k].path == path) {
            *out = c->tracks[k];
            return 1;
        }
    return 0;
}

/* t wrapped into [0, d) as limber.anim does it (fmod where the floor
 * formula rounds outside). */
static double wrap_time(double t, double d) {
    double r = t - d * floor(t / d);
    if (!(r >= 0.0 && r < d)) {
        r = fmod(t, d);
        if (r != r) return 0.0;
        if (r < 0.0) r += d;
        if (r >= d) r = 0.0;
    }
    return r;
}

static double wrap_angle(double a) {
    const double pi = 3.14159265358979323846;
    return a - 2.0 * pi * floor((a + pi) / (2.0 * pi));
}

static void sample_at(const lmb_clip *c, const lmb_track *tr, double x, float *v) {
    lmb_cursor cur = {0, 0.0f, 0.0f};
    lmb_track_sample(c, tr, lmb_clip_time(c, x, 0), &cur, v);
}

static double yaw_at(const lmb_clip *c, const lmb_track *tr, double x) {
    float q[4];
    sample_at(c, tr, x, q);
    double qx = (double)q[0], qy = (double)q[1], qz = (double)q[2], qw = (double)q[3];
    return atan2(2.0 * (qw * qy + qx * qz), 1.0 - 2.0 * (qy * qy + qx * qx));
}

static void find_roots(lmb_machines *m, uint32_t joint) {
    if (m->root_joint == joint) return;
    const lmb_sampler *s = m->plan->src;
    for (uint32_t c = 0; c < s->clip_count; c++) {
        const lmb_clip *clip = s->clips[c];
        lmb_root_tracks *r = m->roots + c;
        r->has_t = (uint8_t)root_track(clip, joint, LMB_PATH_T, &r->t);
        r->has_r = (uint8_t)root_track(clip, joint, LMB_PATH_R, &r->r);
        r->lap[0] = r->lap[1] = r->lap[2] = r->lap[3] = 0.0;
        if (r->has_t) {
            double d = (double)clip->duration;
            float e[3], b[3];
            sample_at(clip, &r->t, d, e);
            sample_at(clip, &r->t, 0.0, b);
            for (int k = 0; k < 3; k++)
                r->lap[k] = (double)e[k] - (double)b[k];
            if (r->has_r) r->lap[3] = wrap_angle(yaw_at(clip, &r->r, d) - yaw_at(clip, &r->r, 0.0));
        }
    }
    m->root_joint = joint;
}

/* The root's position and yaw at unwrapped time x (looping) or clamped x. */
static void root_pos(const lmb_clip *c, const lmb_root_tracks *r, double x, int loop,
                     double out[4]) {
    double d = (double)c->duration, laps = 0.0;
    if (loop && d > 0.0) {
        laps = floor(x / d);
        x = wrap_time(x, d);
    } else {
        x = x < 0.0 ? 0.0 : (x > d ? d : x);
    }
    out[0] = out[1] = out[2] = out[3] = 0.0;
    if (!r->has_t) return;
    float p[3];
    sample_at(c, &r->t, x, p);
    out[0] = (double)p[0], out[1] = (double)p[1], out[2] = (double)p[2];
    out[3] = r->has_r ? yaw_at(c, &r->r, x) : 0.0;
    if (laps != 0.0) {
        for (int k = 0; k < 3; k++)
            out[k] += laps * r->lap[k];
        if (r->has_r) out[3] += laps * r->lap[3];
    }
}

void lmb_machines_root(lmb_machines *m, uint32_t joint, uint32_t i, double out[4]) {
    const lmb_plan *p = m->plan;
    const uint32_t Ly = m->layer_count;
    double dt = p->last_dt, f[LMB_STACK_MAX_LAYERS];
    uint8_t live[LMB_STACK_MAX_LAYERS];
    out[0] = out[1] = out[2] = out[3] = 0.0;
    if (dt == 0.0) return;
    find_roots(m, joint);
    /* per layer: its weight at the joint and whether a source has weight */
    for (uint32_t n = 0; n < Ly; n++) {
        const lmb_stack_layer *ly = p->layers + n;
        float lw = m->kept[i] ? m->kept_layer[(size_t)i * Ly + n]
                              : p->layer_weight[(size_t)n * m->instance_count + i];
        f[n] = (double)lw * (ly->mask ? (double)ly->mask[joint] : 1.0);
        live[n] = 0;
        for (uint32_t k = ly->first_source; k < ly->first_source + ly->source_count; k++) {
            lmb_kept e;
            lmb_machines_source(m, i, k, &e);
            if (e.clip >= 0 && e.weight > 0.0f) live[n] = 1;
        }
    }
    for (uint32_t n = 0; n < Ly; n++) {
        const lmb_stack_layer *ly = p->layers + n;
        if (!live[n] || !(f[n] > 0.0) || ly->mode != LMB_LAYER_OVERRIDE) continue;
        double sum = 0.0;
        for (uint32_t k = ly->first_source; k < ly->first_source + ly->source_count; k++) {
            lmb_kept e;
            lmb_machines_source(m, i, k, &e);
            if (e.clip >= 0 && e.weight > 0.0f) sum += (double)e.weight;
        }
        for (uint32_t k = ly->first_source; k < ly->first_source + ly->source_count; k++) {
            lmb_kept e;
            lmb_machines_source(m, i, k, &e);
            if (e.clip < 0 || !(e.weight > 0.0f)) continue;
            double w = f[n] * (double)e.weight / sum;
            for (uint32_t up = n + 1; up < Ly; up++) /* what the override layers above leave */
                if (live[up] && f[up] > 0.0 && p->layers[up].mode == LMB_LAYER_OVERRIDE)
                    w = w * (1.0 - f[up]);
            if (!(w > 0.0)) continue;
            const lmb_clip *c = p->src[k].clips[e.clip];
            double t0 = e.prev, delta = e.loop ? (double)e.rate * dt : e.time - e.prev;
            double t1 = t0 + delta;
            t1 = t1 > 3.4e38 ? 3.4e38 : (t1 < -3.4e38 ? -3.4e38 : t1);
            double a[4], b[4];
            root_pos(c, m->roots + e.clip, t0, e.loop, a);
            root_pos(c, m->roots + e.clip, t1, e.loop, b);
            out[0] += w * (b[0] - a[0]), out[1] += w * (b[1] - a[1]), out[2] += w * (b[2] - a[2]);
            out[3] += w * wrap_angle(b[3] - a[3]);
        }
    }
    if (fabs(out[3]) < 1e-300) out[3] = 0.0;
}

/* ---- events ----------------------------------------------------------------- */

static void clip_events(const lmb_clip_events *ev, double d, double t0, double delta, int loop,
                        lmb_event_hit *h, lmb_event_fn fn, void *ctx) {
    uint32_t n = ev->count;
    if (!loop || d <= 0.0) {
        double a = t0 < 0.0 ? 0.0 : (t0 > d ? d : t0), b = a + delta;
        b = b < 0.0 ? 0.0 : (b > d ? d : b);
        h->looped = 0;
        if (b > a) {
            for (uint32_t k = 0; k < n; k++)
                if (ev->times[k] > a && ev->times[k] <= b) h->event = k, fn(ctx, h);
        } else if (b < a) {
            for (uint32_t k = n; k-- > 0;)
                if (ev->times[k] < a && ev->times[k] >= b) h->event = k, fn(ctx, h);
        }
        return;
    }
    double a = wrap_time(t0, d), b = a + delta, base = 0.0;
    h->looped = 1;
    if (delta > 0.0) {
        for (int laps = 0; base <= b && laps < 10000; laps++, base += d)
            for (uint32_t k = 0; k < n; k++) {
                double e = base + ev->loop_times[k];
                if (e > a && e <= b) h->event = k, fn(ctx, h);
            }
    } else if (delta < 0.0) {
        for (int laps = 0; base + d > b && laps < 10000; laps++, base -= d)
            for (uint32_t k = n; k-- > 0;) {
                double e = base + ev->loop_times[k];
                if (e < a && e >= b) h->event = k, fn(ctx, h);
            }
    }
}

void lmb_machines_events(const lmb_machines *m, uint32_t i, const double *threshold,
                         lmb_event_fn fn, void *ctx) {
    const lmb_plan *p = m->plan;
    const uint32_t Ly = m->layer_count;
    double dt = p->last_dt;
    if (dt == 0.0) return;
    for (uint32_t n = 0; n < Ly; n++) {
        const lmb_stack_layer *ly = p->layers + n;
        double f = (double)(m->kept[i] ? m->kept_layer[(size_t)i * Ly + n]
                                       : p->layer_weight[(size_t)n * m->instance_count + i]);
        double sum = 0.0;
        for (uint32_t k = ly->first_source; k < ly->first_source + ly->source_count; k++) {
            lmb_kept e;
            lmb_machines_source(m, i, k, &e);
            if (e.clip >= 0 && e.weight > 0.0f) sum += (double)e.weight;
        }
        if (!(sum > 0.0) || !(f > 0.0)) continue;
        for (uint32_t k = ly->first_source; k < ly->first_source + ly->source_count; k++) {
            lmb_kept e;
            lmb_machines_source(m, i, k, &e);
            if (e.clip < 0 || !(e.weight > 0.0f)) continue;
            double w = f * (double)e.weight / sum;
            if (!(w > threshold[n] || (threshold[n] == 0.0 && w > 0.0))) continue;
            const lmb_clip_events *ev = m->events + e.clip;
            if (ev->count == 0) continue;
            double t0 = e.prev, delta = e.loop ? (double)e.rate * dt : e.time - e.prev;
            lmb_event_hit h = {i, n, k - ly->first_source, (uint32_t)e.clip, 0, 0, w};
            clip_events(ev, (double)p->src[k].clips[e.clip]->duration, t0, delta, e.loop, &h, fn,
                        ctx);
        }
    }
}

uint32_t lmb_machines_markers(lmb_machines *m, double dt, uint32_t *out_key, int32_t *out_code,
                              double *out_el) {
    uint32_t count = 0, R = m->instance_count * m->layer_count;
    for (uint32_t key = 0; key < R; key++) {
        lmb_mrun *r = m->runs + key;
        if (!r->synced) continue;
        double el = r->el + dt;
        int land = (dt > 0.0 && el >= r->hi - 1e-9) || (dt < 0.0 && -el >= r->lo - 1e-9);
        int code = (r->restore ? 1 : 0) | (land ? 2 : 0);
        if (code) out_key[count] = key, out_code[count] = code, out_el[count++] = r->el;
        if (!land) r->el = el;
    }
    return count;
}
