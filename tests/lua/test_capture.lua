-- test_capture.lua — tide.capture (docs/export.md): a function captured once into a compiled
-- graph in memory, replayed on new arguments without running the Lua function again. The
-- replay runs the very nodes the capture recorded, so on the CPU its outputs are bitwise the
-- function's (eager and tide.jit are bitwise equal on the CPU: jit/README.md). What the
-- function reads besides its arguments is read by reference at every call, and its in-place
-- writes (into those tensors or into its arguments, views included) happen at every call.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = tide.nn

tide.manual_seed(11)

local function same_bits(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.ok(tide.equal(a, b), what .. ": bitwise equal")
end

H.test("a captured MLP gives the function's bits on new inputs, and the capture's own results",
       function()
  local mlp = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
  local function f(x) return mlp(x):log_softmax(2), x:sum() end
  local x0 = tide.randn(8, 20)
  local g, y0, s0 = tide.capture(f, { x0 })
  local want0, ws0 = tide.no_grad(function() return f(x0) end)
  same_bits(y0, want0, "the capture's run")
  same_bits(s0, ws0, "the capture's second result")
  H.eq(g.input_names, { "input0" })
  H.eq(#g.output_names, 2)
  for _ = 1, 3 do
    local x = tide.randn(8, 20)
    local y, s = g(x)
    local want, ws = tide.no_grad(function() return f(x) end)
    same_bits(y, want, "replay")
    same_bits(s, ws, "replay's second result")
  end
end)

H.test("tensors read by reference; writes into them and into argument views happen each call",
       function()
  local cache = tide.zeros(1, 2, 8, 4)
  local w = tide.full({ 4 }, 2)
  -- writes x * w into a slot of the cache, then sums the used part (which holds the slot)
  local function step(x, slot, used)
    slot:copy_(x * w)
    return used:sum(3)
  end
  local x = tide.ones(1, 2, 1, 4)
  local g, y = tide.capture(step, { x, cache:narrow(3, 3, 1), cache:narrow(3, 1, 3) },
                            { dynamic = { [3] = { 3 } } })
  H.eq(cache:sum():item(), 16, "the capture's run wrote slot 3")
  H.eq(y:sum():item(), 16)
  y = g(x * 2, cache:narrow(3, 4, 1), cache:narrow(3, 1, 4))
  H.eq(cache:sum():item(), 48, "a replay wrote slot 4 through its argument")
  H.eq(y:sum():item(), 48, "and read it in the same run (the used part is 4 long)")
  w:fill_(3) -- an outside tensor changed in place: the next replay reads its new values
  y = g(x, cache:narrow(3, 5, 1), cache:narrow(3, 1, 5))
  H.eq(cache:sum():item(), 72)
  H.eq(y:sum():item(), 72)
  H.eq(cache:narrow(3, 6, 3):sum():item(), 0, "nothing written past the slot")
end)

H.test("attention over a dynamic number of keys follows the sizes", function()
  local F = nn.functional
  local q = tide.randn(1, 3, 1, 8)
  local kc, vc = tide.randn(1, 3, 16, 8), tide.randn(1, 3, 16, 8)
  local function f(qq, k, v) return F.scaled_dot_product_attention(qq, k, v) end
  local g = tide.capture(f, { q, kc:narrow(3, 1, 4), vc:narrow(3, 1, 4) },
                         { dynamic = { [2] = { 3 }, [3] = { 3 } } })
  for _, S in ipairs({ 2, 5, 15 }) do
    local k, v = kc:narrow(3, 1, S), vc:narrow(3, 1, S)
    same_bits(g(q, k, v), tide.no_grad(function() return f(q, k, v) end), S .. " keys")
  end
  -- all 16 keys: the views became contiguous, a layout the plan was not made for
  H.raises(function() g(q, kc, vc) end, "contiguous or not")
end)

H.test("a Llama decoding step replayed per token gives the traced step's tokens", function()
  local llama = require "tide.models.llama"
  local cfg = { dim = 64, hidden_dim = 96, n_layers = 2, n_heads = 4, n_kv_heads = 2,
                vocab_size = 40, seq_len = 24 }
  local m = llama.Llama(cfg)
  local eager = m:generate({ 2, 7 }, 12, { temperature = 0, jit = false })
  local replayed = m:generate({ 2, 7 }, 12, { temperature = 0 })
  H.ok(tide.equal(eager, replayed), "greedy tokens as eager")
  local st = m:decode_jit_stats()
  H.eq(st.captures, 1, "one capture for the generation")
  H.eq(st.fallbacks, 0, "no traced step")
  H.ok(st.hits >= 9, ("%d replays"):format(st.hits))
  -- up to the last position, where the used part of the cache is all of it (contiguous: the
  -- graph refuses that layout, and that one step is traced)
  local jc, ec = m:new_cache(1), m:new_cache(1)
  for t = 1, cfg.seq_len do
    local tok = tide.tensor({ { 1 + (t * 7) % cfg.vocab_size } }, { dtype = "int64" })
    local got, want = m:decode_step_jit(tok, jc), m:decode_step(tok, ec)
    if t > 2 then same_bits(got, want, "position " .. t) end
  end
  H.eq(m:decode_jit_stats().fallbacks, 1, "the last position traced")
end)

H.test("wrong calls are errors", function()
  H.raises(function() tide.capture(1, {}) end, "function")
  H.raises(function() tide.capture(function(x) return x end, { 1 }) end,
           "argument 1 must be a tensor")
  H.raises(function() tide.capture(function(x) return x end, { tide.ones(2) }, { foo = 1 }) end,
           "foo")
  H.raises(function() tide.capture(function(x) return x end, { tide.ones(2) },
                                   { dynamic = { [1] = { 3 } } }) end, "it has 1 dims")
  H.raises(function() tide.capture(function(x) return x:sum(), 7 end, { tide.ones(2) }) end,
           "returned number as result 2")
  H.raises(function() tide.capture(function(x) return x + x:sum():item() end,
                                   { tide.ones(2) }) end, "graph break")
  local g = tide.capture(function(x) return x * 2 end, { tide.ones(2, 3) })
  H.raises(function() g(tide.ones(3, 3)) end, "shape [3, 3]")
  H.raises(function() g(tide.ones(2, 3, { dtype = "float64" })) end, "float64")
  H.raises(function() g() end, "input")
  -- still usable after the errors
  H.ok(tide.equal(g(tide.ones(2, 3)), tide.full({ 2, 3 }, 2)))
end)

H.done()
