-- The documents cite only files that exist: every repository path written in
-- prose, in backticks, in a fenced code block or as a Markdown link target in README.md,
-- ARCHITECTURE.md, CHANGES.md and docs/*.md must name a file or folder of the
-- repository (with a `:line` or `:first-last` suffix, a line the file has).
-- The checker is also run on small fake documents, so a bad path is shown to
-- fail it.
local H = require "spec.helper"

-- Top-level folders whose paths the documents cite; a token starting with one
-- of these is a repository path.
local PREFIXES = { "csrc/", "lua/", "spec/", "examples/", "docs/", "scripts/", "fuzz/" }
-- Outputs of the build or of scripts, cited on purpose and not in the tree.
local GENERATED = { "docs/api/" }
-- Folders left out of the listing (build output, installed rocks); `find`
-- patterns relative to the root.
local SKIP = { "./.git", "./build*", "./lua_modules", "./demo-out", "./docs/api" }

-- Every file and folder of the repository, as paths relative to the root
-- ("csrc/kernel/pose.c", "csrc/kernel/"); folders end with "/".
local function list_repository(root)
  local prune = {}
  for _, s in ipairs(SKIP) do prune[#prune + 1] = ("-path '%s'"):format(s) end
  local cmd = ("cd '%s' && find . -mindepth 1 \\( %s \\) -prune -o "
    .. "\\( -type d -printf '%%P/\\n' \\) -o -printf '%%P\\n'"):format(root, table.concat(prune, " -o "))
  -- H.sh: without the sanitizer preload of the ASan pass (find would leak-check)
  local ok, out = H.sh(cmd)
  assert(ok, out)
  local set, files = {}, {}
  for line in out:gmatch("[^\n]+") do
    set[line] = true
    files[#files + 1] = line
  end
  return set, files
end

local function count_lines(path)
  local f = io.open(path)
  if not f then return 0 end
  local n = 0
  for _ in f:lines() do n = n + 1 end
  f:close()
  return n
end

-- A path with wildcards: `*` (any run of characters but "/"), `<name>`
-- (a placeholder: one or more characters but "/") and `...` (anything).
local function glob_pattern(path)
  local out = {}
  local i = 1
  while i <= #path do
    local c = path:sub(i, i)
    if path:sub(i, i + 2) == "..." then
      out[#out + 1] = ".*"
      i = i + 3
    elseif c == "*" then
      out[#out + 1] = "[^/]*"
      i = i + 1
    elseif c == "<" then
      local close = path:find(">", i, true)
      out[#out + 1] = "[^/]+"
      i = (close or #path) + 1
    else
      out[#out + 1] = c:gsub("%p", "%%%0")
      i = i + 1
    end
  end
  return "^" .. table.concat(out) .. "/?$"
end

-- The repository as the checker sees it: exists(path) and lines(path).
local function repository(root)
  local set, files = list_repository(root)
  local R = {}
  function R.exists(path)
    if set[path] or set[path .. "/"] then return true end
    if path:find("[*<]") or path:find("...", 1, true) then
      local pat = glob_pattern(path)
      for _, f in ipairs(files) do
        if f:match(pat) then return true end
      end
    end
    return false
  end
  function R.lines(path)
    return count_lines(root .. path)
  end
  return R
end

local function starts_with_prefix(token)
  for _, p in ipairs(PREFIXES) do
    if token:sub(1, #p) == p then return true end
  end
  return false
end

local function is_generated(path)
  for _, g in ipairs(GENERATED) do
    if path:sub(1, #g) == g or path .. "/" == g then return true end
  end
  return false
end

-- "a/./b/../c" -> "a/c"; nil when the path climbs out of the repository.
local function normalize(path)
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." then
      if #parts == 0 then return nil end
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  return table.concat(parts, "/") .. (path:sub(-1) == "/" and "/" or "")
end

-- Expands "csrc/kernel/pose.{c,h}" into both names.
local function expand_braces(token)
  local pre, alts, post = token:match("^(.-){([^}]*)}(.*)$")
  if not pre then return { token } end
  local out = {}
  for alt in (alts .. ","):gmatch("([^,]*),") do
    for _, t in ipairs(expand_braces(pre .. alt .. post)) do out[#out + 1] = t end
  end
  return out
end

-- Repository paths in a piece of code or an inline code span: tokens that
-- start with a known top-level folder, with an optional :line or
-- :first-last suffix. Calls add(path, first_line, last_line).
local function scan_code(text, add)
  -- tokens are maximal runs of path characters, so a prefix is matched only
  -- at the start of a word ("lua_modules/share/lua/" is not a lua/ path)
  for first, after in text:gmatch("()[%w_%-%./%*<>{},]+()") do
    -- a token such as `a.lua,` or `(see csrc/x.c).` keeps its path only
    local tok = text:sub(first, after - 1):gsub("[,%.]+$", "")
    if starts_with_prefix(tok) then
      local a, b = text:match("^:(%d+)%-(%d+)", after)
      if not a then a = text:match("^:(%d+)", after) end
      for _, path in ipairs(expand_braces(tok)) do
        add(path, tonumber(a), tonumber(b or a))
      end
    end
  end
end

--- Checks one document. `text`: its Markdown; `dir`: its folder relative to
-- the root ("" or "docs/"), which relative link targets start from; `repo`:
-- a repository (exists, lines). Returns a list of problems, one string each.
local function check_document(text, dir, repo)
  local problems, seen = {}, {}
  local function report(msg)
    if not seen[msg] then
      seen[msg] = true
      problems[#problems + 1] = msg
    end
  end
  local function check_path(path, first, last)
    if is_generated(path) then return end
    local norm = normalize(path)
    if not norm or not repo.exists((norm:gsub("/$", ""))) then
      report(("`%s` does not exist"):format(path))
    elseif first then
      local n = repo.lines(norm)
      if first < 1 or last < first or last > n then
        report(("`%s:%d%s` is past the end of the file (%d lines)")
          :format(path, first, last ~= first and "-" .. last or "", n))
      end
    end
  end
  -- fenced code blocks first, then inline spans and links in the rest
  local rest = text:gsub("\n```[^\n]*\n(.-)\n```", function(code)
    scan_code(code, check_path)
    return "\n"
  end)
  rest = rest:gsub("^```[^\n]*\n(.-)\n```", function(code)
    scan_code(code, check_path)
    return ""
  end)
  -- paths in inline code spans and in prose (link targets are left to the
  -- loop after this one, which resolves them from the document's folder)
  local prose = rest:gsub("%]%b()", "]")
  scan_code(prose, check_path)
  -- a bare Markdown file name, in prose or in code ("see STYLE.md"), names a
  -- document of the root, of the document's folder or of docs/
  for name in prose:gmatch("[%w_%-%./]+") do
    name = name:gsub("%.+$", "")
    if name:match("^[%w_%-]+%.md$") and not (repo.exists(name) or repo.exists(dir .. name)
        or repo.exists("docs/" .. name)) then
      report(("`%s` does not exist"):format(name))
    end
  end
  for target in rest:gmatch("%]%(([^)%s]+)%)") do
    if not target:match("^%a[%w+.-]*:") and not target:match("^#") then
      local path = target:gsub("#.*$", "")
      local line = path:match(":(%d+)$")
      path = path:gsub(":%d+$", "")
      check_path(dir .. path, tonumber(line), tonumber(line))
    end
  end
  return problems
end

local function documents()
  local docs = { "README.md", "ARCHITECTURE.md", "CHANGES.md" }
  local ok, out = H.sh(("ls '%sdocs'"):format(H.root))
  assert(ok, out)
  for name in out:gmatch("[^\n]+") do
    if name:match("%.md$") then docs[#docs + 1] = "docs/" .. name end
  end
  return docs
end

describe("paths cited by the documents", function()
  local repo = repository(H.root)

  it("the repository listing sees the tree and leaves build output out", function()
    assert.is_true(repo.exists("csrc/kernel/pose.c"))
    assert.is_true(repo.exists("csrc/kernel"))
    assert.is_true(repo.exists("spec/helper.lua"))
    assert.is_false(repo.exists("csrc/pose.c"))
    assert.is_false(repo.exists("lua_modules"))
    assert.is_false(repo.exists("build/limber/core.so"))
  end)

  it("catches bad paths, bad lines and bad links in a fake document", function()
    local n = repo.lines("spec/helper.lua")
    assert.is_true(n > 10)
    local fake = table.concat({
      "# Fake",
      "The pose pass is in `csrc/kernel/pose.c` and `csrc/pose.c` (moved).",
      "See `spec/helper.lua:3`, `spec/helper.lua:" .. (n + 1) .. "` and `spec/helper.lua:2-"
        .. (n + 5) .. "`.",
      "Run `lua5.4 examples/bench_nothing.lua --json` or `bash scripts/demo.sh`.",
      "Kernel headers `csrc/kernel/*.h`, harnesses `fuzz/fuzz_<name>.c`, none `fuzz/zz_*.c`.",
      "Both `csrc/kernel/pose.{c,h}` and `csrc/kernel/pose.{c,q}`.",
      "A [good link](docs/README.md), a [bad one](docs/notes-harden.md#commands),",
      "a [web link](https://example.org/x.md) and [an anchor](#fake).",
      "In prose, see docs/notes-clip.md for the old notes and lua/limber/anim.lua for the new.",
      "Bare names: ARCHITECTURE.md, `CHANGES.md`, clips.md, NOTES.md and (see STYLE.md).",
      "Not paths: `lmb_pose_local_to_model`, `build/limber/core.so`, `mylua/x.lua`, `docs/api/index.html`.",
      "```lua",
      'local f = gltf.load("examples/assets/Fox/Fox.glb")',
      'local g = gltf.load("examples/assets/Fox/Wolf.glb")',
      "```",
    }, "\n")
    local problems = check_document(fake, "", repo)
    table.sort(problems)
    local expected = {
      "`csrc/kernel/pose.q` does not exist",
      "`csrc/pose.c` does not exist",
      "`NOTES.md` does not exist",
      "`docs/notes-clip.md` does not exist",
      "`STYLE.md` does not exist",
      "`docs/notes-harden.md` does not exist",
      "`examples/assets/Fox/Wolf.glb` does not exist",
      "`examples/bench_nothing.lua` does not exist",
      "`fuzz/zz_*.c` does not exist",
      ("`spec/helper.lua:%d` is past the end of the file (%d lines)"):format(n + 1, n),
      ("`spec/helper.lua:2-%d` is past the end of the file (%d lines)"):format(n + 5, n),
    }
    table.sort(expected)
    assert.same(expected, problems)
  end)

  it("resolves links from the document's folder", function()
    assert.same({}, check_document("[arch](../ARCHITECTURE.md), [spec](../spec/helper.lua)", "docs/", repo))
    assert.same({ "`docs/ARCHITECTURE.md` does not exist" },
      check_document("[arch](ARCHITECTURE.md)", "docs/", repo))
    assert.same({ "`../../etc/passwd` does not exist" },
      check_document("[out](../../etc/passwd)", "", repo))
  end)

  it("README.md, ARCHITECTURE.md, CHANGES.md and docs/*.md cite only existing files", function()
    local docs = documents()
    assert.is_true(#docs >= 5)
    local all = {}
    for _, name in ipairs(docs) do
      local text = H.read(H.root .. name)
      for _, msg in ipairs(check_document(text, name:match("^(.*/)") or "", repo)) do
        all[#all + 1] = name .. ": " .. msg
      end
    end
    assert.same({}, all)
  end)
end)
