/* lcore.h: private header shared by the binding files (csrc/l*.c). Only
 * these files include Lua headers. Each lcore_<area>.c exports one
 * lcore_open_<area>(L) that registers its metatables and adds its
 * functions to the module table on top of the stack. */
#ifndef LIMBER_LCORE_H
#define LIMBER_LCORE_H

#include "lcompat.h"

#include "limber.h"

#define LIMBER_EXPORT __attribute__((visibility("default")))

#define BUFFER_MT "limber.Buffer"
#define SKELETON_MT "limber.Skeleton"
#define POSE_MT "limber.Pose"
#define SKIN_MT "limber.Skin"
#define PALETTE_MT "limber.Palette"
#define CLIP_MT "limber.Clip"
#define SKINMESH_MT "limber.SkinMesh"

/* ---- buffers ---------------------------------------------------------- */

enum { LBUF_F32 = 0, LBUF_U8, LBUF_U16, LBUF_U32 };

/* A fixed-size typed array Lua can hold. Owning buffers keep their data in
 * the same userdata block (64-byte aligned); views point into another
 * object, which they anchor in user value 1. */
typedef struct lbuffer {
    void *data;
    size_t count;     /* elements */
    uint32_t width;   /* scalars per element (1, 3, 4, 12, 16 ...) */
    uint8_t type;     /* LBUF_* */
    uint8_t readonly; /* views of derived data (model matrices, palettes) */
} lbuffer;

size_t lbuf_scalar_size(int type);
/* Pushes a new zero-filled owning buffer. Raises on size overflow. */
lbuffer *lbuf_push(lua_State *L, int type, uint32_t width, size_t count);
/* Pushes a view on data owned by the object at stack index `owner`. */
lbuffer *lbuf_push_view(lua_State *L, int owner, void *data, int type, uint32_t width, size_t count,
                        int readonly);
lbuffer *lbuf_check(lua_State *L, int arg);

/* ---- helpers ---------------------------------------------------------- */

/* Raw reads of a caller's table (no metamethods): a table is read once,
 * raw, then checked and used, so a __len / __index that answers differently
 * on each call cannot pass a check with one answer and be used with another.
 * The table must be a table (checked by the caller). */
static inline int lcore_rawfield(lua_State *L, int t, const char *k) {
    t = lua_absindex(L, t);
    lua_pushstring(L, k);
    return lua_rawget(L, t);
}
static inline lua_Integer lcore_rawlen(lua_State *L, int t) {
    size_t n = (size_t)lua_rawlen(L, t);
    return n > (size_t)LUA_MAXINTEGER ? LUA_MAXINTEGER : (lua_Integer)n;
}

/* Raises "bad argument #arg (<what> index <i> out of range [1, n])" unless
 * 1 <= i <= n; returns the 0-based index. */
uint32_t lcore_check_index(lua_State *L, int arg, uint32_t n, const char *what);
/* The binding's float toolkit. Every number stored as a float must be
 * finite and within LMB_FLOAT_LIMIT (lcore_float_ok). */
int lcore_float_ok(lua_Number v);
/* Reads argument `arg` as such a float; raises "bad argument #arg (<what>
 * is not a finite float (v))" otherwise. */
float lcore_check_float(lua_State *L, int arg, const char *what);
/* Reads argument `arg` as a clip time in seconds: any finite number, kept in
 * double (defined in lcore_clip.c). */
double lcore_check_time(lua_State *L, int arg);
/* Reads `n` floats from the table at `arg` (1-based, starting at `first`)
 * into out, raw. Raises "<what>[k] must be a number (got t)" or "<what>[k]
 * is not a finite float (v)" naming the position k: as a bad-argument
 * error when arg is an argument position (> 0), else as a plain error
 * (then `what` should name the function). */
void lcore_read_floats(lua_State *L, int arg, const char *what, lua_Integer first, float *out,
                       size_t n);
/* Pushes n floats as a table: the table at out_arg when that argument is
 * given (filled and returned, rule 4 of CHANGES.md), else a new one. */
void lcore_push_floats(lua_State *L, const float *v, int n, int out_arg);
/* IK inputs (lcore_ik.c). Vectors of 3 for `count` instances at argument
 * arg: an f32 Buffer of width 3 (count = its element count) or a table of 3
 * numbers (one instance, read into one[]); nil: NULL when optional.
 * Weights: nil (NULL), a number (one instance) or an f32 Buffer of width 1. */
const float *lcore_vec3_arg(lua_State *L, int arg, const char *what, int optional, float one[3],
                            size_t *count);
const float *lcore_weight_arg(lua_State *L, int arg, float *one, size_t *count);
/* The storage pointer of the limber.Scene at idx, or NULL (lcore_scene.c). */
struct lmb_hier **lcore_test_scene(lua_State *L, int idx);
/* Raises a kernel error record as "<where>: <lmb_error_format text>". */
int lcore_raise(lua_State *L, const lmb_error *e, const char *where);
/* The same, as "bad argument #arg to '<function>' (<text>)": for a rule
 * about one argument. */
int lcore_raise_arg(lua_State *L, int arg, const lmb_error *e);
/* Allocates a userdata with `nuv` user values and `bytes` + 64 of payload,
 * returns the payload aligned to 64. */
void *lcore_newobject(lua_State *L, size_t bytes, int nuv, const char *mt);
/* Registers a class: metatable `name` with meta-methods and an __index
 * table of methods. */
void lcore_class(lua_State *L, const char *name, const luaL_Reg *meta, const luaL_Reg *methods);
/* Raises a kernel status as "<prefix>: <message>". */
int lcore_status_error(lua_State *L, lmb_status st, const char *fmt, ...);

/* The SIMD level cap of this lua_State (LMB_SIMD_*, set by core.simd).
 * Every module function runs with it applied to its thread (lmb_simd_use);
 * lcore_simd_enter applies it again (for code reached another way) and
 * pool jobs pass it to their workers. */
int lcore_simd_cap(lua_State *L);
void lcore_simd_enter(lua_State *L);

/* ---- shared object accessors (defined in lcore_pose.c) ----------------- */
struct lmb_skeleton;
struct lmb_pose;
struct lmb_skin;

/* A Palette userdata: user value 1 = pose, 2 = skin. */
typedef struct lpalette {
    struct lmb_pose *pose;
    struct lmb_skin *skin;
    float *data;
    uint32_t instances, joints;
    int layout;
} lpalette;

lpalette *lcore_check_palette(lua_State *L, int arg);
struct lmb_skeleton *lcore_check_skeleton(lua_State *L, int arg);
/* The rig hash of the Skeleton at arg (skeleton:rig_hash): 16 hex digits + NUL. */
void lcore_rig_hash(lua_State *L, int arg, char out[17]);
struct lmb_pose *lcore_check_pose(lua_State *L, int arg);
struct lmb_skin *lcore_check_skin(lua_State *L, int arg);

/* ---- areas ------------------------------------------------------------ */
void lcore_open_buffer(lua_State *L);
void lcore_open_pose(lua_State *L);
void lcore_open_gltf(lua_State *L);
void lcore_open_clip(lua_State *L);
void lcore_open_plan(lua_State *L);
void lcore_open_skinning(lua_State *L);

/* The module's worker pool (threadpool.h), for any batched job; defined in
 * lcore_skinning.c. Valid while the module's registry entry lives. */
struct lmb_pool;
struct lmb_pool *lcore_pool(lua_State *L);
void lcore_open_scene(lua_State *L);
void lcore_open_snapshot(lua_State *L);
void lcore_open_ik(lua_State *L);
void lcore_open_machine(lua_State *L);
/* The frame plan at arg (raises when it is not a limber.Plan). */
struct lmb_plan *lcore_check_plan(lua_State *L, int arg);
/* Runs the plan at idx for dt (finite, float range): plan:run(dt) without
 * its argument checks; returns the instances it evaluated. */
uint32_t lcore_plan_run(lua_State *L, int idx, double dt);

#endif
