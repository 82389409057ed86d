-- test_onnx.lua — ONNX models from Lua (docs/onnx.md): tide.onnx.load on models of the ONNX
-- backend test data (libonnx-testdata), called positionally and by name, traced by tide.jit,
-- differentiated, run on Vulkan, and the errors of wrong calls. The op handlers' values are
-- checked over the whole suite by tests/onnx_conformance; here the Lua surface is.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local D = "/usr/include/onnx/backend/test/data/"
local function case(folder, name)
  local dir = D .. folder .. "/" .. name .. "/"
  local set = dir .. "test_data_set_0/"
  return tide.onnx.load(dir .. "model.onnx"), function(kind, k)
    return tide.onnx.load_tensor(("%s%s_%d.pb"):format(set, kind, k))
  end
end

-- The test data's values are float32 results of the reference runtime: rtol 1e-3 as the ONNX
-- backend runner, and exact where the op is (Add of two float32 rounds once, as tide's).
H.test("a model from the test data: names, shapes, positional and named calls", function()
  local m, data = case("node", "test_add")
  H.eq(m.input_names, { "x", "y" })
  H.eq(m.output_names, { "sum" })
  H.eq(m.inputs[1], { name = "x", dtype = "float32", shape = { 3, 4, 5 } })
  local x, y, want = data("input", 0), data("input", 1), data("output", 0)
  H.eq(x:size(), { 3, 4, 5 })
  H.eq((m(x, y) - want):abs():max():item(), 0)
  local r = m { x = x, y = y }
  H.eq((r.sum - want):abs():max():item(), 0)
  H.ok(tostring(m):find("2 inputs", 1, true), "tostring")
end)

H.test("tide.jit traces a model (a conv net of the PyTorch-converted tests)", function()
  local m, data = case("node", "test_gemm_default_single_elem_vector_bias")
  local f = tide.jit(function(a, b, c) return m(a, b, c) end)
  local a, b, c, want = data("input", 0), data("input", 1), data("input", 2), data("output", 0)
  for _ = 1, 3 do
    local got = f(a, b, c)
    H.ok(((got - want):abs() - want:abs() * 1e-3):max():item() <= 1e-7, "jit matches the data")
    H.eq((got - m(a, b, c)):abs():max():item(), 0, "jit equals eager")
  end
  H.eq(f:stats().compiles, 1, "one compile, then replays")
end)

H.test("gradients flow through a model's ops", function()
  local m = case("node", "test_add")
  local x = tide.randn(3, 4, 5):requires_grad_()
  local y = tide.randn(3, 4, 5)
  m(x, y):pow(2):sum():backward()
  H.ok(((x.grad - (x + y) * 2):abs()):max():item() <= 1e-6, "d/dx sum((x+y)^2) = 2(x+y)")
end)

H.test("on Vulkan the model's initializers and results live there", function()
  if not tide.vulkan.available() then
    print("  skipped: no Vulkan")
    return
  end
  local dir = D .. "node/test_gemm_default_single_elem_vector_bias/"
  local m = tide.onnx.load(dir .. "model.onnx", { device = "vulkan" })
  local ins = {}
  for k = 0, 2 do ins[k + 1] = tide.onnx.load_tensor(("%stest_data_set_0/input_%d.pb"):format(dir, k)) end
  local want = tide.onnx.load_tensor(dir .. "test_data_set_0/output_0.pb")
  local got = m(ins[1]:to("vulkan"), ins[2]:to("vulkan"), ins[3]:to("vulkan"))
  H.eq(got.device, "vulkan")
  H.ok(((got:to("cpu") - want):abs() - want:abs() * 1e-3):max():item() <= 1e-7, "vulkan values")
end)

H.test("errors name the model, the input and the mistake", function()
  local m, data = case("node", "test_add")
  local x = data("input", 0)
  H.raises(function() return m(x) end, "takes 2 inputs, got 1")
  H.raises(function() return m(x, 3) end, "input 2 ('y') must be a tensor")
  H.raises(function() return m { x = x } end, "'y'")
  H.raises(function() return m { x = x, y = x, z = x } end, "no input named 'z'")
  H.raises(function() return m(x, tide.zeros(2, 2)) end, "'y' has shape [2, 2]")
  H.raises(function() return m(x, x:double()) end, "'y' is float64")
  H.raises(function() return tide.onnx.load(D .. "nonexistent/model.onnx") end, "cannot open")
  H.raises(function() return tide.onnx.load(D .. "node/test_add/model.onnx", { dev = "cpu" }) end,
    "unknown option 'dev'")
  H.raises(function() return tide.onnx.load_tensor(D .. "node/test_add/model.onnx") end,
    "onnx_load_tensor")
  m:close()
  H.raises(function() return m(x, x) end, "closed")
end)

H.done()
