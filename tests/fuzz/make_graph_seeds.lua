-- make_graph_seeds.lua — the seed corpus of fuzz_graph (corpus/graph): small exported graphs
-- that must load (ok_*) and files that each break one rule and must be rejected (bad_*).
-- Run with the tide program from the repository root:
--   build/lua/tide tests/fuzz/make_graph_seeds.lua
local tide = require "tide"
local nn = tide.nn
local dir = "tests/fuzz/corpus/graph/"
tide.manual_seed(1)

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function write(name, s)
  local f = assert(io.open(dir .. name, "wb"))
  f:write(s)
  f:close()
end

local mlp = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
tide.export(function(x) return mlp(x):softmax(2) end, { tide.randn(2, 6) }, dir .. "ok_mlp")
tide.export(function(x) return mlp(x):log_softmax(2) end, { tide.randn(2, 6) },
            dir .. "ok_mlp_dynamic", { dynamic = { [1] = { 1 } }, input_names = { "x" } })
local conv = nn.Conv2d(1, 2, 3, { padding = 1 })
tide.export(function(x, y) return nn.functional.max_pool2d(conv(x), 2):reshape(2, -1) + y, x:sum() end,
            { tide.randn(2, 1, 4, 4), tide.randn(2, 8) }, dir .. "ok_conv_two_outputs")
tide.export(function(x) return x:t():contiguous() * 2 + x:t() end, { tide.randn(3, 4) },
            dir .. "ok_views")

local gpt = require "tide.models.gpt"
local lm = gpt.GPT { vocab_size = 16, block_size = 8, n_layer = 1, n_head = 2, n_embd = 8 }
lm:eval()
tide.export(function(i) return lm(i) end, { tide.ones(2, 4):long() }, dir .. "ok_gpt")

local good = read(dir .. "ok_mlp")
write("bad_truncated", good:sub(1, #good - 7))
write("bad_magic", "TIDEGRPX" .. good:sub(9))
write("bad_newer_version", good:sub(1, 8) .. string.char(2) .. good:sub(10))
write("bad_header_checksum", good:sub(1, 20) .. string.char((good:byte(21) + 1) % 256) ..
      good:sub(22))
write("bad_meta_checksum", good:sub(1, 70) .. string.char((good:byte(71) + 1) % 256) ..
      good:sub(72))
write("bad_blob_checksum", good:sub(1, #good - 1) .. string.char((good:byte(#good) + 1) % 256))
write("bad_empty", "")
print("graph seeds written to " .. dir)
