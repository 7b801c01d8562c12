/* image.h: a tiny software rasteriser and PNG encoder for the demo's
 * pictures (pure C, no dependencies).
 *
 * An image is w x h RGBA8 pixels plus a float depth buffer. Geometry is
 * mapped to pixels by a column-major 4x4 `view` matrix: view * (x, y, z, 1)
 * gives (pixel x, pixel y, depth); smaller depth is closer. Triangles are
 * flat shaded by the angle between their face normal and a light
 * direction, so shapes read well without textures. */
#ifndef LIMBER_IMAGE_H
#define LIMBER_IMAGE_H

#include "limber.h"

#define LMB_IMAGE_MAX_SIDE 8192u

typedef struct lmb_image {
    uint32_t w, h;
    uint8_t *rgba; /* w * h * 4 */
    float *depth;  /* w * h */
} lmb_image;

size_t lmb_image_bytes(uint32_t w, uint32_t h);
lmb_image *lmb_image_place(void *mem, uint32_t w, uint32_t h);
void lmb_image_clear(lmb_image *img, const uint8_t rgba[4]);

/* Draws triangles. pos: vertex positions, 3 floats each, `stride` floats
 * apart; idx: 3 * tri_count vertex indices (< vertex_count, checked by the
 * caller) or NULL for consecutive triples. light: unit direction. */
void lmb_image_triangles(lmb_image *img, const float view[16], const float *pos, uint32_t stride,
                         uint32_t vertex_count, const uint32_t *idx, uint32_t tri_count,
                         const uint8_t rgba[4], const float light[3]);

/* Draws line segments between consecutive pairs of points (3 floats each),
 * on top of everything (no depth test), `width` pixels wide. */
void lmb_image_lines(lmb_image *img, const float view[16], const float *pts, uint32_t point_count,
                     const uint8_t rgba[4], uint32_t width);

/* Bytes needed for the PNG of an image (an upper bound). */
size_t lmb_png_bound(uint32_t w, uint32_t h);

/* Encodes the image as an RGB PNG (zlib stored blocks, no compression)
 * into out (at least lmb_png_bound bytes); returns the size written. */
size_t lmb_png_encode(const lmb_image *img, uint8_t *out);

#endif
