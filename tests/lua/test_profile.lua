-- test_profile.lua — tide.profile (docs/profile.md): its rows name the Lua line of each eager op
-- and of each op a tide.jit function traced; FLOP counts of a matmul; the summary's fields; a
-- trace file; the errors for a non-function, bad options and a nested profile.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local file = arg[0]:match("([^/]+)$")

-- The row whose name is name (a prefix when prefix), else nil.
local function row(report, name, prefix)
  for _, r in ipairs(report) do
    if (prefix and r.name:sub(1, #name) == name) or r.name == name then return r end
  end
end

local function line_of(r) return tonumber(r.where:match(":(%d+)$")) end

H.test("eager rows name the op's line and count its FLOPs", function()
  local a, b = tide.randn(16, 32), tide.randn(32, 8)
  local here
  local report = tide.profile(function()
    here = debug.getinfo(1, "l").currentline + 1
    local c = a:matmul(b)
    local d = (c + 1):relu()
  end)
  local m = row(report, "matmul")
  assert(m, "a matmul row")
  H.eq(m.where:match("([^/]+):%d+$"), file)
  H.eq(line_of(m), here)
  H.eq(m.flops, 2 * 16 * 8 * 32)
  H.eq(m.calls, 1)
  H.eq(line_of(row(report, "relu")), here + 1)
  assert(report.wall_ms > 0 and report.kernel_ms > 0 and report.kernel_ms <= report.wall_ms)
  assert(report.stream_gbps > 0 and report.sgemm_gflops > 0, "the roofline's references")
  assert(type(report.cpu) == "string" and #report.cpu > 0)
  assert(report[1].ms >= report[#report].ms, "sorted by time")
end)

H.test("a jitted function's groups name the line that traced them", function()
  local x = tide.randn(1000)
  local line = debug.getinfo(1, "l").currentline + 1
  local f = tide.jit(function(x) return (x * 2 + 1):exp() end)
  f(x) -- compiled before the profile: the rows still name the line of this call's trace
  local report, y = tide.profile(function() return f(x) end)
  local g = row(report, "fused(", true)
  assert(g, "a fused group row")
  H.eq(line_of(g), line)
  H.eq(g.flops, 3 * 1000)
  H.eq(g.calls, 1)
  assert(tide.is_tensor(y), "tide.profile returns fn's results after the report")
end)

H.test("trace and print options", function()
  local path = os.tmpname()
  local report = tide.profile(function() return tide.ones(4) + 1 end, { trace = path, print = false })
  local f = assert(io.open(path))
  local text = f:read("a")
  f:close()
  os.remove(path)
  assert(text:find('"traceEvents"', 1, true) and text:find('"ph":"X"', 1, true), text)
  H.eq(select(2, text:gsub('"ph":"X"', "")), report.events)
end)

H.test("errors", function()
  H.raises(function() tide.profile(42) end, "function expected")
  H.raises(function() tide.profile(function() end, { trace = 1 }) end, "option 'trace' must be a path")
  H.raises(function() tide.profile(function() end, { prnt = true }) end, "unknown option 'prnt'")
  H.raises(function() tide.profile(function() end, 5) end, "options must be a table")
  H.raises(function() tide.profile(function() tide.profile(function() end) end) end,
    "already running")
  -- a profile that raised has ended: the next one starts
  H.raises(function() tide.profile(function() error("boom") end) end, "boom")
  local report = tide.profile(function() end)
  H.eq(#report, 0)
end)

H.done()
