std = "lua54"
max_line_length = 120
exclude_files = { "lua_modules/", "build/", "build.luarocks/", "build-*/" }
files["spec/"] = { std = "+busted" }
