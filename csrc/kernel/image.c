/* image.c: rasteriser and PNG encoder for the demo's pictures. */
#include "image.h"

#include <math.h>
#include <string.h>

size_t lmb_image_bytes(uint32_t w, uint32_t h) {
    return lmb_align_up(sizeof(lmb_image), 16) + (size_t)w * h * (4 + sizeof(float)) + 16;
}

lmb_image *lmb_image_place(void *mem, uint32_t w, uint32_t h) {
    lmb_image *img = (lmb_image *)mem;
    unsigned char *p = (unsigned char *)mem + lmb_align_up(sizeof(lmb_image), 16);
    img->w = w;
    img->h = h;
    img->depth = (float *)(void *)p;
    img->rgba = p + (size_t)w * h * sizeof(float);
    return img;
}

void lmb_image_clear(lmb_image *img, const uint8_t rgba[4]) {
    size_t n = (size_t)img->w * img->h;
    for (size_t i = 0; i < n; i++) {
        memcpy(img->rgba + i * 4, rgba, 4);
        img->depth[i] = INFINITY;
    }
}

static void project(const float v[16], const float *p, float out[3]) {
    for (int r = 0; r < 3; r++)
        out[r] = v[r] * p[0] + v[4 + r] * p[1] + v[8 + r] * p[2] + v[12 + r];
}

static float edge(const float *a, const float *b, float x, float y) {
    return (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0]);
}

void lmb_image_triangles(lmb_image *img, const float view[16], const float *pos, uint32_t stride,
                         uint32_t vertex_count, const uint32_t *idx, uint32_t tri_count,
                         const uint8_t rgba[4], const float light[3]) {
    (void)vertex_count;
    for (uint32_t t = 0; t < tri_count; t++) {
        uint32_t i0 = idx ? idx[t * 3] : t * 3, i1 = idx ? idx[t * 3 + 1] : t * 3 + 1,
                 i2 = idx ? idx[t * 3 + 2] : t * 3 + 2;
        const float *p0 = pos + (size_t)i0 * stride, *p1 = pos + (size_t)i1 * stride,
                    *p2 = pos + (size_t)i2 * stride;
        float e1[3] = {p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2]};
        float e2[3] = {p2[0] - p0[0], p2[1] - p0[1], p2[2] - p0[2]};
        float n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                      e1[0] * e2[1] - e1[1] * e2[0]};
        float len = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        if (!(len > 0.0f)) continue;
        float shade = fabsf(n[0] * light[0] + n[1] * light[1] + n[2] * light[2]) / len;
        shade = 0.35f + 0.65f * shade;
        uint8_t c[4];
        for (int k = 0; k < 3; k++)
            c[k] = (uint8_t)fminf(255.0f, (float)rgba[k] * shade);
        c[3] = 255;
        float a[3], b[3], d[3];
        project(view, p0, a), project(view, p1, b), project(view, p2, d);
        float area = edge(a, b, d[0], d[1]);
        if (!(fabsf(area) > 1e-12f) || !isfinite(area)) continue;
        float minx = fminf(a[0], fminf(b[0], d[0])), maxx = fmaxf(a[0], fmaxf(b[0], d[0]));
        float miny = fminf(a[1], fminf(b[1], d[1])), maxy = fmaxf(a[1], fmaxf(b[1], d[1]));
        if (maxx < 0 || maxy < 0 || minx >= (float)img->w || miny >= (float)img->h) continue;
        int x0 = (int)fmaxf(0.0f, floorf(minx)), x1 = (int)fminf((float)img->w - 1, ceilf(maxx));
        int y0 = (int)fmaxf(0.0f, floorf(miny)), y1 = (int)fminf((float)img->h - 1, ceilf(maxy));
        for (int y = y0; y <= y1; y++) {
            for (int x = x0; x <= x1; x++) {
                float px = (float)x + 0.5f, py = (float)y + 0.5f;
                float w0 = edge(b, d, px, py) / area, w1 = edge(d, a, px, py) / area,
                      w2 = edge(a, b, px, py) / area;
                if (w0 < 0 || w1 < 0 || w2 < 0) continue;
                float z = w0 * a[2] + w1 * b[2] + w2 * d[2];
                size_t o = (size_t)y * img->w + (size_t)x;
                if (z < img->depth[o]) {
                    img->depth[o] = z;
                    memcpy(img->rgba + o * 4, c, 4);
                }
            }
        }
    }
}

void lmb_image_lines(lmb_image *img, const float view[16], const float *pts, uint32_t point_count,
                     const uint8_t rgba[4], uint32_t width) {
    int half = (int)width / 2;
    for (uint32_t k = 0; k + 1 < point_count; k += 2) {
        float a[3], b[3];
        project(view, pts + (size_t)k * 3, a);
        project(view, pts + (size_t)(k + 1) * 3, b);
        float dx = b[0] - a[0], dy = b[1] - a[1];
        float steps = fmaxf(fabsf(dx), fabsf(dy));
        if (!isfinite(steps) || steps > 4.0f * LMB_IMAGE_MAX_SIDE) continue;
        /* NaN or far away (fmaxf above ignores a NaN): the int casts below would overflow */
        if (!(fabsf(a[0]) < 1e9f && fabsf(a[1]) < 1e9f && fabsf(b[0]) < 1e9f && fabsf(b[1]) < 1e9f))
            continue;
        int n = (int)ceilf(steps) + 1;
        for (int s = 0; s <= n; s++) {
            float f = (float)s / (float)n;
            int cx = (int)floorf(a[0] + dx * f), cy = (int)floorf(a[1] + dy * f);
            for (int oy = -half; oy <= half; oy++)
                for (int ox = -half; ox <= half; ox++) {
                    int x = cx + ox, y = cy + oy;
                    if (x < 0 || y < 0 || x >= (int)img->w || y >= (int)img->h) continue;
                    memcpy(img->rgba + ((size_t)y * img->w + (size_t)x) * 4, rgba, 4);
                }
        }
    }
}

/* ---- PNG ---------------------------------------------------------------- */

static uint32_t crc_table[256];
static int crc_ready;

static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t n) {
    if (!crc_ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
        crc_ready = 1;
    }
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc;
}

static uint8_t *put32(uint8_t *o, uint32_t v) {
    o[0] = (uint8_t)(v >> 24), o[1] = (uint8_t)(v >> 16), o[2] = (uint8_t)(v >> 8),
    o[3] = (uint8_t)v;
    return o + 4;
}

/* Writes a chunk whose data already sits at o + 8; returns the end. */
static uint8_t *chunk(uint8_t *o, const char *type, size_t len) {
    put32(o, (uint32_t)len);
    memcpy(o + 4, type, 4);
    uint32_t crc = crc32_update(0xFFFFFFFFu, o + 4, len + 4) ^ 0xFFFFFFFFu;
    return put32(o + 8 + len, crc);
}

size_t lmb_png_bound(uint32_t w, uint32_t h) {
    size_t raw = (size_t)h * ((size_t)w * 3 + 1);
    size_t blocks = raw / 65535 + 1;
    return 8 + 25 + 12 + 2 + raw + blocks * 5 + 4 + 12;
}

size_t lmb_png_encode(const lmb_image *img, uint8_t *out) {
    static const uint8_t sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
    uint8_t *o = out;
    memcpy(o, sig, 8);
    o += 8;
    uint8_t *d = o + 8;
    d = put32(d, img->w);
    d = put32(d, img->h);
    d[0] = 8, d[1] = 2, d[2] = 0, d[3] = 0, d[4] = 0; /* 8-bit RGB, no interlace */
    o = chunk(o, "IHDR", 13);
    /* IDAT: zlib header, stored deflate blocks, Adler-32 */
    uint8_t *start = o;
    d = o + 8;
    *d++ = 0x78, *d++ = 0x01;
    size_t row = (size_t)img->w * 3 + 1, raw = row * img->h, done = 0;
    uint32_t s1 = 1, s2 = 0;
    while (done < raw) {
        size_t n = raw - done > 65535 ? 65535 : raw - done;
        *d++ = done + n == raw ? 1 : 0;
        d[0] = (uint8_t)n, d[1] = (uint8_t)(n >> 8);
        d[2] = (uint8_t)~n, d[3] = (uint8_t)(~n >> 8);
        d += 4;
        for (size_t k = 0; k < n; k++) {
            size_t pos = done + k, y = pos / row, x = pos % row;
            uint8_t v = x == 0 ? 0 : img->rgba[(y * img->w + (x - 1) / 3) * 4 + (x - 1) % 3];
            *d++ = v;
            s1 = (s1 + v) % 65521u;
            s2 = (s2 + s1) % 65521u;
        }
        done += n;
    }
    d = put32(d, (s2 << 16) | s1);
    o = chunk(start, "IDAT", (size_t)(d - (start + 8)));
    o = chunk(o, "IEND", 0);
    return (size_t)(o - out);
}
