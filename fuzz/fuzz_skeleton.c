/* fuzz_skeleton.c: joint hierarchies as a glTF file gives them
 * (lmb_skeleton_order: any order, cycles, deep chains) and the rest-pose
 * check (lmb_skeleton_validate: NaN, infinities, zero quaternions).
 * Input: a mode byte, a joint count, parent indices (2 bytes each, 0xffff
 * = root; mode 1 builds a chain in reverse order from the count alone),
 * then rest-pose floats.
 * Oracles: success gives a permutation with parents first; a cycle is
 * reported with a joint that is on it; a parent index out of range names
 * the first such joint; validate names the first bad joint and leaves unit
 * quaternions. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "skeleton.h"

int lmb_fuzz_skeleton(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    uint8_t mode = fz_u8(&r);
    uint32_t count = fz_u8(&r);
    if (mode & 0x40) count |= (uint32_t)fz_u8(&r) << 8; /* large skeletons only sometimes */
    if (mode & 0x80) count |= 0x10000u;                 /* above the limit */
    uint32_t *parent = (uint32_t *)malloc(((size_t)count + 1) * sizeof(uint32_t));
    uint32_t *order = (uint32_t *)malloc(((size_t)count + 1) * sizeof(uint32_t));
    uint32_t *remap = (uint32_t *)malloc(((size_t)count + 1) * sizeof(uint32_t));
    void *mem = NULL;
    if (!parent || !order || !remap) goto done;
    for (uint32_t i = 0; i < count; i++) {
        if ((mode & 3) == 1) { /* deep chain, children listed before parents */
            parent[i] = i + 1 < count ? i + 1 : LMB_NO_PARENT;
            continue;
        }
        uint32_t p = fz_u8(&r);
        p |= (uint32_t)fz_u8(&r) << 8;
        if ((mode & 3) == 2 && p != LMB_NO_PARENT && count) p %= count;
        parent[i] = p;
    }
    uint32_t bad = 0xdeadbeefu;
    lmb_status st = lmb_skeleton_order(count, parent, order, remap, &bad);
    if (count == 0 || count > LMB_MAX_JOINTS) {
        if (st != LMB_ERANGE) lmb_fuzz_fail("count %u accepted", count);
        goto done;
    }
    uint32_t first_range = UINT32_MAX;
    for (uint32_t i = 0; i < count && first_range == UINT32_MAX; i++)
        if (parent[i] != LMB_NO_PARENT && parent[i] >= count) first_range = i;
    if (first_range != UINT32_MAX) {
        if (st != LMB_ERANGE || bad != first_range)
            lmb_fuzz_fail("parent out of range at %u not reported", first_range);
        goto done;
    }
    if (st == LMB_ECYCLE) {
        uint32_t j = bad;
        for (uint32_t k = 0; k <= count && j != LMB_NO_PARENT; k++) {
            j = parent[j];
            if (j == bad) break;
        }
        if (j != bad) lmb_fuzz_fail("joint %u is not on a cycle", bad);
        goto done;
    }
    if (st != LMB_OK) lmb_fuzz_fail("status %d", (int)st);
    for (uint32_t k = 0; k < count; k++) {
        if (order[k] >= count || remap[order[k]] != k) lmb_fuzz_fail("not a permutation at %u", k);
        uint32_t p = parent[order[k]];
        if (p != LMB_NO_PARENT && remap[p] >= k) lmb_fuzz_fail("parent after child at %u", k);
    }

    mem = malloc(lmb_skeleton_bytes(count) + 16);
    if (!mem) goto done;
    lmb_skeleton *s = lmb_skeleton_place(lmb_align_ptr(mem, 16), count);
    uint32_t want_bad = UINT32_MAX;
    lmb_status want = LMB_OK;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t p = parent[order[k]];
        s->parent[k] = (uint16_t)(p == LMB_NO_PARENT ? LMB_NO_PARENT : remap[p]);
        float *trs = s->rest + (size_t)k * LMB_TRS_FLOATS;
        static const float id[LMB_TRS_FLOATS] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
        for (int c = 0; c < LMB_TRS_FLOATS; c++) {
            if (r.n >= 4) {
                uint32_t bits = fz_u32(&r);
                memcpy(&trs[c], &bits, 4);
            } else {
                trs[c] = id[c];
            }
        }
        float *ibm = s->inverse_bind + (size_t)k * 16;
        for (int c = 0; c < 16; c++)
            ibm[c] = c % 5 == 0 ? 1.0f : 0.0f;
        if (want_bad == UINT32_MAX) {
            int finite = 1;
            for (int c = 0; c < LMB_TRS_FLOATS; c++)
                finite &= isfinite(trs[c]) != 0;
            double len = 0;
            for (int c = 3; c < 7; c++)
                len += (double)trs[c] * (double)trs[c];
            if (!finite)
                want = LMB_ENAN, want_bad = k;
            else if (!(sqrt(len) > 1e-12))
                want = LMB_EINVAL, want_bad = k;
        }
    }
    bad = 0xdeadbeefu;
    st = lmb_skeleton_validate(s, &bad);
    if (st != want || (want != LMB_OK && bad != want_bad))
        lmb_fuzz_fail("validate: status %d bad %u, expected %d at %u", (int)st, bad, (int)want,
                      want_bad);
    if (st == LMB_OK)
        for (uint32_t k = 0; k < count; k++) {
            const float *q = s->rest + (size_t)k * LMB_TRS_FLOATS + 3;
            double len = 0;
            for (int c = 0; c < 4; c++)
                len += (double)q[c] * (double)q[c];
            len = sqrt(len);
            if (!(fabs(len - 1.0) < 1e-5)) lmb_fuzz_fail("joint %u quaternion length %g", k, len);
            float m[16];
            lmb_trs_to_mat4(s->rest + (size_t)k * LMB_TRS_FLOATS, m);
        }
done:
    free(parent);
    free(order);
    free(remap);
    free(mem);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_skeleton)
