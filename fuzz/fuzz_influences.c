/* fuzz_influences.c: skin influence clean-up (lmb_skin_influences) with one
 * or two JOINTS/WEIGHTS sets.
 * Input: a flags byte, then per vertex 4 (or 8) joints of 3 bytes and 4
 * (or 8) weights (raw float bits, or a byte / 255 when flags & 4).
 * Oracles: bad vertices (a weight not in [0, inf), a joint >= 65535) are
 * refused naming the first one; otherwise each vertex gets the 4 largest
 * weights (ties keep the earlier one) renormalised to sum 1, all finite in
 * [0, 1], or weight 1 on its first joint when all are zero; max_joint is
 * the largest joint index given. */
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "gltf.h"

int lmb_fuzz_influences(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    uint8_t flags = fz_u8(&r);
    int two = flags & 1, small = (flags >> 2) & 1, per = two ? 8 : 4;
    size_t vbytes = (size_t)per * (small ? 4u : 7u);
    size_t count = r.n / vbytes;
    if (count == 0) return 0;
    uint32_t *j = (uint32_t *)malloc(count * 8 * sizeof(uint32_t));
    float *w = (float *)malloc(count * 8 * sizeof(float));
    uint16_t *oj = (uint16_t *)malloc(count * 4 * sizeof(uint16_t));
    float *ow = (float *)malloc(count * 4 * sizeof(float));
    if (!j || !w || !oj || !ow) goto done;
    /* set k of vertex v is at (k / 4) * count * 4 + v * 4 + k % 4 */
    for (size_t v = 0; v < count; v++)
        for (int k = 0; k < per; k++) {
            size_t at = (size_t)(k / 4) * count * 4 + v * 4 + (size_t)(k % 4);
            uint32_t jv = fz_u8(&r);
            jv |= (uint32_t)fz_u8(&r) << 8;
            uint8_t hi = fz_u8(&r);
            if (hi == 0xff) jv |= 0xff0000u;
            j[at] = jv;
            if (small) {
                w[at] = (float)fz_u8(&r) / 255.0f;
            } else {
                uint32_t bits = fz_u32(&r);
                memcpy(&w[at], &bits, 4);
            }
        }
    const uint32_t *j1 = two ? j + count * 4 : NULL;
    const float *w1 = two ? w + count * 4 : NULL;
    uint32_t maxj = 0xdeadbeefu;
    size_t bad = (size_t)-1;
    lmb_status st = lmb_skin_influences(count, j, w, j1, w1, oj, ow, &maxj, &bad);

    size_t first_bad = (size_t)-1;
    uint32_t ref_max = 0;
    for (size_t v = 0; v < count && first_bad == (size_t)-1; v++)
        for (int k = 0; k < per; k++) {
            size_t at = (size_t)(k / 4) * count * 4 + v * 4 + (size_t)(k % 4);
            if (!(w[at] >= 0.0f && w[at] < INFINITY) || j[at] >= LMB_MAX_JOINTS) first_bad = v;
            if (j[at] > ref_max) ref_max = j[at];
        }
    if (first_bad != (size_t)-1) {
        if (st != LMB_ERANGE || bad != first_bad)
            lmb_fuzz_fail("bad vertex %zu not reported (status %d, bad %zu)", first_bad, (int)st,
                          bad);
        goto done;
    }
    if (st != LMB_OK) lmb_fuzz_fail("valid influences refused (vertex %zu)", bad);
    if (maxj != ref_max) lmb_fuzz_fail("max_joint %u, expected %u", maxj, ref_max);
    for (size_t v = 0; v < count; v++) {
        uint32_t jj[8];
        float ww[8];
        int used[8] = {0};
        for (int k = 0; k < per; k++) {
            size_t at = (size_t)(k / 4) * count * 4 + v * 4 + (size_t)(k % 4);
            jj[k] = j[at];
            ww[k] = w[at];
        }
        int pick[4] = {0, 1, 2, 3}; /* one set: kept in input order */
        for (int s = 0; s < 4 && per == 8; s++) {
            int best = -1;
            for (int k = 0; k < per; k++)
                if (!used[k] && (best < 0 || ww[k] > ww[best])) best = k;
            used[best] = 1;
            pick[s] = best;
        }
        double sum = 0;
        for (int s = 0; s < 4; s++)
            sum += (double)ww[pick[s]];
        double total = 0;
        for (int s = 0; s < 4; s++) {
            float want = sum > 0.0 ? (float)((double)ww[pick[s]] / sum) : (s == 0 ? 1.0f : 0.0f);
            float got = ow[v * 4 + (size_t)s];
            if (!(got >= 0.0f && got <= 1.0f))
                lmb_fuzz_fail("vertex %zu weight %g", v, (double)got);
            if (got != want)
                lmb_fuzz_fail("vertex %zu influence %d: weight %g, expected %g", v, s, (double)got,
                              (double)want);
            if (oj[v * 4 + (size_t)s] != jj[pick[s]])
                lmb_fuzz_fail("vertex %zu influence %d: joint %u, expected %u", v, s,
                              (unsigned)oj[v * 4 + (size_t)s], jj[pick[s]]);
            total += (double)got;
        }
        if (fabs(total - 1.0) > 1e-5) lmb_fuzz_fail("vertex %zu weights sum to %g", v, total);
    }
done:
    free(j);
    free(w);
    free(oj);
    free(ow);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_influences)
