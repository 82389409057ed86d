-- test_gc.lua — tensor memory follows Lua's collector: freed when a tensor is collected or
-- closed, a loop of large temporaries stays flat (the collector is told the real sizes),
-- tide.collect() hands cached blocks back, and Lua errors raised by tide leak nothing.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local MB = 1 << 20

local function in_use()
  return tide.memory_stats().in_use
end

-- Resident set size in bytes, or nil where /proc is missing.
local function rss()
  local f = io.open("/proc/self/statm")
  if not f then
    return nil
  end
  local _, resident = f:read("n", "n")
  f:close()
  return resident and resident * 4096
end

H.test("a collected tensor gives its memory back", function()
  tide.collect()
  local base = in_use()
  local t = tide.ones(MB) -- 4 MB
  H.ok(in_use() >= base + 4 * MB, "in use grew")
  t = nil
  collectgarbage()
  collectgarbage()
  H.eq(in_use(), base)
end)

H.test("a to-be-closed tensor is freed at the end of its scope", function()
  tide.collect()
  local base = in_use()
  do
    local t <close> = tide.zeros(MB)
    H.ok(in_use() >= base + 4 * MB)
  end
  H.eq(in_use(), base, "freed without a collection")
end)

H.test("views keep their storage alive", function()
  local v
  do
    local t = tide.arange(10)
    v = t[{ { 3, 5 } }]
  end
  collectgarbage()
  collectgarbage()
  H.eq(v:totable(), { 2, 3, 4 })
end)

local function large_loop()
  tide.collect()
  local base, rss0 = in_use(), rss()
  local x = tide.ones(2 * MB) -- 8 MB
  local peak = 0
  for _ = 1, 150 do -- 150 * 2 temporaries of 8 MB: 2.4 GB if nothing were freed
    local y = x * 2 + 1
    local m = in_use()
    peak = m > peak and m or peak
    y = nil
  end
  H.ok(peak - base < 200 * MB, ("tensor memory peaked at %.0f MB"):format((peak - base) / MB))
  local rss1 = rss()
  if rss0 and rss1 then
    H.ok(rss1 - rss0 < 400 * MB, ("RSS grew by %.0f MB"):format((rss1 - rss0) / MB))
  end
end

H.test("a loop of large temporaries stays flat", large_loop)

H.test("... also with the incremental collector", function()
  collectgarbage("incremental")
  local ok, err = pcall(large_loop)
  collectgarbage("generational")
  assert(ok, err)
end)

H.test("a loop of small temporaries stays flat", function()
  tide.collect()
  local base = in_use()
  local a, b = tide.ones(4), tide.ones(4)
  local peak = 0
  for k = 1, 200000 do
    local z = a + b
    if k % 1000 == 0 then
      local m = in_use()
      peak = m > peak and m or peak
    end
  end
  H.ok(peak - base < 64 * MB, ("tensor memory peaked at %.0f MB"):format((peak - base) / MB))
end)

H.test("tide.collect returns the cached blocks", function()
  do
    local t = tide.ones(4 * MB)
    t = nil
  end
  local stats = tide.collect()
  H.eq(stats.cached, 0)
  H.eq(tide.memory_stats().cached, 0)
  H.ok(math.type(stats.in_use) == "integer")
end)

H.test("errors raised by tide leak no tensor", function()
  tide.collect()
  local base = in_use()
  local x = tide.ones(1000)
  local bad = {
    function() return x + tide.ones(7) end,
    function() return x:sum(5) end,
    function() return x[{ { 1, 2000 } }] end,
    function() x[2000] = 1 end,
    function() return x:view(3, 7) end,
    function() return tide.tensor({ 1, { 2 } }) end,
    function() return tide.cat({ x, tide.ones(2, 2) }) end,
    function() return tide.where(x:gt(0), x, tide.ones(3)) end,
    function() return x:add_(tide.ones(2, 1000)) end,
    function() return tide.ones(3):long():add_(0.5) end,
    function() return x:clamp(tide.ones(2)) end,
    function() return tide.allclose(x, tide.ones(3)) end,
    function() return x:gather(1, tide.tensor({ 0 })) end,
    function() return x:index_select(1, tide.tensor({ 5000 })) end,
    function() return tostring(tide.ones(2000):view(2, 1000)) .. nil end,
    function() return tide.stack({ x, x, tide.ones(1) }) end,
  }
  for _ = 1, 50 do
    for _, f in ipairs(bad) do
      H.eq(pcall(f), false)
    end
  end
  x = nil
  collectgarbage()
  collectgarbage()
  H.eq(in_use(), base, "every temporary was released")
end)

H.done()
