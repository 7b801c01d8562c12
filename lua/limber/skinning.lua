--- limber.skinning: batched CPU skinning of influence-sorted meshes.
--
-- A mesh is prepared once (`mesh`): vertices sorted by influence count (1, 2,
-- 3, then 4), weights renormalised, the index buffer remapped and the
-- permutation kept. Each frame, one call skins many instances, each with its
-- own palette (`limber.Palette`), on the module's worker pool: `run` for one
-- mesh and every instance of a palette, or a prepared `batch` of jobs that
-- may mix meshes, palettes and targets. Outputs go to limber Buffers
-- described once by a `target` (separate streams or one interleaved vertex
-- buffer), in sorted order (matches `mesh:gpu_index_buffer()`) or file order.
-- No Lua garbage is made per frame.
-- @module limber.skinning
local core = require "limber.core"
local check = require "limber.check"
local math_type = check.math_type
local skin_run = core.skinning_run

local M = {}

-- Argument checks: errors in the standard form, blamed on the caller of the
-- public function (level 3 from here).
local function expect(v, n, fname, want)
  if type(v) ~= want then check.arg_error(n, fname, want, v, 3) end
end

local rethrow = check.rethrow

--- Prepares an immutable skinned mesh.
-- `desc` fields: `positions` (f32 Buffer of width 3 or a flat table, required),
-- `normals` (width 3), `tangents` (width 4, w = handedness), `joints`
-- (u8/u16/u32 Buffer of width 4 with 0-based skin joint slots as glTF
-- JOINTS_0, or a flat table of 1-based slots), `weights` (f32, or normalised
-- u8/u16 Buffer of width 4, or a flat table; renormalised, zero weights
-- dropped, a vertex with every weight zero is an error), `indices` (u8/u16/u32
-- Buffer, 0-based, or a table of 1-based indices; optional) and `skin`
-- (optional limber.Skin: palettes used with this mesh must then belong to it).
-- Unchanging streams (uv, colors) are not part of the mesh: keep them with
-- the asset and reorder them once with `mesh:gpu_permutation_buffer()`.
-- @tparam table desc
-- @treturn limber.SkinMesh
function M.mesh(desc)
  expect(desc, 1, "limber.skinning.mesh", "table")
  local ok, mesh = pcall(core.skinning_mesh, desc)
  if not ok then rethrow(mesh, "limber.skinning.mesh", "skinning_mesh") end
  return mesh
end

--- Describes where skinned vertices go (created once, reused every frame).
-- `desc` fields: `mesh` or `vertices` (vertices per instance), `instances`
-- (default 1), `order` ("sorted", default, or "file"). Separate streams:
-- `positions`, `normals`, `tangents`, each a Buffer (f32, width 3 or 4;
-- tangents 4) or `true` for a new Buffer. Interleaved: `buffer` (f32 or u8
-- Buffer), `stride` (bytes per vertex) and byte offsets `position`, `normal`,
-- `tangent` (12, 12 and 16 bytes are written). Instance i starts at vertex
-- (i - 1) * vertices.
-- @tparam table desc
-- @treturn limber.SkinTarget
function M.target(desc)
  expect(desc, 1, "limber.skinning.target", "table")
  local ok, target = pcall(core.skinning_target, desc)
  if not ok then rethrow(target, "limber.skinning.target", "skinning_target") end
  return target
end

--- Skins every instance of `palette` with `mesh` into `target` (one call,
-- all threads). Raises before writing anything if the objects do not fit.
-- With `morph` (the mesh's `limber.SkinMorph`), each instance's vertices are
-- morphed first (base + sum of weight x delta, in the same pass): `weights`
-- holds one row of `morph:target_count()` numbers per palette instance (an
-- f32 Buffer, or a flat table), every weight finite; a row of zeros costs
-- nothing.
-- @tparam limber.SkinMesh mesh
-- @tparam limber.Palette palette
-- @tparam limber.SkinTarget target
-- @tparam[opt] limber.SkinMorph morph
-- @tparam[opt] limber.Buffer|table weights
function M.run(mesh, palette, target, morph, weights)
  -- per frame: the core checks the objects once; only its error is renamed
  local ok, err = pcall(skin_run, mesh, palette, target, morph, weights)
  if not ok then rethrow(err, "limber.skinning.run", "skinning_run") end
end

--- The morph targets of a mesh (glTF `targets`), for `run` and batches.
-- `targets[t]` is a table `{ positions =, normals =, tangents = }` of deltas
-- in file order, 3 numbers per vertex (f32 Buffers of width 3 or flat
-- tables; tangent deltas are xyz), each optional. Only vertices a target
-- moves are kept (in sorted order), so a sparse target costs in proportion
-- to its vertices. `morph:gpu_delta_buffer([order])` gives every delta in a
-- layout a vertex shader can read (see docs/skinning.md).
-- @tparam limber.SkinMesh mesh
-- @tparam table targets
-- @treturn limber.SkinMorph
function M.morph(mesh, targets)
  expect(targets, 2, "limber.skinning.morph", "table")
  local ok, m = pcall(core.skinning_morph, mesh, targets)
  if not ok then rethrow(m, "limber.skinning.morph", "skinning_morph") end
  return m
end

--- Prepares a list of jobs run together by `batch:run()`. Each job is a
-- table `{ mesh =, palette =, target =, first = 1, count = (rest), slot = first,
-- morph =, weights = }`: palette instances first .. first + count - 1 go to
-- target instances slot ...; with `morph`, `weights` is an f32 Buffer of one
-- row per palette instance, read (and checked) at every `batch:run()`.
-- @tparam table jobs
-- @treturn limber.SkinBatch
function M.batch(jobs)
  expect(jobs, 1, "limber.skinning.batch", "table")
  local ok, batch = pcall(core.skinning_batch, jobs)
  if not ok then rethrow(batch, "limber.skinning.batch", "skinning_batch") end
  return batch
end

--- Gets (and with `n`, sets) the number of threads batched jobs use, the
-- caller included (default: the number of cores). Results are identical for
-- any count.
-- @tparam[opt] integer n
-- @treturn integer threads
-- @treturn integer cores
-- @treturn boolean whether the build has threads (CMake option LIMBER_THREADS)
function M.threads(n)
  if n ~= nil and math_type(n) ~= "integer" then
    local got = math_type(n) == "float" and "number (not an integer)" or type(n)
    error(("bad argument #1 to 'limber.skinning.threads' (integer expected, got %s)")
      :format(got), 2)
  end
  local ok, threads, cores, has = pcall(core.threads, n)
  if not ok then rethrow(threads, "limber.skinning.threads", "threads") end
  return threads, cores, has
end

return M
