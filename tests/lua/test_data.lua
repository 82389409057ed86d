-- test_data.lua — tide.data: TensorDataset, DataLoader batching (in order, drop_last, shuffle
-- determinism with a seed, every sample once per pass), custom datasets with collation, Subset /
-- random_split, and the Fashion-MNIST reader (skipped with a reason when the data is absent)
-- with load_idx errors on crafted bad files.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local data = require "tide.data"

local function column(t) -- a [N] or [N, 1]-ish tensor's values as a flat Lua list
  return H.flatten(t:totable())
end

H.test("TensorDataset: len, get (1-based), errors", function()
  local x = tide.arange(10, { dtype = "float32" }):view(5, 2)
  local y = tide.tensor({ 1, 2, 3, 1, 2 })
  local ds = data.TensorDataset(x, y)
  H.eq(#ds, 5)
  H.eq(ds:len(), 5)
  local xi, yi = ds:get(3)
  H.values(xi, { 4, 5 })
  H.eq(yi:item(), 3)
  H.raises(function() ds:get(6) end, "out of range 1..5")
  H.raises(function() ds:get(0) end, "out of range")
  H.raises(function() data.TensorDataset(x, tide.zeros(4)) end, "size mismatch", "5", "4")
  H.raises(function() data.TensorDataset(x, 3) end, "argument 2 must be a tensor")
end)

H.test("DataLoader in order: batches, the short last batch, drop_last", function()
  local n = 10
  local x = tide.arange(n * 3, { dtype = "float32" }):view(n, 3)
  local y = tide.arange(n) + 1
  local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 4 })
  H.eq(#loader, 3)
  local sizes, labels = {}, {}
  for xb, yb in loader:iter() do
    sizes[#sizes + 1] = xb:size(1)
    H.eq(xb:size(2), 3)
    for _, v in ipairs(column(yb)) do labels[#labels + 1] = v end
    H.values(xb:select(2, 1), H.map(column(yb), function(v) return (v - 1) * 3 end))
  end
  H.eq(sizes, { 4, 4, 2 })
  H.eq(labels, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 })
  local dl = data.DataLoader(data.TensorDataset(x, y), { batch_size = 4, drop_last = true })
  H.eq(#dl, 2)
  local count = 0
  for xb in dl:iter() do
    count = count + 1
    H.eq(xb:size(1), 4)
  end
  H.eq(count, 2)
  H.raises(function() data.DataLoader(data.TensorDataset(x), { batch_size = 0 }) end, "batch_size")
  H.raises(function() data.DataLoader(data.TensorDataset(x), { batchsize = 2 }) end,
           "unknown option 'batchsize'")
  H.raises(function() data.DataLoader({}, {}) end, "expected a dataset")
end)

local function pass_labels(loader)
  local out = {}
  for _, yb in loader:iter() do
    for _, v in ipairs(column(yb)) do out[#out + 1] = v end
  end
  return out
end

H.test("DataLoader shuffle: a permutation each pass, reproducible with a seed", function()
  local n = 50
  local x = (tide.arange(n, { dtype = "float32" }) + 1):view(n, 1)
  local y = tide.arange(n) + 1
  local ds = data.TensorDataset(x, y)
  local a = data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 42 })
  local b = data.DataLoader(ds, { batch_size = 8, shuffle = true, seed = 42 })
  local a1, a2 = pass_labels(a), pass_labels(a)
  local b1, b2 = pass_labels(b), pass_labels(b)
  H.eq(a1, b1, "same seed, same first pass")
  H.eq(a2, b2, "same seed, same second pass")
  H.ok(H.show(a1) ~= H.show(a2), "passes differ")
  local sorted = { table.unpack(a1) }
  table.sort(sorted)
  local want = {}
  for i = 1, n do want[i] = i end
  H.eq(sorted, want, "every sample exactly once")
  H.ok(H.show(a1) ~= H.show(want), "shuffled")
  -- the rows travel with their labels
  for xb, yb in a:iter() do
    H.values(xb:view(-1), H.map(column(yb), function(v) return v end))
  end
  -- without a seed: the global RNG, reproducible through tide.manual_seed
  tide.manual_seed(3)
  local c1 = pass_labels(data.DataLoader(ds, { batch_size = 8, shuffle = true }))
  tide.manual_seed(3)
  local c2 = pass_labels(data.DataLoader(ds, { batch_size = 8, shuffle = true }))
  H.eq(c1, c2)
  -- a seeded loader leaves the global RNG where it was
  tide.manual_seed(9)
  local r1 = tide.rand(3)
  tide.manual_seed(9)
  pass_labels(a)
  H.ok(tide.equal(tide.rand(3), r1), "global RNG untouched")
end)

H.test("a custom Dataset: get per sample, default collation, collate_fn", function()
  local Squares = data.Dataset:extend("Squares")
  function Squares:__init(n) self.n = n end
  function Squares:len() return self.n end
  function Squares:get(i) return tide.tensor({ i, i * i }, { dtype = "float32" }), i end
  local ds = Squares(7)
  H.eq(#ds, 7)
  local loader = data.DataLoader(ds, { batch_size = 3 })
  local got = {}
  for xb, yb in loader:iter() do
    got[#got + 1] = { xb:size(1), yb:totable() }
    H.values(xb:select(2, 2), H.map(yb:totable(), function(v) return v * v end))
  end
  H.eq(got, { { 3, { 1, 2, 3 } }, { 3, { 4, 5, 6 } }, { 1, { 7 } } })
  local sums = {}
  local custom = data.DataLoader(ds, { batch_size = 4, collate_fn = function(samples)
    local s = 0
    for _, smp in ipairs(samples) do s = s + smp[2] end
    return { s }
  end })
  for s in custom:iter() do sums[#sums + 1] = s end
  H.eq(sums, { 10, 18 })
  local base = data.Dataset()
  H.raises(function() base:get(1) end, "get(i) is not defined")
end)

H.test("Subset and random_split", function()
  local ds = data.TensorDataset(tide.arange(10) + 1)
  local a, b = data.random_split(ds, { 7, 3 }, 5)
  H.eq({ #a, #b }, { 7, 3 })
  local seen = {}
  for i = 1, 7 do seen[#seen + 1] = a:get(i):item() end
  for i = 1, 3 do seen[#seen + 1] = b:get(i):item() end
  table.sort(seen)
  H.eq(seen, { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 })
  local a2 = data.random_split(ds, { 7, 3 }, 5)
  H.eq(a2.indices, a.indices, "seeded split is reproducible")
  H.raises(function() data.random_split(ds, { 5, 3 }) end, "add up to 8")
end)

local root = data.FASHION_MNIST_ROOT
local have = io.open(root .. "/t10k-labels-idx1-ubyte.gz", "rb")
if have then have:close() end

H.test("FashionMNIST: the test set's images and 1-based labels", function()
  if not have then
    print("SKIP FashionMNIST: " .. root .. " is absent (Debian package dataset-fashion-mnist)")
    return
  end
  local ds = data.FashionMNIST(root, { train = false })
  H.eq(#ds, 10000)
  H.eq(ds.images:size(), { 10000, 28, 28 })
  H.eq(ds.images.dtype, "uint8")
  H.eq(ds.labels.dtype, "int64")
  -- the file's first labels are 9 2 1 1 6 1 4 6 5 7 (0-based classes)
  H.eq(ds.labels:narrow(1, 1, 10):totable(), { 10, 3, 2, 2, 7, 2, 5, 7, 6, 8 })
  H.eq(ds.labels:min():item(), 1)
  H.eq(ds.labels:max():item(), 10)
  H.eq(ds.images[1]:long():sum():item(), 33456, "pixel sum of the first test image")
  H.eq(ds.classes[10], "Ankle boot")
  local small = data.FashionMNIST({ train = false, limit = 100 })
  H.eq(#small, 100)
  H.raises(function() data.FashionMNIST("/nonexistent") end, "not found in /nonexistent")
end)

H.test("load_idx on crafted bad files: a Lua error, never a crash", function()
  local path = os.tmpname()
  local function write(bytes)
    local f = assert(io.open(path, "wb"))
    f:write(bytes)
    f:close()
  end
  -- a valid plain IDX file: magic 0x00000801 (uint8, 1 dim), 3 items
  write(string.pack(">I4I4", 0x801, 3) .. "\1\2\3")
  H.values(data.load_idx(path), { 1, 2, 3 })
  write(string.pack(">I4I4", 0x801, 5) .. "\1\2\3") -- truncated data
  H.raises(function() data.load_idx(path) end, "load_idx")
  write(string.pack(">I4I4I4I4", 0x803, 0x7fffffff, 0x7fffffff, 0x7fffffff)) -- huge sizes
  H.raises(function() data.load_idx(path) end, "load_idx")
  write("garbage that is not an IDX file at all")
  H.raises(function() data.load_idx(path) end, "load_idx")
  write("\31\139\8\0\0\0\0\0\0\3garbage") -- a gzip header, then a corrupt stream
  H.raises(function() data.load_idx(path) end, "load_idx")
  write("")
  H.raises(function() data.load_idx(path) end, "load_idx")
  os.remove(path)
  H.raises(function() data.load_idx(path) end, "load_idx")
end)

H.done()
