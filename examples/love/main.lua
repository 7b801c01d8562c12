-- limber in a LÖVE game: a crowd of Foxes and CesiumMen animated by limber
-- (crowd players, sampling, blending, local-to-model, scene attachments,
-- palettes) and skinned on the GPU: each frame every palette, in limber's
-- mat3x4 layout (three rows of four floats per joint), goes to one float
-- texture with one copy and one Image:replacePixels, and a vertex shader
-- blends the three texels of each joint by JOINTS_0 / WEIGHTS_0. Key C (or
-- --cpu) switches to CPU skinning through limber.skinning, for comparison.
--
--   love examples/love [--frames N [--screenshot FILE]] [--cpu] [--characters N] [--no-hud]
--   love examples/love --compare A.png B.png
--
-- docs/love.md tells how to build limber for LÖVE's LuaJIT and ship it with
-- a game; scripts/love.sh does it and runs this game.
local ffi = require "ffi"

local NAME = "limber love example"
local USAGE = [[
usage: love GAME [options]
  --frames N         run N frames of 1/60 s each, then quit with status 0
  --screenshot FILE  after the last frame save the picture to FILE (PNG; --frames default 120)
  --cpu              start with CPU skinning (limber.skinning) instead of the GPU
  --characters N     crowd size (default 240; 60% foxes, 40% CesiumMen)
  --no-hud           no text over the picture (screenshots that are compared)
  --compare A B      print how many pixels of two PNG files differ and how much of A the
                     characters cover (no window)
keys: C switches GPU / CPU skinning, K the skeleton overlay, Escape quits]]

-- A headless run must end: LÖVE's error screen would wait for a key that no
-- one presses. There an error prints its message and the run exits with
-- status 1; in a window LÖVE's own error screen stays.
local headless = false
for _, a in ipairs(arg or {}) do
  if a == "--frames" or a == "--screenshot" or a == "--compare" then headless = true end
end
local love_errhand = love.errorhandler or love.errhand
function love.errorhandler(msg)
  if not headless then return love_errhand(msg) end
  io.stderr:write(NAME, ": ", tostring(msg), "\n", debug.traceback("", 2), "\n")
  return function() return 1 end
end

-- ---- finding limber -----------------------------------------------------------
-- Shipped with a game (scripts/love.sh builds such a folder, docs/love.md):
-- the game folder holds limber/init.lua, limber/*.lua and limber/gltf/*.lua,
-- which LÖVE's require finds in the game, and limber/core.so (built for
-- LuaJIT) and cjson.so, which LÖVE's C require path finds in a game folder.
-- A .love archive or a fused game cannot load a C module from inside the
-- archive: there the .so files go next to it, in the source base directory,
-- which this line puts on package.cpath.
package.cpath = love.filesystem.getSourceBaseDirectory() .. "/?.so;" .. package.cpath
-- Run straight from a limber checkout (love examples/love): the repository's
-- lua/ folder and its LuaJIT build (CMake -DLIMBER_LUA=luajit in
-- build-luajit/; LIMBER_CPATH overrides).
local repo
if not love.filesystem.getInfo("limber/init.lua") then
  repo = love.filesystem.getSource():match("^(.*)/examples/love/?$")
  if repo then
    package.path = repo .. "/lua/?.lua;" .. repo .. "/lua/?/init.lua;" .. package.path
    package.cpath = (os.getenv("LIMBER_CPATH") or (repo .. "/build-luajit/?.so")) .. ";"
      .. package.cpath
  end
end

local limber = require "limber"
local gltf, anim, scene, skinning, lmath = limber.gltf, limber.anim, limber.scene,
  limber.skinning, require "limber.math"

-- the asset files: in the game folder (assets/...), else in the checkout
local function read_asset(rel)
  local path = "assets/" .. rel
  if love.filesystem.getInfo(path) then return assert(love.filesystem.read(path)) end
  local f = repo and io.open(repo .. "/examples/assets/" .. rel, "rb")
  if not f then error(("asset %s not found in the game folder's assets/"):format(rel), 0) end
  local bytes = f:read("*a")
  f:close()
  return bytes
end

-- ---- options ------------------------------------------------------------------

local opt = { characters = 240, cpu = false, hud = true, skeleton = true }

local function parse(args)
  local function count(name, v, lo, hi)
    local n = tonumber(v)
    if not n or n ~= math.floor(n) or n < lo or n > hi then
      error(("--%s needs an integer in [%d, %d], got %s"):format(name, lo, hi, tostring(v)), 0)
    end
    return n
  end
  local function file(name, v)
    if not v or v == "" or v:sub(1, 2) == "--" then
      error(("%s needs a file name"):format(name), 0)
    end
    return v
  end
  local i = 1
  while i <= #args do
    local a = args[i]
    if a == "--frames" then
      opt.frames, i = count("frames", args[i + 1], 1, 1000000), i + 2
    elseif a == "--screenshot" then
      opt.screenshot, i = file(a, args[i + 1]), i + 2
    elseif a == "--characters" then
      opt.characters, i = count("characters", args[i + 1], 2, 100000), i + 2
    elseif a == "--cpu" then
      opt.cpu, i = true, i + 1
    elseif a == "--no-hud" then
      opt.hud, i = false, i + 1
    elseif a == "--compare" then
      opt.compare, i = { file(a, args[i + 1]), file(a, args[i + 2]) }, i + 3
    elseif a == "--help" then
      opt.help, i = true, i + 1
    else
      error(("unknown argument '%s'"):format(tostring(a)), 0)
    end
  end
  if opt.screenshot and not opt.frames then opt.frames = 120 end
end

-- ---- matrices (column-major, as limber and GLSL store them) ----------------------

local function perspective(fovy, aspect, near, far)
  local f = 1 / math.tan(fovy / 2)
  return { f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) / (near - far), -1,
           0, 0, 2 * far * near / (near - far), 0 }
end

local function look_at(eye, at)
  local fx, fy, fz = at[1] - eye[1], at[2] - eye[2], at[3] - eye[3]
  local n = math.sqrt(fx * fx + fy * fy + fz * fz)
  fx, fy, fz = fx / n, fy / n, fz / n
  local sx, sy, sz = -fz, 0, fx -- f x (0, 1, 0)
  n = math.sqrt(sx * sx + sz * sz)
  sx, sz = sx / n, sz / n
  local ux, uy, uz = sy * fz - sz * fy, sz * fx - sx * fz, sx * fy - sy * fx
  return { sx, ux, -fx, 0, sy, uy, -fy, 0, sz, uz, -fz, 0,
           -(sx * eye[1] + sy * eye[2] + sz * eye[3]), -(ux * eye[1] + uy * eye[2] + uz * eye[3]),
           fx * eye[1] + fy * eye[2] + fz * eye[3], 1 }
end

-- ---- shaders ------------------------------------------------------------------

local LIT = [[
varying vec3 vnormal;
#ifdef PIXEL
uniform vec3 base;
vec4 effect(vec4 color, Image tex, vec2 tc, vec2 sc) {
  float d = max(dot(normalize(vnormal), normalize(vec3(0.45, 0.8, 0.35))), 0.0);
  return vec4(base * (0.35 + 0.65 * d), 1.0);
}
#endif
]]

-- GPU skinning. The palettes of every kind sit in one RGBA32F texture,
-- `palette_width` texels a row: kind k from texel `first_texel`, instance
-- after instance, `joints` entries each, three texels (limber's mat3x4 rows)
-- an entry. The blended rows transform the position and the normal, as
-- limber.skinning does on the CPU.
local GPU_SHADER = [[
#pragma language glsl3
uniform mat4 viewproj;
]] .. LIT .. [[
#ifdef VERTEX
uniform Image palette;
uniform int palette_width;
uniform int first_texel;
uniform int joints;
attribute vec3 VertexNormal;
attribute vec4 VertexJoints;
attribute vec4 VertexWeights;
vec4 texel(int t) {
  return texelFetch(palette, ivec2(t % palette_width, t / palette_width), 0);
}
vec4 position(mat4 transform_projection, vec4 vertex_position) {
  int entries = first_texel + love_InstanceID * joints * 3;
  vec4 r0 = vec4(0.0), r1 = vec4(0.0), r2 = vec4(0.0);
  for (int k = 0; k < 4; k++) {
    int t = entries + int(VertexJoints[k] + 0.5) * 3;
    float w = VertexWeights[k];
    r0 += w * texel(t);
    r1 += w * texel(t + 1);
    r2 += w * texel(t + 2);
  }
  vec4 p = vec4(vertex_position.xyz, 1.0), n = vec4(VertexNormal, 0.0);
  vnormal = vec3(dot(r0, n), dot(r1, n), dot(r2, n));
  return viewproj * vec4(dot(r0, p), dot(r1, p), dot(r2, p), 1.0);
}
#endif
]]

-- CPU skinning: limber.skinning wrote world positions and normals
local CPU_SHADER = [[
uniform mat4 viewproj;
]] .. LIT .. [[
#ifdef VERTEX
attribute vec3 VertexNormal;
vec4 position(mat4 transform_projection, vec4 vertex_position) {
  vnormal = VertexNormal;
  return viewproj * vec4(vertex_position.xyz, 1.0);
}
#endif
]]

-- hats: one instance per attached scene node, its world matrix (gathered by
-- the scene in one call) in four texels of a row
local HAT_SHADER = [[
#pragma language glsl3
uniform mat4 viewproj;
]] .. LIT .. [[
#ifdef VERTEX
uniform Image worlds;
attribute vec3 VertexNormal;
vec4 position(mat4 transform_projection, vec4 vertex_position) {
  int i = love_InstanceID;
  mat4 m = mat4(texelFetch(worlds, ivec2(0, i), 0), texelFetch(worlds, ivec2(1, i), 0),
                texelFetch(worlds, ivec2(2, i), 0), texelFetch(worlds, ivec2(3, i), 0));
  vnormal = mat3(m) * VertexNormal;
  return viewproj * m * vec4(vertex_position.xyz, 1.0);
}
#endif
]]

-- the ground: one flat colour (so --compare can tell it from the crowd)
local FLAT_SHADER = [[
uniform mat4 viewproj;
#ifdef VERTEX
vec4 position(mat4 transform_projection, vec4 vertex_position) {
  return viewproj * vec4(vertex_position.xyz, 1.0);
}
#endif
#ifdef PIXEL
uniform vec3 base;
vec4 effect(vec4 color, Image tex, vec2 tc, vec2 sc) { return vec4(base, 1.0); }
#endif
]]

local SKY = { 0.56, 0.66, 0.78 }
local GROUND = { 0.36, 0.40, 0.33 }
local HAT = { 0.16, 0.15, 0.18 }
local DT = 1 / 60
local SPACING = 1.7
local PALETTE_WIDTH = 1024 -- texels per row of the palette texture

local KINDS = {
  { name = "Fox", file = "Fox/Fox.glb", share = 0.6, scale = 0.012, color = { 0.92, 0.49, 0.18 },
    head = "b_Head_05", hat_at = { 0, 0.1, 0.03 }, hat_size = 0.9 },
  { name = "CesiumMan", file = "CesiumMan/CesiumMan.gltf", scale = 1.0,
    color = { 0.31, 0.53, 0.88 }, hat_at = { 0, 0.26, 0 }, hat_size = 1.1 },
}

-- ---- the crowd (built once) ---------------------------------------------------

local kinds, sc, hats = {}, nil, {}
local shaders, ground_mesh, hat_mesh = {}, nil, nil
local pal_data, pal_image, hat_buffer, hat_data, hat_image, hat_ptr
local overlay = {} -- the character whose skeleton is drawn
local state = { frame = 0, time = 0 }
local ms = {}
local STAGES = { { "players", "advance" }, { "sample + blend", "evaluate" },
                 { "local to model", "l2m" }, { "scene (hats)", "scene" },
                 { "palettes", "palette" }, { "CPU skinning", "skin" },
                 { "upload", "upload" }, { "draw calls", "draw" } }
local clock = love.timer.getTime

-- deterministic pseudo-random numbers, the same on every run
local seed = 12345
local function rand()
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed / 2147483648
end

local function f32(buffer, width)
  assert(buffer:scalar_type() == "f32" and buffer:width() == width, "unexpected stream layout")
  return ffi.cast("const float *", (buffer:ptr()))
end

-- Flat normals of a primitive without NORMAL (the Fox): each triangle's
-- normal on its three vertices (in file order; indexed meshes average).
local function face_normals(prim)
  local V = prim.vertex_count
  local pos = f32(prim.positions, 3)
  local idx = prim.gpu_indices and ffi.cast("const uint32_t *", (prim.gpu_indices:ptr()))
  local tris = (prim.gpu_indices and prim.gpu_indices:element_count() or V) / 3
  local n = {}
  for i = 1, 3 * V do n[i] = 0 end
  for t = 0, tris - 1 do
    local a, b, c = 3 * t, 3 * t + 1, 3 * t + 2
    if idx then a, b, c = idx[a], idx[b], idx[c] end
    local ux, uy, uz = pos[3 * b] - pos[3 * a], pos[3 * b + 1] - pos[3 * a + 1],
      pos[3 * b + 2] - pos[3 * a + 2]
    local vx, vy, vz = pos[3 * c] - pos[3 * a], pos[3 * c + 1] - pos[3 * a + 1],
      pos[3 * c + 2] - pos[3 * a + 2]
    local nx, ny, nz = uy * vz - uz * vy, uz * vx - ux * vz, ux * vy - uy * vx
    for _, v in ipairs { a, b, c } do
      n[3 * v + 1], n[3 * v + 2], n[3 * v + 3] = n[3 * v + 1] + nx, n[3 * v + 2] + ny,
        n[3 * v + 3] + nz
    end
  end
  for v = 0, V - 1 do
    local x, y, z = n[3 * v + 1], n[3 * v + 2], n[3 * v + 3]
    local l = math.sqrt(x * x + y * y + z * z)
    if l > 0 then n[3 * v + 1], n[3 * v + 2], n[3 * v + 3] = x / l, y / l, z / l
    else n[3 * v + 2] = 1 end
  end
  return limber.buffer("f32", 3, n)
end

-- The triangles, in the SkinMesh's (influence-sorted) vertex order: its
-- remapped index buffer, or, without indices, consecutive file vertices
-- mapped to sorted ones. `copies` instances after one another (the CPU
-- path's one big mesh), as u32 in a ByteData for Mesh:setVertexMap.
local function triangles(k, copies)
  local tri = k.mesh:gpu_index_buffer() or k.mesh:gpu_inverse_permutation_buffer()
  local n, V = tri:element_count(), k.vertices
  local src = ffi.cast("const uint32_t *", (tri:ptr()))
  local data = love.data.newByteData(n * copies * 4)
  local dst = ffi.cast("uint32_t *", data:getFFIPointer())
  for i = 0, copies - 1 do
    for t = 0, n - 1 do dst[i * n + t] = src[t] + i * V end
  end
  return data
end

-- The GPU mesh, built once: position, normal, joint slots and weights of each
-- vertex, in the SkinMesh's sorted order (vertex s is file vertex perm[s]).
local function gpu_mesh(k, prim)
  local V = k.vertices
  local perm = ffi.cast("const uint32_t *", (k.mesh:gpu_permutation_buffer():ptr()))
  local pos, nrm, wgt = f32(prim.positions, 3), f32(k.normals, 3), f32(prim.weights, 4)
  assert(prim.gpu_joints:scalar_type() == "u16" and prim.gpu_joints:width() == 4)
  local jnt = ffi.cast("const uint16_t *", (prim.gpu_joints:ptr()))
  local data = love.data.newByteData(V * 14 * 4)
  local out = ffi.cast("float *", data:getFFIPointer())
  for s = 0, V - 1 do
    local f, o = perm[s], s * 14
    out[o], out[o + 1], out[o + 2] = pos[3 * f], pos[3 * f + 1], pos[3 * f + 2]
    out[o + 3], out[o + 4], out[o + 5] = nrm[3 * f], nrm[3 * f + 1], nrm[3 * f + 2]
    for c = 0, 3 do
      out[o + 6 + c] = jnt[4 * f + c]
      out[o + 10 + c] = wgt[4 * f + c]
    end
  end
  local mesh = love.graphics.newMesh({ { "VertexPosition", "float", 3 },
    { "VertexNormal", "float", 3 }, { "VertexJoints", "float", 4 },
    { "VertexWeights", "float", 4 } }, V, "triangles", "static")
  mesh:setVertices(data)
  mesh:setVertexMap(triangles(k, 1), "uint32")
  return mesh
end

-- The CPU path: one stream mesh holding every instance's skinned vertices,
-- refreshed each frame from limber's interleaved output with one copy.
local function cpu_mesh(k)
  local V, N = k.vertices, k.count
  k.out = limber.buffer("f32", 6, V * N)
  k.target = skinning.target { mesh = k.mesh, instances = N, buffer = k.out, stride = 24,
                               position = 0, normal = 12 }
  local ptr, size = k.out:ptr()
  k.out_ptr, k.out_size = ffi.cast("const uint8_t *", ptr), size
  k.cpu_bytes = love.data.newByteData(size)
  k.cpu = love.graphics.newMesh({ { "VertexPosition", "float", 3 },
    { "VertexNormal", "float", 3 } }, V * N, "triangles", "stream")
  k.cpu:setVertexMap(triangles(k, N), "uint32")
end

-- v rotated by the unit quaternion q (x, y, z, w)
local function rotate(q, v)
  local x, y, z, w = q[1], q[2], q[3], q[4]
  local tx, ty, tz = 2 * (y * v[3] - z * v[2]), 2 * (z * v[1] - x * v[3]), 2 * (x * v[2] - y * v[1])
  return { v[1] + w * tx + y * tz - z * ty, v[2] + w * ty + z * tx - x * tz,
           v[3] + w * tz + x * ty - y * tx }
end

local function box(out, cx, cy, cz, hx, hy, hz)
  local faces = { { 1, 0, 0 }, { -1, 0, 0 }, { 0, 1, 0 }, { 0, -1, 0 }, { 0, 0, 1 }, { 0, 0, -1 } }
  for _, f in ipairs(faces) do
    -- two axes across the face
    local u = f[1] ~= 0 and { 0, 1, 0 } or { 1, 0, 0 }
    local v = { f[2] * u[3] - f[3] * u[2], f[3] * u[1] - f[1] * u[3], f[1] * u[2] - f[2] * u[1] }
    local function corner(a, b)
      return { cx + (f[1] + a * u[1] + b * v[1]) * hx, cy + (f[2] + a * u[2] + b * v[2]) * hy,
               cz + (f[3] + a * u[3] + b * v[3]) * hz, f[1], f[2], f[3] }
    end
    for _, q in ipairs { { -1, -1 }, { 1, -1 }, { 1, 1 }, { -1, -1 }, { 1, 1 }, { -1, 1 } } do
      out[#out + 1] = corner(q[1], q[2])
    end
  end
  return out
end

local function build()
  local g = love.graphics
  local support = g.getSupported()
  if not (support.glsl3 and support.instancing and g.getImageFormats().rgba32f) then
    error("this OpenGL lacks GLSL 3, instancing or RGBA32F textures, which the GPU path needs", 0)
  end
  local total = opt.characters
  KINDS[1].count = math.max(1, math.floor(total * KINDS[1].share + 0.5))
  KINDS[2].count = total - KINDS[1].count
  -- a grid with the two kinds mixed, each character turned its own way
  local side = math.ceil(math.sqrt(total))
  local cells = {}
  for c = 0, total - 1 do cells[c + 1] = c end
  for c = total, 2, -1 do
    local r = math.floor(rand() * c) + 1
    cells[c], cells[r] = cells[r], cells[c]
  end
  local next_cell, texels = 0, 0
  for index, spec in ipairs(KINDS) do
    local k = { name = spec.name, color = spec.color, count = spec.count }
    local asset = gltf.load_bytes(read_asset(spec.file), { name = spec.file })
    local skel = asset.skeletons[1]
    k.skel = skel.skeleton
    k.pose = gltf.pose(asset, 1, k.count)
    -- the GPU's palettes in limber's mat3x4 layout (three texels a joint);
    -- CPU skinning reads mat4 palettes (limber's faster layout on the CPU)
    k.palette = gltf.palette(asset, k.pose, { skin = 1, layout = "mat3x4" })
    k.cpu_palette = gltf.palette(asset, k.pose, { skin = 1, layout = "mat4" })
    local prim = asset.meshes[asset.skinned_nodes[1].mesh].primitives[1]
    k.vertices = prim.vertex_count
    k.normals = prim.normals or face_normals(prim)
    k.mesh = skinning.mesh { positions = prim.positions, normals = k.normals,
                             gpu_joints = prim.gpu_joints, weights = prim.weights,
                             gpu_indices = prim.gpu_indices, skin = asset.skins[1].skin }
    -- each character's place: the pose's root matrix (so model matrices,
    -- palettes and skinned vertices are in world space) after the model's own
    -- root (CesiumMan is Z-up)
    local base = skel.root_parent and asset.nodes[skel.root_parent].world
      or lmath.trs_matrix({ 0, 0, 0 }, { 0, 0, 0, 1 }, { 1, 1, 1 })
    k.cells = {}
    for i = 1, k.count do
      local cell = cells[next_cell + i]
      k.cells[i] = cell
      local x = (cell % side - (side - 1) / 2) * SPACING + (rand() - 0.5) * 0.5
      local z = (math.floor(cell / side) - (side - 1) / 2) * SPACING + (rand() - 0.5) * 0.5
      local yaw = rand() * 2 * math.pi
      local s = spec.scale
      k.pose:set_root(i, lmath.mul(lmath.trs_matrix({ x, 0, z },
        { 0, math.sin(yaw / 2), 0, math.cos(yaw / 2) }, { s, s, s }), base))
    end
    next_cell = next_cell + k.count
    -- players: each character its clip, start time and rate
    k.clips = {}
    for a, animation in ipairs(asset.animations) do
      k.clips[a] = animation.clips[1]
      if animation.name then k.clips[animation.name] = a end
    end
    k.crowd = anim.crowd(k.pose, k.clips)
    for i = 1, k.count do
      local c = math.floor(rand() * #k.clips) + 1
      k.crowd:player(i):play(c, { time = rand() * k.clips[c]:duration(), rate = 0.8 + 0.4 * rand(),
                                  loop = true })
    end
    -- the head joint: named, or the highest joint at rest (CesiumMan's
    -- joints have no names); the hat sits upright on it at rest: its node
    -- undoes the head's rest rotation (a joint's axes point anywhere)
    local rest = gltf.pose(asset, 1, 1)
    rest:local_to_model()
    k.head = spec.head and k.skel:find(spec.head)
    if not k.head then
      local y = -math.huge
      for j = 1, k.skel:joint_count() do
        local m = rest:model(1, j)
        if m[14] > y then k.head, y = j, m[14] end
      end
    end
    local _, q = lmath.decompose(rest:model(1, k.head))
    k.hat_rotation = { -q[1], -q[2], -q[3], q[4] }
    k.hat_at = rotate(k.hat_rotation, spec.hat_at)
    k.hat_size = spec.hat_size
    k.joints = k.palette:joint_count()
    local ptr, size = k.palette:matrix_buffer():ptr()
    assert(size == k.count * k.joints * 48, "palette buffer size")
    k.pal_ptr, k.pal_size = ffi.cast("const uint8_t *", ptr), size
    k.first_texel = texels
    texels = texels + k.count * k.joints * 3
    k.gpu = gpu_mesh(k, prim)
    cpu_mesh(k)
    kinds[index] = k
  end
  -- one float texture for every palette, replaced whole once a frame
  pal_data = love.image.newImageData(PALETTE_WIDTH, math.ceil(texels / PALETTE_WIDTH), "rgba32f")
  pal_image = g.newImage(pal_data)
  pal_image:setFilter("nearest", "nearest")

  -- attachments: a hat on every head, through the scene (a node per
  -- character on its pose instance, the hat on the head joint's slot,
  -- following its rotation and translation)
  sc = scene.new { capacity = 2 * total + 8 }
  for _, k in ipairs(kinds) do
    for i = 1, k.count do
      local holder = sc:create { pose = k.pose, instance = i }
      local s = k.hat_size
      hats[#hats + 1] = sc:create { parent = holder, slot = k.head, follow = "rigid",
                                    translation = k.hat_at, rotation = k.hat_rotation,
                                    scale = { s, s, s } }
    end
  end
  hat_buffer = limber.buffer("f32", 16, #hats)
  hat_ptr = ffi.cast("const uint8_t *", (hat_buffer:ptr()))
  hat_data = love.image.newImageData(4, #hats, "rgba32f")
  hat_image = g.newImage(hat_data)
  hat_image:setFilter("nearest", "nearest")
  local fmt = { { "VertexPosition", "float", 3 }, { "VertexNormal", "float", 3 } }
  local hat = box({}, 0, 0.01, 0, 0.14, 0.012, 0.14) -- brim
  hat_mesh = g.newMesh(fmt, box(hat, 0, 0.08, 0, 0.08, 0.07, 0.08), "triangles", "static")
  local r = side * SPACING * 8
  ground_mesh = g.newMesh({ { "VertexPosition", "float", 3 } },
    { { -r, 0, -r }, { r, 0, -r }, { r, 0, r }, { -r, 0, -r }, { r, 0, r }, { -r, 0, r } },
    "triangles", "static")
  shaders.gpu = g.newShader(GPU_SHADER)
  shaders.cpu = g.newShader(CPU_SHADER)
  shaders.hat = g.newShader(HAT_SHADER)
  shaders.flat = g.newShader(FLAT_SHADER)
  -- the skeleton overlay: the fox nearest the middle of the grid
  local k1, mid, best = kinds[1], (side - 1) / 2, math.huge
  for i = 1, k1.count do
    local c = k1.cells[i]
    local d = (c % side - mid) ^ 2 + (math.floor(c / side) - mid) ^ 2
    if d < best then overlay.instance, best = i, d end
  end
  overlay.kind = k1
  -- the pose's model matrices read in place (a view kept with the pointer,
  -- 16 floats per joint, instance after instance), parents read once
  overlay.models = k1.pose:model_buffer()
  overlay.m = f32(overlay.models, 16) + (overlay.instance - 1) * k1.skel:joint_count() * 16
  overlay.parents = k1.skel:parents()
end

-- ---- the compare tool -----------------------------------------------------------

local function read_png(path)
  local f = io.open(path, "rb")
  if not f then error(("cannot open %s"):format(path), 0) end
  local bytes = f:read("*a")
  f:close()
  local img = love.image.newImageData(love.filesystem.newFileData(bytes, path))
  assert(img:getFormat() == "rgba8", "expected an 8-bit RGBA picture")
  return img
end

-- Counts the pixels whose colour differs by more than 24/255 in a channel,
-- and the pixels of A that are neither sky nor ground (what the crowd, its
-- hats and the overlay cover), split by hue into foxes (orange) and men
-- (blue).
local function compare(a_path, b_path)
  local a, b = read_png(a_path), read_png(b_path)
  local w, h = a:getDimensions()
  if w ~= b:getWidth() or h ~= b:getHeight() then
    error(("the pictures differ in size: %dx%d and %dx%d"):format(w, h, b:getDimensions()), 0)
  end
  local pa = ffi.cast("const uint8_t *", a:getFFIPointer())
  local pb = ffi.cast("const uint8_t *", b:getFFIPointer())
  local function near(p, c) -- within 4/255 of a flat colour
    for ch = 0, 2 do
      if math.abs(pa[p + ch] - math.floor(c[ch + 1] * 255 + 0.5)) > 4 then return false end
    end
    return true
  end
  local differ, covered, fox, man = 0, 0, 0, 0
  for p = 0, 4 * (w * h - 1), 4 do
    local d = math.max(math.abs(pa[p] - pb[p]), math.abs(pa[p + 1] - pb[p + 1]),
      math.abs(pa[p + 2] - pb[p + 2]))
    if d > 24 then differ = differ + 1 end
    if not (near(p, SKY) or near(p, GROUND)) then
      covered = covered + 1
      if pa[p] > pa[p + 2] + 40 then
        fox = fox + 1
      elseif pa[p + 2] > pa[p] + 40 then
        man = man + 1
      end
    end
  end
  local n = w * h
  print(("compare: %d x %d pixels, %d differ (%.3f%%), covered %.2f%% (fox %.2f%%, man %.2f%%)")
    :format(w, h, differ, 100 * differ / n, 100 * covered / n, 100 * fox / n, 100 * man / n))
end

-- ---- the frame ------------------------------------------------------------------

function love.load(args)
  local ok, err = pcall(parse, args)
  if not ok or opt.help then
    if not ok then io.stderr:write(NAME, ": ", err, "\n") end
    io.stderr:write(USAGE, "\n")
    love.event.quit(ok and 0 or 2)
    return
  end
  if opt.compare then
    compare(opt.compare[1], opt.compare[2])
    love.event.quit(0)
    return
  end
  build()
  local _, _, _, renderer = love.graphics.getRendererInfo()
  local major, minor = love.getVersion()
  print(("limber %s on %s, LÖVE %d.%d, %s: %d characters (%d Fox, %d CesiumMan), %d hats, "
    .. "%s skinning")
    :format(limber._VERSION, jit and jit.version or _VERSION, major, minor, renderer,
      opt.characters, kinds[1].count, kinds[2].count, #hats, opt.cpu and "CPU" or "GPU"))
end

function love.keypressed(key)
  if key == "c" then opt.cpu = not opt.cpu end
  if key == "k" then opt.skeleton = not opt.skeleton end
  if key == "escape" then love.event.quit(0) end
end

local function stage(name, t0)
  local t1 = clock()
  local v = (t1 - t0) * 1e3
  ms[name] = ms[name] and ms[name] * 0.9 + v * 0.1 or v
  return t1
end

function love.update(dt)
  if not sc then return end
  if opt.frames then dt = DT end -- a recorded run is the same frame on every machine
  local before = state.time
  state.frame, state.time = state.frame + 1, state.time + dt
  local t = clock()
  -- players: every 1.5 s a fifth of the foxes cross-fades between Walk and Run
  local fox = kinds[1]
  local walk, run = fox.clips.Walk, fox.clips.Run
  local beat = math.floor(state.time / 1.5)
  if beat ~= math.floor(before / 1.5) then
    for i = 1 + beat % 5, fox.count, 5 do
      local p = fox.crowd:player(i)
      local clip = p:state()
      if clip == fox.clips[walk] then p:play(run, { fade = 0.4 })
      elseif clip == fox.clips[run] then p:play(walk, { fade = 0.4 }) end
    end
  end
  for _, k in ipairs(kinds) do k.crowd:advance(dt) end
  t = stage("advance", t)
  for _, k in ipairs(kinds) do k.crowd:evaluate() end
  t = stage("evaluate", t)
  for _, k in ipairs(kinds) do k.pose:local_to_model() end
  t = stage("l2m", t)
  sc:update()
  sc:gather(hats, #hats, hat_buffer)
  t = stage("scene", t)
  for _, k in ipairs(kinds) do (opt.cpu and k.cpu_palette or k.palette):update() end
  t = stage("palette", t)
  if opt.cpu then
    for _, k in ipairs(kinds) do skinning.run(k.mesh, k.cpu_palette, k.target) end
    t = stage("skin", t)
    for _, k in ipairs(kinds) do
      ffi.copy(k.cpu_bytes:getFFIPointer(), k.out_ptr, k.out_size)
      k.cpu:setVertices(k.cpu_bytes)
    end
  else
    ms.skin = nil -- no CPU skinning this frame (the HUD shows "-")
    -- every palette to the float texture: one copy each, one upload
    local dst = ffi.cast("uint8_t *", pal_data:getFFIPointer())
    for _, k in ipairs(kinds) do ffi.copy(dst + 16 * k.first_texel, k.pal_ptr, k.pal_size) end
    pal_image:replacePixels(pal_data)
  end
  ffi.copy(hat_data:getFFIPointer(), hat_ptr, 64 * #hats)
  hat_image:replacePixels(hat_data)
  stage("upload", t)
end

local function camera()
  local w, h = love.graphics.getDimensions()
  local t = state.time
  local side = math.ceil(math.sqrt(opt.characters)) * SPACING
  local r = (0.5 * side + 4) * (1 + 0.12 * math.sin(t * 0.4))
  local a = 0.7 + 0.18 * t
  local eye = { math.cos(a) * r, 0.3 * r + 1, math.sin(a) * r }
  return lmath.mul(perspective(math.rad(45), w / h, 0.2, 20 * r), look_at(eye, { 0, 0.8, 0 }))
end

local function draw_skeleton(vp, w, h)
  local m, parents = overlay.m, overlay.parents
  local function screen(j)
    local o = (j - 1) * 16
    local x, y, z = m[o + 12], m[o + 13], m[o + 14]
    local q = vp[4] * x + vp[8] * y + vp[12] * z + vp[16]
    if q <= 0 then return nil end
    return ((vp[1] * x + vp[5] * y + vp[9] * z + vp[13]) / q * 0.5 + 0.5) * w,
      (0.5 - (vp[2] * x + vp[6] * y + vp[10] * z + vp[14]) / q * 0.5) * h
  end
  love.graphics.setColor(1, 0.95, 0.2)
  love.graphics.setLineWidth(2)
  for j = 1, #parents do
    local p = parents[j]
    local ax, ay = screen(j)
    if ax then
      love.graphics.circle("fill", ax, ay, 2.5)
      local bx, by
      if p > 0 then bx, by = screen(p) end
      if bx then love.graphics.line(ax, ay, bx, by) end
    end
  end
  love.graphics.setColor(1, 1, 1)
end

local function hud()
  local lines, values = {
    ("%d characters, %s skinning (C switches), %d fps, frame %d"):format(opt.characters,
      opt.cpu and "CPU" or "GPU", love.timer.getFPS(), state.frame) }, { "" }
  for _, s in ipairs(STAGES) do
    lines[#lines + 1] = s[1]
    values[#values + 1] = ms[s[2]] and ("%7.3f ms"):format(ms[s[2]]) or "      -"
  end
  love.graphics.setColor(0, 0, 0, 0.45)
  love.graphics.rectangle("fill", 6, 6, 330, 16 * #lines + 8)
  love.graphics.setColor(1, 1, 1)
  love.graphics.print(table.concat(lines, "\n"), 12, 10)
  love.graphics.print(table.concat(values, "\n"), 150, 10)
end

function love.draw()
  if not sc then return end
  local g = love.graphics
  local t0 = clock()
  local cam = camera()
  local w, h = g.getDimensions()
  g.clear(SKY[1], SKY[2], SKY[3], 1, false, 1)
  g.setDepthMode("lequal", true)
  g.setMeshCullMode("none")
  g.setShader(shaders.flat)
  shaders.flat:send("viewproj", "column", cam)
  shaders.flat:send("base", GROUND)
  g.draw(ground_mesh)
  local sh = opt.cpu and shaders.cpu or shaders.gpu
  g.setShader(sh)
  sh:send("viewproj", "column", cam)
  if not opt.cpu then
    sh:send("palette", pal_image)
    sh:send("palette_width", PALETTE_WIDTH)
  end
  for _, k in ipairs(kinds) do
    sh:send("base", k.color)
    if opt.cpu then
      g.draw(k.cpu)
    else
      sh:send("first_texel", k.first_texel)
      sh:send("joints", k.joints)
      g.drawInstanced(k.gpu, k.count)
    end
  end
  g.setShader(shaders.hat)
  shaders.hat:send("viewproj", "column", cam)
  shaders.hat:send("base", HAT)
  shaders.hat:send("worlds", hat_image)
  g.drawInstanced(hat_mesh, #hats)
  g.setShader()
  g.setDepthMode()
  if opt.skeleton then draw_skeleton(cam, w, h) end
  stage("draw", t0)
  if opt.hud then hud() end
  if opt.frames and state.frame >= opt.frames and not state.done then
    state.done = true
    local parts = {}
    for _, st in ipairs(STAGES) do
      if ms[st[2]] then parts[#parts + 1] = ("%s %.3f"):format(st[1], ms[st[2]]) end
    end
    print(("ms per frame (moving average), %s skinning: %s"):format(opt.cpu and "CPU" or "GPU",
      table.concat(parts, ", ")))
    if not opt.screenshot then
      love.event.quit(0)
      return
    end
    g.captureScreenshot(function(img)
      local f, err = io.open(opt.screenshot, "wb")
      if not f then error(("cannot write the screenshot: %s"):format(err), 0) end
      f:write(img:encode("png"):getString())
      f:close()
      print(("screenshot after %d frames: %s"):format(state.frame, opt.screenshot))
      love.event.quit(0)
    end)
  end
end
