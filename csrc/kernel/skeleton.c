/* skeleton.c: building and checking flat skeletons. */
#include "skeleton.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cglm/cglm.h>

#define HEADER_BYTES lmb_align_up(sizeof(lmb_skeleton), 16)

size_t lmb_skeleton_bytes(uint32_t count) {
    size_t n = count;
    return HEADER_BYTES + lmb_align_up(n * sizeof(uint16_t), 16) +
           n * LMB_TRS_FLOATS * sizeof(float) + n * 16 * sizeof(float) + 16;
}

lmb_skeleton *lmb_skeleton_place(void *mem, uint32_t count) {
    size_t n = count;
    lmb_skeleton *s = (lmb_skeleton *)mem;
    unsigned char *p = (unsigned char *)mem + HEADER_BYTES;
    s->joint_count = count;
    s->root_count = 0;
    s->parent = (uint16_t *)(void *)p;
    p += lmb_align_up(n * sizeof(uint16_t), 16);
    s->inverse_bind = (float *)(void *)p;
    p += n * 16 * sizeof(float);
    s->rest = (float *)(void *)p;
    return s;
}

lmb_status lmb_skeleton_order_into(uint32_t count, const uint32_t *in_parent, uint32_t *order,
                                   uint32_t *remap, uint32_t *scratch, uint32_t *bad) {
    if (count == 0 || count > LMB_MAX_JOINTS) {
        *bad = count;
        return LMB_ERANGE;
    }
    int sorted = 1;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t p = in_parent[i];
        if (p == LMB_NO_PARENT) continue;
        if (p >= count) {
            *bad = i;
            return LMB_ERANGE;
        }
        if (p >= i) sorted = 0;
    }
    if (sorted) {
        for (uint32_t i = 0; i < count; i++)
            order[i] = remap[i] = i;
        return LMB_OK;
    }
    /* Children in CSR form (first[p] .. first[p+1]), then an explicit-stack
     * depth-first walk from the roots: no recursion, so deep chains are fine. */
    uint32_t *first = scratch;           /* count + 2 */
    uint32_t *child = first + count + 2; /* count */
    uint32_t *stack = child + count;     /* count */
    memset(first, 0, ((size_t)count + 2) * sizeof(uint32_t));
    for (uint32_t i = 0; i < count; i++)
        if (in_parent[i] != LMB_NO_PARENT) first[in_parent[i] + 2]++;
    for (uint32_t i = 2; i < count + 2; i++)
        first[i] += first[i - 1];
    for (uint32_t i = 0; i < count; i++)
        if (in_parent[i] != LMB_NO_PARENT) child[first[in_parent[i] + 1]++] = i;
    /* now first[p] .. first[p+1] are the children of p, in input order */
    uint32_t placed = 0;
    for (uint32_t r = 0; r < count; r++) {
        if (in_parent[r] != LMB_NO_PARENT) continue;
        uint32_t top = 0;
        stack[top++] = r;
        while (top) {
            uint32_t j = stack[--top];
            remap[j] = placed;
            order[placed++] = j;
            /* push children in reverse so the first child is visited first */
            for (uint32_t c = first[j + 1]; c > first[j]; c--)
                stack[top++] = child[c - 1];
        }
    }
    lmb_status st = LMB_OK;
    if (placed < count) {
        /* Every joint not reached from a root hangs below a cycle. Mark the
         * reached ones, then walk up from an unreached joint: after count
         * steps we are on the cycle itself. */
        memset(stack, 0, (size_t)count * sizeof(uint32_t));
        for (uint32_t k = 0; k < placed; k++)
            stack[order[k]] = 1;
        uint32_t j = 0;
        while (stack[j])
            j++;
        for (uint32_t k = 0; k < count; k++)
            j = in_parent[j];
        *bad = j;
        st = LMB_ECYCLE;
    }
    return st;
}

lmb_status lmb_skeleton_order(uint32_t count, const uint32_t *in_parent, uint32_t *order,
                              uint32_t *remap, uint32_t *bad) {
    if (count == 0 || count > LMB_MAX_JOINTS)
        return lmb_skeleton_order_into(count, in_parent, order, remap, NULL, bad);
    uint32_t *scratch = (uint32_t *)malloc(lmb_skeleton_order_scratch(count) * sizeof(uint32_t));
    if (!scratch) return LMB_ENOMEM;
    lmb_status st = lmb_skeleton_order_into(count, in_parent, order, remap, scratch, bad);
    free(scratch);
    return st;
}

static int finite_all(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

lmb_status lmb_skeleton_validate(lmb_skeleton *s, uint32_t *bad) {
    uint32_t roots = 0;
    for (uint32_t i = 0; i < s->joint_count; i++) {
        uint32_t p = s->parent[i];
        if (p == LMB_NO_PARENT) {
            roots++;
        } else if (p >= i) {
            *bad = i;
            return LMB_ERANGE;
        }
        float *trs = s->rest + (size_t)i * LMB_TRS_FLOATS;
        if (!finite_all(trs, LMB_TRS_FLOATS) || !finite_all(s->inverse_bind + (size_t)i * 16, 16)) {
            *bad = i;
            return LMB_ENAN;
        }
        double len = sqrt((double)trs[3] * (double)trs[3] + (double)trs[4] * (double)trs[4] +
                          (double)trs[5] * (double)trs[5] + (double)trs[6] * (double)trs[6]);
        if (!(len > 1e-12)) {
            *bad = i;
            return LMB_EINVAL;
        }
        for (int k = 3; k < 7; k++)
            trs[k] = (float)((double)trs[k] / len);
    }
    s->root_count = roots;
    return LMB_OK;
}

void lmb_trs_to_mat4(const float trs[LMB_TRS_FLOATS], float m[16]) {
    mat4 out;
    versor q = {trs[3], trs[4], trs[5], trs[6]};
    vec3 s = {trs[7], trs[8], trs[9]};
    glm_quat_mat4(q, out);
    glm_scale(out, s);
    out[3][0] = trs[0];
    out[3][1] = trs[1];
    out[3][2] = trs[2];
    memcpy(m, out, sizeof out);
}
