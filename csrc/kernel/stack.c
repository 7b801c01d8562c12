/* stack.c: layer-stack validation and the portable fold (stack_fold.h);
 * lmb_stack_block picks the AVX2 build of the same code when allowed. */
#include "stack.h"

#include <math.h>

lmb_status lmb_stack_validate(const lmb_stack_layer *layers, uint32_t layer_count, uint32_t joints,
                              uint32_t sources, lmb_error *err) {
    lmb_error_clear(err);
    if (layer_count < 1 || layer_count > LMB_STACK_MAX_LAYERS || !layers)
        return lmb_error_set(err, LMB_ERANGE, "layers", "layer count {v} out of range [1, {l}]", 0,
                             0, (double)layer_count, LMB_STACK_MAX_LAYERS);
    uint32_t next = 0;
    for (uint32_t n = 0; n < layer_count; n++) {
        const lmb_stack_layer *ly = layers + n;
        if (ly->mode != LMB_LAYER_OVERRIDE && ly->mode != LMB_LAYER_ADDITIVE)
            return lmb_error_set(err, LMB_EINVAL, "mode", "layer {i}: unknown mode {v}", n, 0,
                                 (double)ly->mode, 0);
        if (ly->source_count < 1 || ly->source_count > LMB_STACK_MAX_SOURCES)
            return lmb_error_set(err, LMB_ERANGE, "sources",
                                 "layer {i}: source count {v} out of range [1, {l}]", n, 0,
                                 (double)ly->source_count, LMB_STACK_MAX_SOURCES);
        if (ly->first_source != next || (uint64_t)next + ly->source_count > sources)
            return lmb_error_set(err, LMB_ERANGE, "sources",
                                 "layer {i}: sources {v} .. are not the next of {l}", n, 0,
                                 (double)ly->first_source + 1.0, (double)sources);
        next += ly->source_count;
        for (uint32_t j = 0; ly->mask && j < joints; j++)
            if (!(ly->mask[j] >= 0.0f && ly->mask[j] <= 1.0f))
                return lmb_error_set(err, LMB_ERANGE, "mask",
                                     "layer {i}: mask[{j}] = {v} is not in [0, 1]", n, j,
                                     (double)ly->mask[j], 1);
        for (uint32_t j = 0; ly->reference && j < joints; j++) {
            const float *r = ly->reference + (size_t)j * LMB_TRS_FLOATS;
            for (int c = 0; c < LMB_TRS_FLOATS; c++)
                if (!isfinite(r[c]))
                    return lmb_error_set(err, LMB_ENAN, "reference",
                                         "layer {i}: reference joint {j} has a value that is not "
                                         "finite ({v})",
                                         n, j, (double)r[c], 0);
            if (r[3] * r[3] + r[4] * r[4] + r[5] * r[5] + r[6] * r[6] < 1e-12f)
                return lmb_error_set(err, LMB_EINVAL, "reference",
                                     "layer {i}: reference joint {j} has a zero rotation", n, j, 0,
                                     0);
        }
    }
    return LMB_OK;
}

/* GCC only if-converts (and so vectorises) the selects of the fold without
 * -ftrapping-math; the code raises no trap either way. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

#define FOLD(name) name##_portable
#include "stack_fold.h"
#undef FOLD

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

void lmb_stack_block(const lmb_skeleton *sk, const lmb_stack_layer *layers, uint32_t layer_count,
                     const float *const *src, const float *src_w, const float *layer_w,
                     const int16_t *top, int first_done, float *out) {
    if (lmb_simd_active())
        lmb_stack_block_avx2(sk, layers, layer_count, src, src_w, layer_w, top, first_done, out);
    else
        lmb_stack_block_portable(sk, layers, layer_count, src, src_w, layer_w, top, first_done,
                                 out);
}
