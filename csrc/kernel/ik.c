/* ik.c: two-bone and aim IK on pose batches (see ik.h). */
#include "ik.h"

#include <math.h>
#include <string.h>

/* ---- double-precision vectors and quaternions (x y z w) --------------- */

static void load3(const float *v, double o[3]) {
    o[0] = (double)v[0], o[1] = (double)v[1], o[2] = (double)v[2];
}

typedef struct dq {
    double x, y, z, w;
} dq;

static double dot3(const double a[3], const double b[3]) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static double len3(const double a[3]) {
    return sqrt(dot3(a, a));
}

static void sub3(const double a[3], const double b[3], double o[3]) {
    o[0] = a[0] - b[0], o[1] = a[1] - b[1], o[2] = a[2] - b[2];
}

static void cross3(const double a[3], const double b[3], double o[3]) {
    double x = a[1] * b[2] - a[2] * b[1], y = a[2] * b[0] - a[0] * b[2],
           z = a[0] * b[1] - a[1] * b[0];
    o[0] = x, o[1] = y, o[2] = z;
}

/* a - (a . u) u for a unit u */
static void reject3(const double a[3], const double u[3], double o[3]) {
    double d = dot3(a, u);
    o[0] = a[0] - d * u[0], o[1] = a[1] - d * u[1], o[2] = a[2] - d * u[2];
}

static int normalize3(double a[3]) {
    double l = len3(a);
    if (!(l > 1e-12)) return 0;
    a[0] /= l, a[1] /= l, a[2] /= l;
    return 1;
}

static dq qmul(dq a, dq b) {
    dq o;
    o.x = a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y;
    o.y = a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x;
    o.z = a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w;
    o.w = a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z;
    return o;
}

static dq qconj(dq a) {
    dq o = {-a.x, -a.y, -a.z, a.w};
    return o;
}

static dq qnorm(dq a) {
    double l = sqrt(a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w);
    dq o = {a.x / l, a.y / l, a.z / l, a.w / l};
    return o;
}

static void qrot(dq q, const double v[3], double o[3]) {
    /* v + 2 w (q x v) + 2 q x (q x v) */
    double u[3] = {q.x, q.y, q.z}, t[3], s[3];
    cross3(u, v, t);
    t[0] *= 2, t[1] *= 2, t[2] *= 2;
    cross3(u, t, s);
    o[0] = v[0] + q.w * t[0] + s[0];
    o[1] = v[1] + q.w * t[1] + s[1];
    o[2] = v[2] + q.w * t[2] + s[2];
}

/* Any unit vector perpendicular to unit a. */
static void perpendicular(const double a[3], double o[3]) {
    double e[3] = {0, 0, 0};
    int k = fabs(a[0]) < fabs(a[1]) ? (fabs(a[0]) < fabs(a[2]) ? 0 : 2)
                                    : (fabs(a[1]) < fabs(a[2]) ? 1 : 2);
    e[k] = 1;
    cross3(a, e, o);
    normalize3(o);
}

/* The smallest rotation taking direction a to direction b (unit vectors). */
static dq qarc(const double a[3], const double b[3]) {
    double d = dot3(a, b);
    if (d < -1.0 + 1e-12) {
        double p[3];
        perpendicular(a, p);
        dq o = {p[0], p[1], p[2], 0};
        return o;
    }
    double c[3];
    cross3(a, b, c);
    dq o = {c[0], c[1], c[2], 1.0 + d};
    return qnorm(o);
}

/* qarc, but a half turn (a = -b) turns about `axis` (unit, perpendicular
 * to a) instead of an arbitrary perpendicular. */
static dq qarc_about(const double a[3], const double b[3], const double axis[3]) {
    if (dot3(a, b) < -1.0 + 1e-12) {
        dq o = {axis[0], axis[1], axis[2], 0};
        return o;
    }
    return qarc(a, b);
}

/* The rotation about unit `axis` taking u to p (both perpendicular to it,
 * unit): opposite vectors turn a half turn about the axis itself. */
static dq qtwist(const double u[3], const double p[3], const double axis[3]) {
    double c[3];
    cross3(u, p, c);
    double ang = atan2(dot3(c, axis), dot3(u, p));
    double s = sin(ang / 2);
    dq o = {axis[0] * s, axis[1] * s, axis[2] * s, cos(ang / 2)};
    return o;
}

/* The rotation angle of unit q, in [0, pi]. */
static double qangle(dq q) {
    double w = fabs(q.w) > 1.0 ? 1.0 : fabs(q.w);
    return 2.0 * acos(w);
}

/* slerp(identity, q, t) for unit q, t in [0, 1]. */
static dq qscale(dq q, double t) {
    if (q.w < 0) q.x = -q.x, q.y = -q.y, q.z = -q.z, q.w = -q.w;
    double th = acos(q.w > 1.0 ? 1.0 : q.w);
    double s = sin(th);
    if (s < 1e-9) {
        dq o = {q.x * t, q.y * t, q.z * t, 1.0 - t + q.w * t};
        return qnorm(o);
    }
    double k = sin(t * th) / s;
    dq o = {q.x * k, q.y * k, q.z * k, cos(t * th)};
    return o;
}

/* slerp(a, b, t) of unit quaternions along the shorter arc. */
static dq qslerp(dq a, dq b, double t) {
    return qmul(qscale(qmul(b, qconj(a)), t), a);
}

/* Rotation (normalised columns) of a column-major affine matrix. */
static dq qfrom_matrix(const float *m) {
    double c[3][3];
    for (int k = 0; k < 3; k++) {
        double v[3];
        load3(m + k * 4, v);
        if (!normalize3(v)) v[0] = k == 0, v[1] = k == 1, v[2] = k == 2;
        c[k][0] = v[0], c[k][1] = v[1], c[k][2] = v[2];
    }
    /* element (row r, column k) = c[k][r] */
    double tr = c[0][0] + c[1][1] + c[2][2];
    dq q;
    if (tr > 0) {
        double s = sqrt(tr + 1.0) * 2;
        q.w = 0.25 * s;
        q.x = (c[1][2] - c[2][1]) / s;
        q.y = (c[2][0] - c[0][2]) / s;
        q.z = (c[0][1] - c[1][0]) / s;
    } else if (c[0][0] > c[1][1] && c[0][0] > c[2][2]) {
        double s = sqrt(1.0 + c[0][0] - c[1][1] - c[2][2]) * 2;
        q.w = (c[1][2] - c[2][1]) / s;
        q.x = 0.25 * s;
        q.y = (c[1][0] + c[0][1]) / s;
        q.z = (c[2][0] + c[0][2]) / s;
    } else if (c[1][1] > c[2][2]) {
        double s = sqrt(1.0 + c[1][1] - c[0][0] - c[2][2]) * 2;
        q.w = (c[2][0] - c[0][2]) / s;
        q.x = (c[1][0] + c[0][1]) / s;
        q.y = 0.25 * s;
        q.z = (c[2][1] + c[1][2]) / s;
    } else {
        double s = sqrt(1.0 + c[2][2] - c[0][0] - c[1][1]) * 2;
        q.w = (c[0][1] - c[1][0]) / s;
        q.x = (c[2][0] + c[0][2]) / s;
        q.y = (c[2][1] + c[1][2]) / s;
        q.z = 0.25 * s;
    }
    return qnorm(q);
}

/* ---- pose access ------------------------------------------------------- */

static const float *model_of(const lmb_pose *p, uint32_t i, uint32_t j) {
    return p->model + ((size_t)i * p->joint_count + j) * 16;
}

static void position_of(const lmb_pose *p, uint32_t i, uint32_t j, double o[3]) {
    const float *m = model_of(p, i, j);
    load3(m + 12, o);
}

/* Model rotation of joint j's parent (the root matrix's for a root). */
static dq parent_rotation(const lmb_pose *p, uint32_t i, uint32_t j) {
    uint16_t par = p->skel->parent[j];
    if (par != LMB_NO_PARENT) return qfrom_matrix(model_of(p, i, par));
    if (p->has_root) return qfrom_matrix(p->root + (size_t)i * 16);
    dq id = {0, 0, 0, 1};
    return id;
}

static dq local_rotation(const lmb_pose *p, uint32_t i, uint32_t j) {
    float trs[LMB_TRS_FLOATS];
    lmb_pose_get_trs(p, i, j, trs);
    dq q = {(double)trs[3], (double)trs[4], (double)trs[5], (double)trs[6]};
    return q;
}

/* Writes a local rotation; a degenerate result (a pose with zero or
 * enormous scales can give one) leaves the joint as it was. */
static void set_local_rotation(lmb_pose *p, uint32_t i, uint32_t j, dq q) {
    float trs[LMB_TRS_FLOATS];
    double l = sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w);
    if (!(l > 1e-12 && l < 1e300)) return; /* also NaN */
    lmb_pose_get_trs(p, i, j, trs);
    q = qnorm(q);
    trs[3] = (float)q.x, trs[4] = (float)q.y, trs[5] = (float)q.z, trs[6] = (float)q.w;
    lmb_pose_set_trs(p, i, j, trs);
}

/* o = the float vector v (3 numbers) - a */
static void vec_minus(const float *v, const double a[3], double o[3]) {
    for (int c = 0; c < 3; c++)
        o[c] = (double)v[c] - a[c];
}

static int is_below(const lmb_skeleton *s, uint32_t j, uint32_t ancestor) {
    while (j != LMB_NO_PARENT && j != ancestor)
        j = s->parent[j];
    return j == ancestor;
}

/* Model matrices of instances [first, first + count) from their dirty joints. */
static void update_models(lmb_pose *p, uint32_t first, uint32_t count) {
    if (count == 0) return;
    uint32_t b0 = first / LMB_LANES, b1 = (first + count - 1) / LMB_LANES;
    lmb_pose_local_to_model(p, b0, b1 - b0 + 1, 0);
}

static lmb_status check_numbers(const float *v, uint32_t n, const char *field, uint32_t per,
                                lmb_error *err) {
    for (uint32_t k = 0; k < n * per; k++)
        if (!isfinite(v[k]))
            return lmb_error_set(err, LMB_ENAN, field, "instance {i}: {v} is not a finite number",
                                 k / per, 0, (double)v[k], 0);
    return LMB_OK;
}

static lmb_status check_common(const lmb_pose *p, uint32_t first, uint32_t count,
                               const float *targets, const float *poles, const float *weights,
                               lmb_error *err) {
    if ((uint64_t)first + count > p->instance_count)
        return lmb_error_set(err, LMB_ERANGE, "instances",
                             "instances {i} .. {v} out of range [1, {l}]", first, 0,
                             (double)first + (double)count, (double)p->instance_count);
    lmb_status st = check_numbers(targets, count, "targets", 3, err);
    if (st == LMB_OK && poles) st = check_numbers(poles, count, "poles", 3, err);
    if (st == LMB_OK && weights) {
        st = check_numbers(weights, count, "weights", 1, err);
        for (uint32_t k = 0; st == LMB_OK && k < count; k++)
            if (weights[k] < 0.0f || weights[k] > 1.0f)
                st = lmb_error_set(err, LMB_ERANGE, "weights",
                                   "instance {i}: weight {v} outside [0, 1]", k, 0,
                                   (double)weights[k], 1);
    }
    return st;
}

/* ---- two-bone ---------------------------------------------------------- */

lmb_status lmb_ik_two_bone_validate(const lmb_ik_two_bone *j, lmb_error *err) {
    lmb_error_clear(err);
    const lmb_skeleton *s = j->pose->skel;
    uint32_t J = s->joint_count;
    uint32_t jt[3] = {j->root, j->mid, j->tip};
    for (int k = 0; k < 3; k++)
        if (jt[k] >= J)
            return lmb_error_set(err, LMB_ERANGE, "joints", "joint {v} out of range [1, {l}]",
                                 (uint32_t)k, 0, (double)jt[k] + 1, (double)J);
    if (j->mid == j->root || j->tip == j->mid || !is_below(s, j->mid, j->root) ||
        !is_below(s, j->tip, j->mid))
        return lmb_error_set(err, LMB_EINVAL, "joints",
                             "the chain must go down the hierarchy: mid below root, tip below "
                             "mid",
                             0, 0, 0, 0);
    if (!(j->soften > 0.0f && j->soften <= 1.0f))
        return lmb_error_set(err, LMB_ERANGE, "soften", "soften {v} outside (0, 1]", 0, 0,
                             (double)j->soften, 1);
    return check_common(j->pose, j->first, j->count, j->targets, j->poles, j->weights, err);
}

static void two_bone_one(const lmb_ik_two_bone *j, uint32_t k) {
    lmb_pose *p = j->pose;
    uint32_t i = j->first + k;
    double w = j->weights ? (double)j->weights[k] : 1.0;
    if (w <= 0.0) return;
    double A[3], B[3], C[3], T[3];
    load3(j->targets + (size_t)k * 3, T);
    position_of(p, i, j->root, A);
    position_of(p, i, j->mid, B);
    position_of(p, i, j->tip, C);
    double ab[3], bc[3], ac[3], at[3];
    sub3(B, A, ab);
    sub3(C, B, bc);
    sub3(C, A, ac);
    sub3(T, A, at);
    double l1 = len3(ab), l2 = len3(bc);
    if (!(l1 > 1e-12 && l2 > 1e-12)) return; /* a bone of length zero: nothing to bend */
    double u[3] = {at[0], at[1], at[2]};
    double dist = len3(at);
    if (!normalize3(u)) {
        u[0] = ac[0], u[1] = ac[1], u[2] = ac[2];
        if (!normalize3(u)) perpendicular(ab, u);
        dist = 0;
    }
    double L = l1 + l2, d = dist;
    if (j->soften < 1.0f) {
        double ds = (double)j->soften * L;
        if (d > ds) d = ds + (L - ds) * (1.0 - exp(-(d - ds) / (L - ds)));
    }
    double dmin = fabs(l1 - l2);
    if (d > L) d = L;
    if (d < dmin) d = dmin;
    /* the bend direction: the pole, else the current bend, else any */
    double v[3] = {0, 0, 0};
    int ok = 0;
    if (j->poles && (!j->pole_on || j->pole_on[k])) {
        double pv[3];
        vec_minus(j->poles + (size_t)k * 3, A, pv);
        double pl = len3(pv);
        reject3(pv, u, v);
        ok = len3(v) > 1e-9 * pl && normalize3(v);
    }
    if (!ok) {
        reject3(ab, u, v);
        ok = len3(v) > 1e-9 * l1 && normalize3(v);
    }
    if (!ok) perpendicular(u, v);
    double x = d > 1e-12 ? (l1 * l1 - l2 * l2 + d * d) / (2.0 * d) : 0.0;
    double h2 = l1 * l1 - x * x, h = h2 > 0 ? sqrt(h2) : 0.0;
    double nb[3], nc[3]; /* new mid and tip, relative to A */
    for (int c = 0; c < 3; c++)
        nb[c] = u[c] * x + v[c] * h, nc[c] = u[c] * d;
    double a_dir[3] = {ab[0] / l1, ab[1] / l1, ab[2] / l1}, b_dir[3] = {nb[0], nb[1], nb[2]};
    normalize3(b_dir);
    double hinge[3]; /* a half turn of the root turns about the bend's normal */
    cross3(u, v, hinge);
    reject3(hinge, a_dir, hinge);
    if (!normalize3(hinge)) perpendicular(a_dir, hinge);
    dq r1 = qarc_about(a_dir, b_dir, hinge);
    double c1[3], b1[3];
    qrot(r1, ac, c1); /* the tip after r1, relative to A */
    qrot(r1, ab, b1);
    double from[3], to[3];
    sub3(c1, b1, from);
    sub3(nc, b1, to);
    dq r2 = {0, 0, 0, 1};
    if (normalize3(from) && normalize3(to)) {
        double ax2[3];
        cross3(from, to, ax2);
        if (!normalize3(ax2)) perpendicular(from, ax2);
        r2 = qarc_about(from, to, ax2);
    }
    /* local rotations at full weight: q' = conj(new parent model rotation) *
     * new model rotation; a weight below 1 slerps each joint's local
     * rotation from before toward it (the knee stays in its hinge plane) */
    dq pa = parent_rotation(p, i, j->root), pb = parent_rotation(p, i, j->mid);
    dq pc = parent_rotation(p, i, j->tip);
    dq qa = local_rotation(p, i, j->root), qb = local_rotation(p, i, j->mid);
    dq qc = local_rotation(p, i, j->tip);
    dq r21 = qmul(r2, r1);
    dq na = qmul(qconj(pa), qmul(r1, qmul(pa, qa)));
    dq nm = qmul(qconj(qmul(r1, pb)), qmul(r21, qmul(pb, qb)));
    dq nt = qmul(qconj(qmul(r21, pc)), qmul(pc, qc));
    if (w < 1.0) {
        na = qslerp(qnorm(qa), qnorm(na), w);
        nm = qslerp(qnorm(qb), qnorm(nm), w);
        nt = qslerp(qnorm(qc), qnorm(nt), w);
    }
    set_local_rotation(p, i, j->root, na);
    set_local_rotation(p, i, j->mid, nm);
    if (j->keep_tip) set_local_rotation(p, i, j->tip, nt);
}

void lmb_ik_two_bone_run(const lmb_ik_two_bone *j) {
    update_models(j->pose, j->first, j->count); /* solve on current model matrices */
    for (uint32_t k = 0; k < j->count; k++)
        two_bone_one(j, k);
    update_models(j->pose, j->first, j->count);
}

/* ---- aim --------------------------------------------------------------- */

lmb_status lmb_ik_aim_validate(const lmb_ik_aim *j, lmb_error *err) {
    lmb_error_clear(err);
    const lmb_skeleton *s = j->pose->skel;
    uint32_t J = s->joint_count;
    if (j->joint >= J || j->effector >= J)
        return lmb_error_set(err, LMB_ERANGE, "joints", "joint {v} out of range [1, {l}]", 0, 0,
                             (double)(j->joint >= J ? j->joint : j->effector) + 1, (double)J);
    if (!is_below(s, j->effector, j->joint))
        return lmb_error_set(err, LMB_EINVAL, "joints",
                             "the effector must be the joint or below it", 0, 0, 0, 0);
    double f[3];
    load3(j->forward, f);
    for (int c = 0; c < 3; c++) {
        if (!isfinite(j->forward[c]))
            return lmb_error_set(err, LMB_ENAN, "forward", "{v} is not a finite number", 0, 0,
                                 (double)j->forward[c], 0);
        if (!isfinite(j->up[c]))
            return lmb_error_set(err, LMB_ENAN, "up", "{v} is not a finite number", 0, 0,
                                 (double)j->up[c], 0);
    }
    if (!normalize3(f))
        return lmb_error_set(err, LMB_EINVAL, "forward", "the forward axis is zero", 0, 0, 0, 0);
    if (!(j->limit >= 0.0f && (double)j->limit <= 3.14159265358979323846 + 1e-6))
        return lmb_error_set(err, LMB_ERANGE, "limit", "limit {v} outside [0, pi]", 0, 0,
                             (double)j->limit, 3.14159265358979323846);
    return check_common(j->pose, j->first, j->count, j->targets, j->poles, j->weights, err);
}

static void aim_one(const lmb_ik_aim *j, uint32_t k) {
    lmb_pose *p = j->pose;
    uint32_t i = j->first + k;
    double w = j->weights ? (double)j->weights[k] : 1.0;
    if (w <= 0.0) return;
    double E[3], T[3];
    load3(j->targets + (size_t)k * 3, T);
    position_of(p, i, j->effector, E);
    dq qe = qfrom_matrix(model_of(p, i, j->effector));
    double f[3], F[3], D[3];
    load3(j->forward, f);
    normalize3(f);
    qrot(qe, f, F);
    sub3(T, E, D);
    if (!normalize3(D) || !normalize3(F)) return; /* the target at the effector */
    double axis[3]; /* a half turn turns about `up` (made perpendicular), else any */
    double up0[3];
    load3(j->up, up0);
    qrot(qe, up0, axis);
    reject3(axis, F, axis);
    if (!normalize3(axis)) perpendicular(F, axis);
    dq r = qarc_about(F, D, axis);
    double angle = qangle(r);
    if (j->limit > 0.0f && angle > (double)j->limit) r = qscale(r, (double)j->limit / angle);
    double up[3];
    load3(j->up, up);
    if (j->poles && (!j->pole_on || j->pole_on[k]) && normalize3(up)) {
        double Dn[3], U[3], uu[3], pp[3];
        qrot(r, F, Dn);
        normalize3(Dn);
        dq re = qmul(r, qe);
        qrot(re, up, U);
        double pv[3];
        vec_minus(j->poles + (size_t)k * 3, E, pv);
        reject3(U, Dn, uu);
        reject3(pv, Dn, pp);
        if (normalize3(uu) && normalize3(pp)) r = qmul(qtwist(uu, pp, Dn), r);
    }
    if (w < 1.0) r = qscale(r, w);
    dq pj = parent_rotation(p, i, j->joint), qj = local_rotation(p, i, j->joint);
    set_local_rotation(p, i, j->joint, qmul(qconj(pj), qmul(r, qmul(pj, qj))));
}

void lmb_ik_aim_run(const lmb_ik_aim *j) {
    update_models(j->pose, j->first, j->count);
    for (uint32_t k = 0; k < j->count; k++)
        aim_one(j, k);
    update_models(j->pose, j->first, j->count);
}
