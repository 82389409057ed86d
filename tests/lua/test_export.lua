-- test_export.lua — compiled graphs as files (docs/export.md): tide.export writes a traced
-- function with the weights it reads, tide.load_graph runs it with no Lua function behind it.
-- The loaded graph replays the very nodes the capture recorded, so on the CPU its outputs are
-- bitwise those of the function (eager and tide.jit are bitwise equal on the CPU:
-- jit/README.md), at the captured sizes and, with dynamic dims, at others.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = tide.nn
local F = nn.functional

tide.manual_seed(7)

local function tmp() return os.tmpname() end

local function same_bits(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.eq(a.dtype, b.dtype, what .. " dtype")
  local diff = a:ne(b):sum():item()
  H.eq(diff, 0, what .. ": elements that differ")
end

local mlp = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 10))
local function mlp_forward(x) return mlp(x):log_softmax(2) end

H.test("an exported MLP gives the function's bits on new inputs", function()
  local path = tmp()
  tide.export(mlp_forward, { tide.randn(8, 20) }, path)
  local g = tide.load_graph(path)
  H.eq(g.input_names, { "input0" })
  H.eq(g.output_names, { "output0" })
  H.eq(g.inputs[1], { name = "input0", dtype = "float32", shape = { 8, 20 } })
  H.eq(g.outputs[1], { name = "output0", dtype = "float32", shape = { 8, 10 } })
  for _ = 1, 3 do
    local x = tide.randn(8, 20)
    local want
    tide.no_grad(function() want = mlp_forward(x) end)
    same_bits(g(x), want, "eager")
    local jitted = tide.jit(mlp_forward)
    tide.no_grad(function() want = jitted(x) end)
    same_bits(g(x), want, "tide.jit")
  end
  os.remove(path)
end)

H.test("names and dynamic dims round-trip; other batch sizes run one plan", function()
  local path = tmp()
  tide.export(mlp_forward, { tide.randn(4, 20) }, path,
              { dynamic = { [1] = { 1 } }, input_names = { "pixels" }, output_names = { "logp" } })
  local g = tide.load_graph(path)
  H.eq(g.input_names, { "pixels" })
  H.eq(g.inputs[1].shape, { -1, 20 })
  for _, n in ipairs({ 2, 3, 17, 64 }) do
    local x = tide.randn(n, 20)
    local want
    tide.no_grad(function() want = mlp_forward(x) end)
    same_bits(g(x), want, "batch " .. n)
    local r = g { pixels = x }
    same_bits(r.logp, want, "batch " .. n .. " by name")
  end
  H.raises(function() g(tide.randn(4, 21)) end, "input 0", "dim 1")
  os.remove(path)
end)

H.test("a CNN with two inputs and two outputs", function()
  local conv = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 4 * 4, 5))
  local function f(x, scale) return conv(x) * scale, conv(x):argmax(2) end
  local path = tmp()
  tide.export(f, { tide.randn(3, 1, 8, 8), tide.tensor(2.5) }, path)
  local g = tide.load_graph(path)
  local x, s = tide.randn(3, 1, 8, 8), tide.tensor(-1.5)
  local a, b = g(x, s)
  local wa, wb
  tide.no_grad(function() wa, wb = f(x, s) end)
  same_bits(a, wa, "scaled logits")
  same_bits(b, wb, "argmax")
  os.remove(path)
end)

H.test("embedding, layer norm, GELU, softmax: what a sequence model traces to", function()
  local emb, norm, lin = nn.Embedding(50, 16), nn.LayerNorm(16), nn.Linear(16, 16)
  local function f(ids) return F.softmax(lin(F.gelu(norm(emb(ids)))), -1):mean(2) end
  local path = tmp()
  -- static: the embedding's reshape of [B*T] back to [B, T] cannot follow a dynamic B
  tide.export(f, { tide.tensor({ { 1, 5, 9 }, { 2, 4, 49 } }):long() }, path)
  local g = tide.load_graph(path)
  for k = 1, 3 do
    local ids = (tide.rand(2, 3) * 49):floor():long() + 1
    local want
    tide.no_grad(function() want = f(ids) end)
    same_bits(g(ids), want, "ids, run " .. k)
  end
  os.remove(path)
end)

H.test("a small GPT's forward: attention, layer norms, GELU, the tied head", function()
  local gpt = require "tide.models.gpt"
  local lm = gpt.GPT { vocab_size = 32, block_size = 16, n_layer = 2, n_head = 2, n_embd = 16 }
  lm:eval()
  local path = tmp()
  tide.export(function(i) return lm(i) end, { tide.ones(2, 8):long() }, path)
  local g = tide.load_graph(path)
  for k = 1, 2 do
    local ids = (tide.rand(2, 8) * 31):floor():long() + 1
    local want
    tide.no_grad(function() want = lm(ids) end)
    same_bits(g(ids), want, "gpt logits, run " .. k)
  end
  os.remove(path)
end)

H.test("weights are read from the file, not from the model that wrote it", function()
  local lin = nn.Linear(6, 3)
  local path = tmp()
  tide.export(function(x) return lin(x) end, { tide.randn(2, 6) }, path)
  local x = tide.randn(2, 6)
  local want
  tide.no_grad(function() want = lin(x) end)
  tide.no_grad(function() lin.weight:fill_(0) end)
  same_bits(tide.load_graph(path)(x), want, "after the model's weights changed")
  os.remove(path)
end)

H.test("on Vulkan the loaded graph runs there", function()
  if not tide.vulkan.available() then
    print("  skipped: no Vulkan")
    return
  end
  local path = tmp()
  tide.export(mlp_forward, { tide.randn(8, 20) }, path)
  local g = tide.load_graph(path, { device = "vulkan" })
  local x = tide.randn(8, 20)
  local got = g(x:to("vulkan"))
  H.eq(got.device, "vulkan")
  local want
  tide.no_grad(function() want = mlp_forward(x) end)
  -- matmul sums of 32 terms in another order, then log_softmax: 2(n+3)u per sum (jit/README.md)
  H.ok((got:to("cpu") - want):abs():max():item() <= 1e-4, "vulkan values")
  os.remove(path)
end)

local function bytes_of(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

H.test("damaged, truncated, newer and foreign files are errors naming the fault", function()
  local path = tmp()
  tide.export(mlp_forward, { tide.randn(8, 20) }, path)
  local good = bytes_of(path)
  local bad = tmp()
  write(bad, good:sub(1, #good - 100))
  H.raises(function() tide.load_graph(bad) end, "load_graph", bad, "truncated")
  write(bad, good:sub(1, #good - 10) .. string.char((good:byte(#good - 9) + 1) % 256) ..
             good:sub(#good - 8))
  H.raises(function() tide.load_graph(bad) end, "blob", "checksum")
  write(bad, good:sub(1, 100) .. string.char((good:byte(101) + 1) % 256) .. good:sub(102))
  H.raises(function() tide.load_graph(bad) end, "meta section is damaged")
  write(bad, good:sub(1, 8) .. string.char(9) .. good:sub(10))
  H.raises(function() tide.load_graph(bad) end, "format version 9 is newer")
  write(bad, "not a graph at all, just some text that is long enough for a header........")
  H.raises(function() tide.load_graph(bad) end, "not a tide graph file")
  H.raises(function() tide.load_graph(path .. ".missing") end, "cannot open")
  os.remove(bad)
  os.remove(path)
end)

H.test("wrong calls are errors", function()
  local path = tmp()
  H.raises(function() tide.export(42, {}, path) end, "function expected")
  H.raises(function() tide.export(mlp_forward, { 3 }, path) end, "argument 1 must be a tensor")
  H.raises(function() tide.export(mlp_forward, { tide.randn(4, 20) }, path, { dynamic = { [1] = { 3 } } }) end,
           "dynamic dim 3 of argument 1")
  H.raises(function() tide.export(mlp_forward, { tide.randn(4, 20) }, path, { dinamic = {} }) end,
           "dinamic")
  H.raises(function() tide.export(function(x) return x:sum():item() end, { tide.randn(4) }, path) end,
           "graph break")
  H.raises(function() tide.export(function(x) return 3 end, { tide.randn(4) }, path) end,
           "returned number as result 1")
  H.raises(function() tide.export(function(x) error("inside") end, { tide.randn(4) }, path) end,
           "inside")
  H.raises(function() tide.export(mlp_forward, { tide.randn(8, 20) }, path, { output_names = { 1 } }) end,
           "output_names must be a list of 1 names")
  H.raises(function() tide.export(mlp_forward, { tide.randn(8, 20) }, path, { metadata = { a = {} } }) end,
           "metadata keys and values must be strings or numbers, got string = table")
  H.raises(function() tide.export(function(x) return x + tide.rand(4) end, { tide.randn(4) }, path) end,
           "save_graph", "random, which graph files do not hold yet")
  -- after all of these, captures still work on this thread
  tide.export(mlp_forward, { tide.randn(8, 20) }, path)
  local g = tide.load_graph(path)
  H.raises(function() g(tide.randn(8, 20), tide.randn(1)) end, "takes 1 inputs, got 2")
  H.raises(function() g(tide.randn(8, 21)) end, "input 0 has shape [8, 21]")
  H.raises(function() tide.load_graph(path, { device = "nowhere" }) end, "nowhere")
  g:close()
  H.raises(function() g(tide.randn(8, 20)) end, "closed")
  os.remove(path)
end)

H.done()
