-- bench_lua.lua — the fixed cost of tide ops called from Lua.
--
--   build/lua/tide bench/bench_lua.lua
--   LUA_CPATH="build/lua/?.so;;" lua5.4 bench/bench_lua.lua
--
-- Prints `name: value unit` lines: ns per `z = x + y` on 4-element float32 tensors (allocation
-- and collection included) and per `x:size(1)`, each beside references measured in the same
-- run on this machine (a plain C function call from Lua, and the same 4-element add done on Lua
-- tables), the ratios, and the targets of the Lua module's issue (add <= 400 ns, size <= 60 ns).
-- Best of 5 rounds of 1e6 iterations, because timings on a small shared machine are noisy.
local tide = require "tide"
local clock = os.clock
local N, ROUNDS = 1000000, 5

local function best(f)
  local b = math.huge
  for _ = 1, ROUNDS do
    collectgarbage()
    local t0 = clock()
    f()
    b = math.min(b, (clock() - t0) / N * 1e9)
  end
  return b
end

local x, y = tide.ones(4), tide.ones(4)

local add = best(function()
  for _ = 1, N do
    local z = x + y
  end
end)

local size = best(function()
  local s = 0
  for _ = 1, N do
    s = s + x:size(1)
  end
end)

local abs = math.abs
local cfunc = best(function()
  local s = 0
  for _ = 1, N do
    s = s + abs(-1)
  end
end)

local a, b = { 1.0, 1.0, 1.0, 1.0 }, { 1.0, 1.0, 1.0, 1.0 }
local table_add = best(function()
  for _ = 1, N do
    local z = { a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4] }
  end
end)

local function line(name, value, unit)
  print(("%s: %.1f %s"):format(name, value, unit))
end
local function target(name, value, limit)
  print(("%s: %.2f ns (%s)"):format(name, limit, value <= limit and "met" or "NOT met"))
end

print(("# tide from Lua (%s), best of %d rounds of %d iterations"):format(_VERSION, ROUNDS, N))
line("lua_cfunc_call", cfunc, "ns")
line("lua_table4_add", table_add, "ns")
line("lua_add4_f32", add, "ns")
line("lua_add4_f32_vs_cfunc_call", add / cfunc, "ratio")
line("lua_add4_f32_vs_table4_add", add / table_add, "ratio")
target("lua_add4_f32_target", add, 400)
line("lua_size1", size, "ns")
line("lua_size1_vs_cfunc_call", size / cfunc, "ratio")
target("lua_size1_target", size, 60)
