-- test_fuzz.lua — calls every tide function and tensor method with arguments picked from a
-- list of awkward values (nil, strings, tables, NaN, huge integers, tensors of odd shapes and
-- dtypes) and checks that each call either works or raises a Lua error with a message: the
-- process never crashes (run it in the sanitizer build to see memory errors too).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local seed = 7
local function rand(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end

local function values()
  return {
    nil, true, false, "s", "float64", "cpu", {}, { 1, 2 }, { { 1 } }, { -1 }, { 2, 3 },
    0, 1, 2, 3, -1, -2, 100, 1.5, -0.5, 0 / 0, math.huge, -math.huge,
    math.maxinteger, math.mininteger, 1 << 62, 1 << 40,
    tide.tensor({ { 1.5, -2, 3 }, { 4, 5, 6 } }),
    tide.tensor({ 1, 2, 3 }),
    tide.tensor({ 2, 1 }, { dtype = "int32" }),
    tide.tensor({ true, false, true }),
    tide.tensor(2.5),
    tide.zeros(0, 3),
    tide.ones(1, 2, 4, 4),
    tide.arange(6):view(2, 3):t(),
    tide.ones(3):expand(2, 3),
    function() return 1 end,
    setmetatable({}, { __index = function() error("no") end }),
    io.stdout,
  }
end

-- Things that would only waste time or change the process: skipped (the group functions join
-- an MPI world or end the process; tests/test_distributed.sh calls them).
local skip = { collect = true, empty_cache = true, set_num_threads = true, _dist_init = true,
               _dist_abort = true, _dist_barrier = true, _dist_set_timeout = true }

local function names(t)
  local list = {}
  for k, v in pairs(t) do
    if type(v) == "function" and not skip[k] then
      list[#list + 1] = k
    end
  end
  table.sort(list)
  return list
end

H.test("random calls of every function raise errors, never crash", function()
  local vals = values()
  local nvals = 39 -- the length of the list above, holes included
  local funcs = names(tide)
  local methods = names(tide.Tensor)
  local calls, errors = 0, 0
  for _ = 1, 100000 do
    local args, nargs = {}, rand(5) - 1
    for a = 1, nargs do
      args[a] = vals[rand(nvals)]
    end
    local ok, err
    if rand(2) == 1 then
      local f = tide[funcs[rand(#funcs)]]
      ok, err = pcall(f, table.unpack(args, 1, nargs))
    else
      local self = vals[27 + rand(9)]
      local m = methods[rand(#methods)]
      ok, err = pcall(function() return self[m](self, table.unpack(args, 1, nargs)) end)
    end
    calls = calls + 1
    if not ok then
      errors = errors + 1
      if type(err) ~= "string" or #err == 0 then
        error("an error without a message: " .. tostring(err))
      end
    end
  end
  pcall(tide.set_grad_enabled, true)
  H.ok(calls == 100000 and errors > 0 and errors < calls, ("%d errors"):format(errors))
end)

H.test("operators and indexing with awkward operands", function()
  local vals = values()
  local x = tide.tensor({ { 1.0, 2.0 }, { 3.0, 4.0 } })
  local ops = {
    function(a, b) return a + b end, function(a, b) return a - b end,
    function(a, b) return a * b end, function(a, b) return a / b end,
    function(a, b) return a ^ b end, function(a) return -a end, function(a) return #a end,
    function(a, b) return a[b] end, function(a, b) a[b] = 1 end, function(a, b) a[b] = b end,
    function(a, b) return a[{ b }] end, function(a, b) return a[{ b, b }] end,
    function(a, b) return a[{ { b, b } }] end, function(a, b) a[{ { 1, b } }] = 0 end,
    function(a) return tostring(a) end, function(a, b) return a[b] end,
  }
  for i = 1, 39 do
    for _, op in ipairs(ops) do
      pcall(op, x, vals[i])
      pcall(op, vals[i], x)
    end
  end
  H.eq(x:size(), { 2, 2 })
end)

H.done()
