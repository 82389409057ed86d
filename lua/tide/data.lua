-- tide.data — datasets and batching (torch.utils.data's names), and the Fashion-MNIST / MNIST
-- readers on tide.load_idx (gzipped or plain IDX files). TextDataset (byte-level text windows)
-- and the fortunes corpus live in tide/data/text.lua.
--
--   local ds = data.TensorDataset(x, y)              -- ds:get(i) -> x[i], y[i] (1-based)
--   local loader = data.DataLoader(ds, {batch_size = 128, shuffle = true, drop_last = false,
--                                       seed = 1})
--   for xb, yb in loader:iter() do ... end           -- #loader batches
--
-- DataLoader(ds, {sampler = data.DistributedSampler(ds, {num_replicas=, rank=})}) reads one
-- rank's share of the dataset (tide/data/sampler.lua; call sampler:set_epoch(e) each epoch).
-- A TensorDataset is batched with index_select on each tensor (one op per tensor and batch;
-- without shuffle, narrow views). Other datasets are batched by calling get(i) per sample and
-- stacking the results (tensors with tide.stack, numbers into a tensor). Shuffling draws a
-- permutation with tide.randperm: from the global seeded RNG, or, given seed, from seed + epoch
-- (the global RNG state is saved and restored around it), so a run is reproducible.
local tide = require "tide"

local data = {}

local function class(name, parent)
  local cls = { __name = name }
  cls.__index = cls
  cls.__len = function(self) return self:len() end
  return setmetatable(cls, {
    __index = parent,
    __call = function(c, ...)
      local self = setmetatable({}, c)
      self:__init(...)
      return self
    end,
  })
end

-- ---- Dataset -----------------------------------------------------------------------------------

-- Base class: subclasses define len() and get(i) (1-based).
local Dataset = class("Dataset")
data.Dataset = Dataset
function Dataset:__init() end
function Dataset:len()
  error(self.__name .. ": len() is not defined", 2)
end
function Dataset:get()
  error(self.__name .. ": get(i) is not defined", 2)
end
function Dataset:extend(name)
  return class(name, self)
end

-- TensorDataset(t1, t2, ...): sample i is t1[i], t2[i], ... (the same size along dim 1)
local TensorDataset = class("TensorDataset", Dataset)
data.TensorDataset = TensorDataset
function TensorDataset:__init(...)
  local ts = { ... }
  if #ts == 0 then
    error("TensorDataset: expected at least one tensor", 3)
  end
  for i, t in ipairs(ts) do
    if not tide.is_tensor(t) then
      error(("TensorDataset: argument %d must be a tensor, got %s"):format(i, type(t)), 3)
    end
    if t:dim() == 0 then
      error(("TensorDataset: tensor %d has no dims"):format(i), 3)
    end
    if t:size(1) ~= ts[1]:size(1) then
      error(("TensorDataset: size mismatch along dim 1: tensor 1 has %d, tensor %d has %d")
        :format(ts[1]:size(1), i, t:size(1)), 3)
    end
  end
  self.tensors = ts
end
function TensorDataset:len()
  return self.tensors[1]:size(1)
end
function TensorDataset:get(i)
  local n = self:len()
  if math.type(i) ~= "integer" or i < 1 or i > n then
    error(("TensorDataset: index %s out of range 1..%d"):format(tostring(i), n), 2)
  end
  local out = {}
  for k, t in ipairs(self.tensors) do
    out[k] = t[i]
  end
  return table.unpack(out)
end

-- Subset(dataset, indices): the samples at the given 1-based indices (a table or int tensor)
local Subset = class("Subset", Dataset)
data.Subset = Subset
function Subset:__init(dataset, indices)
  if tide.is_tensor(indices) then
    indices = indices:totable()
  end
  self.dataset, self.indices = dataset, indices
end
function Subset:len()
  return #self.indices
end
function Subset:get(i)
  return self.dataset:get(self.indices[i])
end

-- random_split(dataset, {n1, n2, ...} [, seed]) -> Subsets over a random permutation
function data.random_split(dataset, lengths, seed)
  local n = #dataset
  local total = 0
  for _, l in ipairs(lengths) do total = total + l end
  if total ~= n then
    error(("random_split: the lengths add up to %d, the dataset has %d samples"):format(total, n), 2)
  end
  local perm
  if seed then
    local st = tide.get_rng_state()
    tide.manual_seed(seed)
    perm = tide.randperm(n):totable()
    tide.set_rng_state(st)
  else
    perm = tide.randperm(n):totable()
  end
  local out, pos = {}, 0
  for k, l in ipairs(lengths) do
    local idx = {}
    for j = 1, l do idx[j] = perm[pos + j] end
    pos = pos + l
    out[k] = Subset(dataset, idx)
  end
  return table.unpack(out)
end

-- ---- DataLoader --------------------------------------------------------------------------------

local DataLoader = {}
DataLoader.__index = DataLoader
DataLoader.__name = "DataLoader"
data.DataLoader = setmetatable(DataLoader, {
  __call = function(c, dataset, opts)
    return c.new(dataset, opts)
  end,
})

local loader_keys = { batch_size = true, shuffle = true, drop_last = true, seed = true,
                      generator = true, collate_fn = true, sampler = true }

-- A sampler (DistributedSampler, or any table with indices() and len()) decides the order.
local function check_sampler(s, shuffle)
  if type(s) ~= "table" or type(s.indices) ~= "function" or type(s.len) ~= "function" then
    error("DataLoader: sampler must have indices() and len() (a data.DistributedSampler), got "
      .. type(s), 4)
  end
  if shuffle then
    error("DataLoader: shuffle must be false when a sampler is given (the sampler decides the "
      .. "order; DistributedSampler shuffles by itself)", 4)
  end
end

-- DataLoader(dataset, {batch_size=1, shuffle=false, drop_last=false, seed=nil, collate_fn=nil,
-- sampler=nil})
function DataLoader.new(dataset, opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error("DataLoader: options must be a table", 3)
  end
  for k in pairs(opts) do
    if not loader_keys[k] then
      error("DataLoader: unknown option '" .. tostring(k) .. "'", 3)
    end
  end
  if type(dataset) ~= "table" or type(dataset.get) ~= "function" then
    error("DataLoader: expected a dataset (a table with len() and get(i))", 3)
  end
  local bs = opts.batch_size or 1
  if math.type(bs) ~= "integer" or bs < 1 then
    error("DataLoader: batch_size must be a positive integer, got " .. tostring(bs), 3)
  end
  local seed = opts.seed or opts.generator
  if seed ~= nil and math.type(seed) ~= "integer" then
    error("DataLoader: seed must be an integer", 3)
  end
  if opts.sampler ~= nil then
    check_sampler(opts.sampler, opts.shuffle)
  end
  return setmetatable({ dataset = dataset, batch_size = bs, shuffle = opts.shuffle or false,
                        drop_last = opts.drop_last or false, seed = seed, epoch = 0,
                        collate_fn = opts.collate_fn, sampler = opts.sampler }, DataLoader)
end

-- The number of samples one pass reads: the sampler's share, or the whole dataset.
function DataLoader:_samples()
  return self.sampler and self.sampler:len() or self.dataset:len()
end

-- The number of batches.
function DataLoader:len()
  local n = self:_samples()
  if self.drop_last then
    return n // self.batch_size
  end
  return (n + self.batch_size - 1) // self.batch_size
end
DataLoader.__len = DataLoader.len

-- The order of the samples for the next pass: nil (in order) or an int64 tensor of 1-based
-- indices (a sampler's, as it gives them).
function DataLoader:_order()
  self.epoch = self.epoch + 1
  if self.sampler then
    local idx = self.sampler:indices()
    return #idx > 0 and tide.tensor(idx, { dtype = "int64" }) or nil
  end
  if not self.shuffle then
    return nil
  end
  local n = self.dataset:len()
  if self.seed then
    local st = tide.get_rng_state()
    tide.manual_seed(self.seed + self.epoch - 1)
    local perm = tide.randperm(n)
    tide.set_rng_state(st)
    return perm
  end
  return tide.randperm(n)
end

-- Stacks samples (tuples of tensors or numbers) into batch tensors.
function data.default_collate(samples)
  local first = samples[1]
  local out = {}
  for k = 1, #first do
    local v = first[k]
    if tide.is_tensor(v) then
      local col = {}
      for i, s in ipairs(samples) do col[i] = s[k] end
      out[k] = tide.stack(col)
    elseif type(v) == "number" then
      local col = {}
      for i, s in ipairs(samples) do col[i] = s[k] end
      out[k] = tide.tensor(col)
    else
      local col = {}
      for i, s in ipairs(samples) do col[i] = s[k] end
      out[k] = col
    end
  end
  return out
end

-- for xb, yb in loader:iter() do ... end (one pass; shuffled anew each call when shuffle)
function DataLoader:iter()
  local ds, bs = self.dataset, self.batch_size
  local n = self:_samples()
  local nb = self:len()
  local order = self:_order()
  local b = 0
  local tensors = getmetatable(ds) == TensorDataset and not self.collate_fn and ds.tensors
  return function()
    b = b + 1
    if b > nb then
      return nil
    end
    local start = (b - 1) * bs + 1
    local len = math.min(bs, n - start + 1)
    if tensors then
      local out = {}
      if order then
        local idx = order:narrow(1, start, len)
        for k, t in ipairs(tensors) do
          out[k] = t:index_select(1, idx)
        end
      else
        for k, t in ipairs(tensors) do
          out[k] = t:narrow(1, start, len)
        end
      end
      return table.unpack(out)
    end
    local idx = order and order:narrow(1, start, len):totable()
    local samples = {}
    for j = 1, len do
      samples[j] = table.pack(ds:get(idx and idx[j] or (start + j - 1)))
    end
    return table.unpack((self.collate_fn or data.default_collate)(samples))
  end
end
DataLoader.__call = DataLoader.iter

-- ---- IDX files, MNIST and Fashion-MNIST --------------------------------------------------------

-- The IDX file at path (gzipped or plain) as a tensor (uint8 images [N, 28, 28], labels [N]).
function data.load_idx(path)
  return tide.load_idx(path)
end

local FASHION_ROOT = "/usr/share/datasets/fashion-mnist"

-- Whether something that is not a directory is at path, without opening it: opening a named
-- pipe would wait for a writer. Opening "path/" fails at once with ENOTDIR (20) when path is a
-- file of any kind (the loader then says what it is), with ENOENT when nothing is there.
local ENOTDIR = 20
local function exists(path)
  local f, _, code = io.open(path .. "/", "rb")
  if f then -- a directory
    f:close()
    return false
  end
  return code == ENOTDIR
end

local function find_file(root, stem)
  for _, suffix in ipairs({ ".gz", "" }) do
    local p = root .. "/" .. stem .. suffix
    if exists(p) then
      return p
    end
  end
  return nil
end

-- MNIST-style dataset: MNIST(root, {train=true, limit=nil}) -> a TensorDataset of images (uint8
-- [N, 28, 28]) and labels (int64 [N], classes 1..10: the file's label + 1); fields images,
-- labels, classes. limit keeps the first N samples.
local function idx_dataset(name, default_root, classes)
  return function(root, opts)
    if type(root) == "table" then
      root, opts = nil, root
    end
    root = root or default_root
    opts = opts or {}
    local train = opts.train ~= false
    local prefix = train and "train" or "t10k"
    local ipath = find_file(root, prefix .. "-images-idx3-ubyte")
    local lpath = find_file(root, prefix .. "-labels-idx1-ubyte")
    if not ipath or not lpath then
      error(("%s: %s-images-idx3-ubyte(.gz) and %s-labels-idx1-ubyte(.gz) not found in %s")
        :format(name, prefix, prefix, root), 2)
    end
    local images = tide.load_idx(ipath)
    local labels = tide.load_idx(lpath)
    if images:dim() ~= 3 or labels:dim() ~= 1 or images:size(1) ~= labels:size(1) then
      error(("%s: %s and %s do not match (%d images, %d labels)"):format(
        name, ipath, lpath, images:size(1), labels:size(1)), 2)
    end
    if opts.limit and opts.limit < images:size(1) then
      images = images:narrow(1, 1, opts.limit):contiguous()
      labels = labels:narrow(1, 1, opts.limit):contiguous()
    end
    labels = labels:long() + 1
    local ds = TensorDataset(images, labels)
    ds.images, ds.labels, ds.classes, ds.root = images, labels, classes, root
    return ds
  end
end

data.FashionMNIST = idx_dataset("FashionMNIST", FASHION_ROOT, {
  "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
  "Ankle boot" })
data.MNIST = idx_dataset("MNIST", "/usr/share/datasets/mnist",
                         { "0", "1", "2", "3", "4", "5", "6", "7", "8", "9" })
data.FASHION_MNIST_ROOT = FASHION_ROOT

-- ---- text: TextDataset and the fortunes corpus (tide/data/text.lua) -----------------------------

local text = require "tide.data.text"
data.TextDataset = text.TextDataset
data.fortunes_files = text.fortunes_files
data.Fortunes = text.Fortunes
data.FORTUNES_ROOT = text.FORTUNES_ROOT

-- ---- samplers (tide/data/sampler.lua) ------------------------------------------------------------

data.DistributedSampler = require("tide.data.sampler").DistributedSampler

return data
