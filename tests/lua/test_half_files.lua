-- test_half_files.lua — float16 and bfloat16 through tide.load / tide.save / tide.load_npy /
-- tide.save_npy. The fixtures in data/ were written by scripts/make_half_fixtures.py with
-- Debian's python3-torch 1.13: half tensors with edge values and their float32 values as torch
-- computes them (tensor.float()). tests/test_half_files.c compares every bit; here the Lua API
-- is checked: dtypes, shapes, values (widening is exact, so == with NaN matching NaN), and that
-- tide.save writes PyTorch's file again byte for byte.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

local DATA = (arg[0]:match("(.*/)") or "./") .. "data/"
local FIXTURE = DATA .. "pytorch_half.safetensors"

local function read_bytes(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function flat(t, out)
  out = out or {}
  for _, v in ipairs(t) do
    if type(v) == "table" then flat(v, out) else out[#out + 1] = v end
  end
  return out
end

-- Equal element by element, a NaN matching a NaN (widening to float32 is exact).
local function same_values(got, want, what)
  local g, w = flat(got:float():totable()), flat(want:totable())
  H.eq(#g, #w, what .. ": element count")
  for i = 1, #w do
    if not (g[i] == w[i] or (g[i] ~= g[i] and w[i] ~= w[i])) then
      error(("%s[%d]: got %.9g, want %.9g"):format(what, i, g[i], w[i]), 2)
    end
  end
end

H.test("tide.load reads F16 and BF16 as float16 and bfloat16 with torch's values", function()
  local sd, meta = tide.load(FIXTURE)
  H.eq(meta.format, "pt")
  H.eq(sd.src_f16.dtype, "float16")
  H.eq(sd.src_bf16.dtype, "bfloat16")
  H.eq(sd.bits_bf16:size(), { 64, 64 })
  same_values(sd.src_f16, sd.src_f16_f32, "src_f16")
  same_values(sd.bits_f16, sd.bits_f16_f32, "bits_f16")
  same_values(sd.src_bf16, sd.src_bf16_f32, "src_bf16")
  same_values(sd.bits_bf16, sd.bits_bf16_f32, "bits_bf16")
end)

H.test("tide.save writes the fixture again byte for byte", function()
  local sd, meta = tide.load(FIXTURE)
  local path = os.tmpname()
  tide.save(path, sd, meta)
  local same = read_bytes(path) == read_bytes(FIXTURE)
  os.remove(path)
  H.ok(same, "the saved file equals pytorch_half.safetensors")
end)

H.test("load_npy reads numpy's <f2; save_npy writes float16 and refuses bfloat16", function()
  local sd = tide.load(FIXTURE)
  local x = tide.load_npy(DATA .. "pytorch_half_f16.npy")
  H.eq(x.dtype, "float16")
  H.eq(x:size(), { 64, 64 })
  same_values(x, sd.bits_f16_f32, "npy")
  local path = os.tmpname()
  tide.save_npy(path, x:t())
  local back = tide.load_npy(path)
  same_values(back, sd.bits_f16_f32:t(), "npy of a transposed view")
  H.raises(function() tide.save_npy(path, sd.bits_bf16) end, "save_npy", "bfloat16",
           "safetensors")
  os.remove(path)
end)

H.test("a half tensor saved and loaded keeps dtype and bits", function()
  local x = tide.tensor({ 1 / 3, -65504, 6e-8, 1e-40, math.huge }, { dtype = "float32" })
  for _, dt in ipairs({ "float16", "bfloat16" }) do
    local path = os.tmpname()
    tide.save(path, { x = x:to(dt) })
    local got = tide.load(path).x
    os.remove(path)
    H.eq(got.dtype, dt)
    same_values(got, x:to(dt):float(), dt)
  end
end)

H.test("a bfloat16 checkpoint loads into a float32 model, converted as PyTorch does", function()
  local nn = require "tide.nn"
  local m, m2 = nn.Linear(3, 2), nn.Linear(3, 2)
  local half = {}
  for k, v in pairs(m:state_dict()) do half[k] = v:to("bfloat16") end
  local path = os.tmpname()
  tide.save(path, half)
  m2:load_state_dict(tide.load(path))
  os.remove(path)
  H.eq(m2.weight.dtype, "float32")
  same_values(m2.weight, m.weight:to("bfloat16"):float(), "weight")
  same_values(m2.bias, m.bias:to("bfloat16"):float(), "bias")
end)

H.done()
