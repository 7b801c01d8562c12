--- limber.snapshot: binary snapshots of assets, loaded in a fraction of a
-- millisecond.
--
-- `save` turns a Lua value (typically a loaded glTF asset: its nodes,
-- skeletons, skins, meshes' buffers and packed clips, and the clips'
-- events) into one binary string; `load` gives the value back, equal in
-- every table, number, string and object (a loaded snapshot saves back to
-- the very same bytes). Shared and cyclic references stay shared.
--
-- The blob has no pointers: a header (magic, format version, byte order)
-- and sections found by offsets (`docs/snapshots.md` has the layout).
-- Loading checks the whole blob before it makes anything: a truncated,
-- damaged or hostile blob, or one written by a newer limber, is an error
-- that says what is wrong, never a crash. Snapshots are for caching what
-- a game loads (write them at build time or on first run); the glTF stays
-- the source.
--
-- A snapshot holds tables (without metatables), strings, numbers,
-- booleans, and limber Buffers, Skeletons, Skins, SkinMeshes and Clips.
-- Buffer views (palettes, model matrices) are stored as copies. Anything
-- else (functions, poses, samplers, plans) is refused by name.
-- @module limber.snapshot
local core = require "limber.core"
local check = require "limber.check"
local anim = require "limber.anim"

local M = {}

--- The snapshot format version this limber writes (and the newest it reads).
M.VERSION = core.SNAPSHOT_VERSION

--- Largest snapshot file `read` accepts by default (bytes).
M.MAX_FILE_BYTES = 1024 * 1024 * 1024

--- The snapshot of a value, as a binary string.
-- @param value a table (or any value a snapshot holds, above)
-- @treturn string the blob
function M.save(value)
  if value == nil then check.arg_error(1, "limber.snapshot.save", "value", value) end
  local ok, blob = pcall(core.snapshot_save, value, anim._snapshot_events)
  if not ok then check.rethrow(blob, "limber.snapshot.save", "snapshot_save", 2) end
  return blob
end

local function load(fname, blob)
  local ok, value, sides = pcall(core.snapshot_load, blob)
  if not ok then
    value = tostring(value):gsub("^limber%.snapshot%.load: ", "")
    check.rethrow(value, fname, "snapshot_load", 3)
  end
  local seen = {} -- events two clips shared stay shared
  for _, pair in ipairs(sides) do
    local ok2, err = pcall(anim._restore_events, pair[1], pair[2], seen)
    if not ok2 then
      error(fname .. ": " .. tostring(err):gsub("^[^\n:]*:%d+: ", ""), 3)
    end
  end
  return value
end

--- The value stored in a snapshot blob.
-- @tparam string blob from `save`
-- @return the value
function M.load(blob)
  if type(blob) ~= "string" then check.arg_error(1, "limber.snapshot.load", "string", blob) end
  return load("limber.snapshot.load", blob)
end

--- Reads a snapshot file and loads it. The file must be a regular file (a
-- FIFO, a directory or a device is refused at once, without waiting) of
-- at most `opts.max_bytes` (default `MAX_FILE_BYTES`) bytes.
-- @tparam string path
-- @tparam[opt] table opts `max_bytes`
-- @return the value
function M.read(path, opts)
  local fname = "limber.snapshot.read"
  if type(path) ~= "string" then check.arg_error(1, fname, "string", path) end
  opts = check.options(2, fname, opts, { max_bytes = "number" }, 2)
  local limit = opts.max_bytes or M.MAX_FILE_BYTES
  if limit ~= limit or limit < 0 then
    check.arg_fail(2, fname, "option 'max_bytes' must be >= 0", 2)
  end
  local ok, blob = pcall(core.gltf_read_model, fname, path, math.floor(math.min(limit, 2 ^ 53)))
  if not ok then error(tostring(blob):gsub("^[^\n:]*:%d+: ", ""), 2) end
  return load(fname, blob)
end

--- Writes the snapshot of a value to a file (replacing it). Only a regular
-- file is written: a FIFO, a directory or a device is refused at once. The
-- blob goes to a new file next to `path` that then replaces it in one
-- rename: a failed write leaves the old file whole and no partial one.
-- @tparam string path
-- @param value as for `save`
function M.write(path, value)
  local fname = "limber.snapshot.write"
  if type(path) ~= "string" then check.arg_error(1, fname, "string", path) end
  if value == nil then check.arg_error(2, fname, "value", value) end
  local ok, blob = pcall(core.snapshot_save, value, anim._snapshot_events)
  if not ok then check.rethrow(blob, fname, "snapshot_save", 2) end
  local done, err = pcall(core.snapshot_write, fname, path, blob)
  if not done then check.rethrow(err, fname, "snapshot_write", 2) end
end

return M
