/* lcompat.h: the binding's one view of the Lua C API, the same on Lua 5.1,
 * 5.2, 5.3, 5.4 and LuaJIT 2.1. The binding is written against Lua 5.4;
 * this header makes the older versions look like it.
 *
 * - Lua 5.1, 5.2 and LuaJIT get the 5.3 API (lua_absindex, lua_rawlen,
 *   lua_rawgetp, luaL_tolstring, luaL_Buffer sizes, typed lua_getfield /
 *   lua_rawget results, luaL_setfuncs, LUA_OK ...) from Debian's
 *   lua-compat53 (compat-5.3.h, its functions compiled static into each
 *   file that includes it). It is the ecosystem's shim (luv, lua-cjson and
 *   many rocks use it) and covers about forty functions we would otherwise
 *   write again.
 * - What lua-compat53 does not cover, or covers too loosely for us, is
 *   here:
 *   * integers (5.1, 5.2, LuaJIT have none): lua_isinteger, lua_tointegerx,
 *     luaL_checkinteger and luaL_optinteger accept a number only when it is
 *     integral and within [-2^63, 2^63), like 5.3's float-to-integer rule
 *     ("number has no integer representation"), so an index or a count is
 *     never truncated or converted out of range; lua_Unsigned is 64-bit
 *     (5.2's is 32-bit);
 *   * lua_pushfstring, lua_pushvfstring and luaL_error with 5.3's formats
 *     (%I for lua_Integer, %f printed as "%.14g"; before 5.3 an unknown
 *     format would desynchronise the arguments);
 *   * 5.4's numbered user values (lua_newuserdatauv, lua_getiuservalue,
 *     lua_setiuservalue) on one table per userdata: the 5.1 environment or
 *     the 5.2 / 5.3 user value. A value stored there is reachable from the
 *     userdata, so a keep-alive keeps its object alive on every version;
 *   * luaL_typeerror (5.4's name);
 *   * luaL_checkudata naming the class (__name) of a userdata of another
 *     class in its error, as 5.3 does ("limber.Pose expected, got
 *     limber.Skeleton"; 5.1 and 5.2 say "got userdata").
 */
#ifndef LIMBER_LCOMPAT_H
#define LIMBER_LCOMPAT_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#if !defined(LUA_VERSION_NUM) || LUA_VERSION_NUM < 501 || LUA_VERSION_NUM > 504
#error "limber supports Lua 5.1, 5.2, 5.3, 5.4 and LuaJIT 2.1"
#endif

#if LUA_VERSION_NUM < 503
#include <compat-5.3.h>

#undef LUA_MAXINTEGER
#undef LUA_MININTEGER
#define LUA_MAXINTEGER PTRDIFF_MAX
#define LUA_MININTEGER PTRDIFF_MIN
typedef uint64_t lcompat_unsigned;
#undef lua_Unsigned
#define lua_Unsigned lcompat_unsigned

/* The exact integer reading (lcompat.c). */
int lcompat_isinteger(lua_State *L, int idx);
lua_Integer lcompat_tointegerx(lua_State *L, int idx, int *isnum);
lua_Integer lcompat_checkinteger(lua_State *L, int arg);
lua_Integer lcompat_optinteger(lua_State *L, int arg, lua_Integer def);
#undef lua_isinteger
#undef lua_tointegerx
#undef lua_tointeger
#undef luaL_checkinteger
#undef luaL_optinteger
#define lua_isinteger lcompat_isinteger
#define lua_tointegerx lcompat_tointegerx
#define lua_tointeger(L, i) lcompat_tointegerx((L), (i), NULL)
#define luaL_checkinteger lcompat_checkinteger
#define luaL_optinteger lcompat_optinteger

/* Table positions are lua_Integer (5.1 and 5.2 take an int). */
static inline int lcompat_rawgeti(lua_State *L, int idx, lua_Integer n) {
    if (n >= INT_MIN && n <= INT_MAX) {
        (lua_rawgeti)(L, idx, (int)n);
    } else {
        idx = lua_absindex(L, idx);
        lua_pushnumber(L, (lua_Number)n);
        (lua_rawget)(L, idx);
    }
    return lua_type(L, -1);
}
static inline void lcompat_rawseti(lua_State *L, int idx, lua_Integer n) {
    if (n >= INT_MIN && n <= INT_MAX) {
        (lua_rawseti)(L, idx, (int)n);
    } else {
        idx = lua_absindex(L, idx);
        lua_pushnumber(L, (lua_Number)n);
        lua_insert(L, -2);
        (lua_rawset)(L, idx);
    }
}
#undef lua_rawgeti
#undef lua_rawseti
#define lua_rawgeti lcompat_rawgeti
#define lua_rawseti lcompat_rawseti

/* 5.3's string formats (lcompat.c). */
const char *lcompat_pushvfstring(lua_State *L, const char *fmt, va_list ap);
const char *lcompat_pushfstring(lua_State *L, const char *fmt, ...);
int lcompat_error(lua_State *L, const char *fmt, ...);
#undef lua_pushvfstring
#undef lua_pushfstring
#undef luaL_error
#define lua_pushvfstring lcompat_pushvfstring
#define lua_pushfstring lcompat_pushfstring
#define luaL_error lcompat_error
#endif

#if LUA_VERSION_NUM < 504
void *lcompat_newuserdatauv(lua_State *L, size_t size, int nuv);
int lcompat_getiuservalue(lua_State *L, int idx, int n);
int lcompat_setiuservalue(lua_State *L, int idx, int n);
int lcompat_typeerror(lua_State *L, int arg, const char *tname);
#define lua_newuserdatauv lcompat_newuserdatauv
#define lua_getiuservalue lcompat_getiuservalue
#define lua_setiuservalue lcompat_setiuservalue
#define luaL_typeerror lcompat_typeerror
#endif

#if LUA_VERSION_NUM < 503
static inline void *lcompat_checkudata(lua_State *L, int arg, const char *tname) {
    void *p = luaL_testudata(L, arg, tname);
    if (p == NULL) lcompat_typeerror(L, arg, tname);
    return p;
}
#undef luaL_checkudata
#define luaL_checkudata lcompat_checkudata
#endif

#endif
