std = "min"
-- 100 columns, as STYLE.md says for C (clang-format ColumnLimit 100) and Lua
max_line_length = 100
exclude_files = { "lua_modules/", "build/", "build.luarocks/", "build-*/" }
-- specs may use 120 columns: their data tables and expected messages are long
files["spec/"] = { std = "+busted", max_line_length = 120 }
-- the LÖVE example runs on LÖVE's LuaJIT, with its `love` table
files["examples/love/"] = { std = "luajit+love" }
