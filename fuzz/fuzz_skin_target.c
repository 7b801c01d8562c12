/* fuzz_skin_target.c: skinning job descriptions through the kernel's rules
 * (lmb_skin_target_validate, lmb_skin_job_validate) and, when both accept,
 * the run (lmb_skin_task_item at the CPU's best kernel level, AVX2 or
 * portable, by a flag).
 * Input: flags, a small mesh (one influence per vertex), a target (one
 * interleaved buffer or up to three streams placed anywhere in one arena,
 * overlapping or not, aligned or not, sizes honest or short), a palette
 * (identity matrices with a translation per joint and instance) and the
 * job's ranges. Every field can also take out-of-range values.
 * Oracles, once both validations passed: every byte the job may write
 * (the attributes' footprints) lies inside the arena; no byte belongs to
 * two attributes; every other arena byte is unchanged (so the 16-byte
 * stores of 12-byte attributes, allowed by the spill rule, land only on
 * bytes written later by the same job); every written position equals
 * the source position plus its joint's translation. */
#include <string.h>

#include "fuzz.h"
#include "palette.h"
#include "skinning.h"

#define ARENA 8192u
#define SENTINEL 0xA5u

static int64_t fz_i64(fz_reader *r, int64_t small) {
    uint8_t mode = fz_u8(r);
    uint32_t v = fz_u32(r);
    switch (mode % 16) {
    case 0:
        return (int64_t)(int32_t)v; /* any 32-bit value, negative too */
    case 1:
        return INT64_MIN + (int64_t)(v % 4);
    case 2:
        return ((int64_t)1 << 40) + (int64_t)(v % 64);
    default:
        return (int64_t)(v % (uint32_t)(small + 1));
    }
}

static size_t footprint_size(const lmb_skin_stream *s, int k) {
    return k == LMB_SKIN_TAN || s->wide ? 16 : 12;
}

int lmb_fuzz_skin_target(const uint8_t *data, size_t size) {
    fz_reader r = {data, size};
    uint8_t flags = fz_u8(&r);
    uint32_t V = 1 + fz_u8(&r) % 40u;
    uint32_t joints = 1 + fz_u8(&r) % 4u;
    uint32_t P = 1 + fz_u8(&r) % 4u; /* palette instances */

    /* the mesh: one influence per vertex */
    float pos[40 * 3], nrm[40 * 3], tan[40 * 4], w[40 * 4];
    uint32_t jnt[40 * 4];
    for (uint32_t v = 0; v < V; v++) {
        for (int c = 0; c < 3; c++)
            pos[v * 3 + (uint32_t)c] = (float)(int8_t)fz_u8(&r) * 0.25f;
        nrm[v * 3] = 0.0f, nrm[v * 3 + 1] = 1.0f, nrm[v * 3 + 2] = 0.0f;
        tan[v * 4] = 1.0f, tan[v * 4 + 1] = 0.0f, tan[v * 4 + 2] = 0.0f, tan[v * 4 + 3] = -1.0f;
        uint8_t slot = fz_u8(&r);
        for (uint32_t i = 0; i < 4; i++) {
            jnt[v * 4 + i] = i == 0 ? slot % 5u : 0u;
            w[v * 4 + i] = i == 0 ? 1.0f : 0.0f;
        }
    }
    lmb_skin_source src;
    memset(&src, 0, sizeof src);
    src.vertex_count = V;
    src.pos = pos;
    src.nrm = (flags & 4) ? nrm : NULL;
    src.tan = (flags & 8) ? tan : NULL;
    src.joints = jnt;
    src.weights = w;
    uint32_t counts[5];
    lmb_error err;
    if (lmb_skin_mesh_count(&src, counts, &err) != LMB_OK)
        lmb_fuzz_fail("a valid mesh refused (code %d)", (int)err.code);
    void *mesh_mem = malloc(lmb_skin_mesh_bytes(&src, counts));
    unsigned char *arena = (unsigned char *)malloc(ARENA);
    unsigned char *mark = (unsigned char *)calloc(ARENA, 1);
    float *pal = NULL;
    if (!mesh_mem || !arena || !mark) goto done;
    memset(arena, SENTINEL, ARENA);
    const lmb_skin_mesh *mesh = lmb_skin_mesh_build(mesh_mem, &src, counts);

    /* the target */
    lmb_skin_target_desc d;
    memset(&d, 0, sizeof d);
    d.vertices = (fz_u8(&r) % 16 == 0) ? fz_i64(&r, 64) : (int64_t)V;
    d.instances = (fz_u8(&r) % 16 == 0) ? fz_i64(&r, 8) : 1 + fz_u8(&r) % 4;
    d.file_order = (flags & 2) != 0;
    d.interleaved = (flags & 1) != 0;
    if (d.interleaved) {
        size_t at = fz_u8(&r) % 8u; /* sometimes misaligned */
        d.buffer = arena + at;
        size_t bytes = fz_u32(&r) % (ARENA + 1);
        d.buffer_bytes = bytes < ARENA - at ? bytes : ARENA - at;
        d.stride = (fz_u8(&r) % 8 == 0) ? fz_i64(&r, 80) : 4 * (int64_t)(fz_u8(&r) % 16);
        for (int k = 0; k < 3; k++) {
            uint8_t o = fz_u8(&r);
            d.offset[k] = o == 0xFF   ? LMB_SKIN_NO_OFFSET
                          : o >= 0xF0 ? fz_i64(&r, 80)
                                      : (int64_t)(o % 64) - 4;
        }
    } else {
        for (int k = 0; k < 3; k++) {
            uint8_t on = fz_u8(&r);
            if (on % 3 == 0) continue;
            size_t at = fz_u32(&r) % ARENA;
            if (on & 0x80) at &= ~(size_t)15; /* mostly aligned */
            d.base[k] = (float *)(void *)(arena + at);
            uint8_t wd = fz_u8(&r);
            d.width[k] = wd % 8 == 0 ? fz_i64(&r, 8) : 3 + wd % 2;
            size_t fit = d.width[k] > 0 && d.width[k] < 64
                             ? (ARENA - at) / ((size_t)d.width[k] * sizeof(float))
                             : 0;
            size_t want = fz_u32(&r) % 512u;
            d.elements[k] = want < fit ? want : fit; /* honest: never past the arena */
        }
    }
    if (lmb_skin_target_validate(&d, &err) != LMB_OK) goto done;
    lmb_skin_target tg;
    lmb_skin_target_init(&tg, &d);

    /* the palette: identity with a translation per joint and instance */
    int layout = fz_u8(&r) % 2 ? LMB_PALETTE_MAT3X4 : LMB_PALETTE_MAT4;
    uint32_t width = lmb_palette_width(layout);
    pal = (float *)calloc((size_t)P * joints * width, sizeof(float));
    if (!pal) goto done;
    for (uint32_t i = 0; i < P; i++)
        for (uint32_t j = 0; j < joints; j++) {
            float *e = pal + ((size_t)i * joints + j) * width;
            float t[3] = {(float)(j + 1), (float)(10 * i), -0.5f * (float)j};
            for (uint32_t c = 0; c < 3; c++) {
                if (layout == LMB_PALETTE_MAT4) {
                    e[c * 5] = 1.0f;
                    e[12 + c] = t[c];
                } else {
                    e[c * 5] = 1.0f; /* row c, column c: 4 floats per row */
                    e[c * 4 + 3] = t[c];
                }
            }
            if (layout == LMB_PALETTE_MAT4) e[15] = 1.0f;
        }

    lmb_skin_job job;
    memset(&job, 0, sizeof job);
    job.mesh = mesh;
    job.palette = pal;
    job.palette_joints = joints;
    job.palette_instances = P;
    job.layout = (fz_u8(&r) % 32 == 0) ? 7 : layout;
    job.target = &tg;
    job.first = fz_u8(&r) % 6u;
    job.count = fz_u8(&r) % 6u;
    job.slot = fz_u8(&r) % 6u;
    if (lmb_skin_job_validate(&job, &err) != LMB_OK) goto done;
    lmb_skin_task task;
    lmb_skin_job_task(&job, &task);

    /* the bytes the job may write: inside the arena, each at most once */
    const lmb_skin_stream *st[3] = {&task.pos, &task.nrm, &task.tan};
    for (int k = 0; k < 3; k++) {
        if (!st[k]->base) continue;
        for (uint32_t i = 0; i < job.count; i++)
            for (uint32_t o = 0; o < V; o++) {
                const float *a =
                    st[k]->base + (size_t)i * st[k]->instance_stride + (size_t)o * st[k]->stride;
                uintptr_t lo = (uintptr_t)(const void *)a, base = (uintptr_t)(void *)arena;
                size_t n = footprint_size(st[k], k);
                if (lo < base || lo + n > base + ARENA)
                    lmb_fuzz_fail("stream %d, instance %u, vertex %u writes outside its buffer", k,
                                  i, o);
                for (size_t b = 0; b < n; b++)
                    if (mark[lo - base + b]++)
                        lmb_fuzz_fail("stream %d, instance %u, vertex %u shares byte %zu", k, i, o,
                                      (size_t)(lo - base + b));
            }
    }
    lmb_simd_use((flags & 16) ? LMB_SIMD_PORTABLE : (flags & 32) ? LMB_SIMD_AVX2 : LMB_SIMD_AVX512);
    uint64_t items = lmb_skin_task_items(&task);
    for (uint64_t it = 0; it < items; it++)
        lmb_skin_task_item(&task, (uint32_t)it);
    lmb_simd_use(LMB_SIMD_AVX512);
    for (size_t b = 0; b < ARENA; b++)
        if (!mark[b] && arena[b] != SENTINEL)
            lmb_fuzz_fail("byte %zu outside every attribute was written", b);
    if (task.pos.base)
        for (uint32_t i = 0; i < job.count; i++)
            for (uint32_t o = 0; o < V; o++) {
                uint32_t f = d.file_order ? o : mesh->perm[o];
                uint32_t j = jnt[f * 4];
                const float *e = pal + ((size_t)(job.first + i) * joints + j) * width;
                const float *got = task.pos.base + (size_t)i * task.pos.instance_stride +
                                   (size_t)o * task.pos.stride;
                for (uint32_t c = 0; c < 3; c++) {
                    float t = layout == LMB_PALETTE_MAT4 ? e[12 + c] : e[c * 4 + 3];
                    float want = pos[f * 3 + c] + t;
                    if (got[c] != want)
                        lmb_fuzz_fail("instance %u vertex %u position[%u] %g, expected %g", i, o, c,
                                      (double)got[c], (double)want);
                }
            }
done:
    free(mesh_mem);
    free(arena);
    free(mark);
    free(pal);
    return 0;
}

LMB_FUZZ_ENTRY(lmb_fuzz_skin_target)
