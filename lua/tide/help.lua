-- tide.help — help(x) at the prompt: an op's or module's signature and one-line description.
--
--   tide.help()                 the modules and how to ask
--   tide.help(tide.matmul)      a function value (mapped back to its name), or "matmul",
--   tide.help("x:reshape")      "tide.matmul", "x:reshape", tide.nn.Linear, "nn.Linear" ...
--   tide.help(tide.nn)          a module: its entries, one line each
--
-- The entries live in tide/help/entries.lua, keyed by names with a receiver prefix (below);
-- tests/lua/test_help.lua checks them against the docs in both directions. help.resolve(name)
-- gives the value a name stands for, loading the lazy module it belongs to.
local tide = require "tide"
local entries = require "tide.help.entries"

local help = {}

-- Where a name's prefix points: a module path, or a class whose fields are the methods.
local namespaces = {
  { "tide.", function() return tide end },
  { "x:", function() return tide.Tensor end },
  { "nn.", function() return tide.nn end },
  { "F.", function() return tide.nn.functional end },
  { "optim.", function() return tide.optim end },
  { "data.", function() return tide.data end },
  { "m:", function() return tide.nn.Module end },
  { "opt:", function() return tide.optim.Optimizer end },
  { "sched:", function() return tide.optim.StepLR end },
  { "loader:", function() return tide.data.DataLoader end },
  { "ds:", function() return tide.data.Dataset end },
  { "text:", function() return tide.data.TextDataset end },
  { "sampler:", function() return tide.data.DistributedSampler end },
  { "gpt.", function() return require "tide.models.gpt" end },
  { "lm:", function() return require("tide.models.gpt").GPT end },
  { "llama.", function() return require "tide.models.llama" end },
  { "llm:", function() return require("tide.models.llama").Llama end },
  { "scaler:", function() return tide.amp.GradScaler end },
  { "tokenizer.", function() return require "tide.models.tokenizer" end },
  { "tok:", function() return require("tide.models.tokenizer").Tokenizer end },
}
help.namespaces = namespaces

-- The value name stands for (nil if none): "tide.nn.Linear", "x:sum", "nn.init.zeros_" ...
function help.resolve(name)
  for _, ns in ipairs(namespaces) do
    local prefix = ns[1]
    if name:sub(1, #prefix) == prefix then
      local v = ns[2]()
      for part in name:sub(#prefix + 1):gmatch("[^.]+") do
        if type(v) ~= "table" then
          return nil
        end
        v = v[part]
      end
      return v
    end
  end
  return nil
end

-- A function, or a class (a table one calls: nn.Linear, optim.SGD, data.DataLoader).
function help.callable(v)
  if type(v) == "function" then
    return true
  end
  local mt = type(v) == "table" and getmetatable(v)
  return mt and type(mt) == "table" and mt.__call ~= nil or false
end

-- name -> {signature, description}, built once from the entries list.
local by_name, order
local function index()
  if by_name then
    return by_name, order
  end
  by_name, order = {}, {}
  for _, e in ipairs(entries) do
    local name = e[1]:match("^[%w_.:]+")
    by_name[name] = e
    order[#order + 1] = name
  end
  return by_name, order
end
help.index = index

-- The entry for a value (a function or class), found by identity: x.sum and tide.sum are the
-- same function, so one entry serves both.
local by_value
local function entry_for_value(v)
  if not by_value then
    by_value = {}
    local names, list = index()
    for _, name in ipairs(list) do
      local ok, got = pcall(help.resolve, name)
      if ok and got ~= nil and by_value[got] == nil then
        by_value[got] = names[name]
      end
    end
  end
  return by_value[v]
end

local modules = {
  { "tide", "tensors: creation, ops, autograd, files, devices (x:<name> for the methods)" },
  { "nn", "tide.nn: modules (nn.Linear ...), nn.init, m:<method> for a module" },
  { "F", "tide.nn.functional: torch.nn.functional's names" },
  { "optim", "tide.optim: SGD, Adam, AdamW, LR schedulers (opt:<method>, sched:<method>)" },
  { "data", "tide.data: datasets, DataLoader and DistributedSampler (loader:<method>, ds:<method>, text:<method> for TextDataset, sampler:<method>)" },
  { "gpt", "tide.models.gpt: a GPT language model (gpt.GPT; lm:<method> for one)" },
  { "llama", "tide.models.llama: Llama and its checkpoint loaders (llm:<method> for one)" },
  { "tokenizer", "tide.models.tokenizer: llama2.c's tokenizer.bin (tokenizer.load; tok:<method>)" },
}
-- The name prefixes each module's listing shows: its functions, then its objects' methods.
local module_prefixes = {
  tide = { "tide.", "x:" }, nn = { "nn.", "m:" }, F = { "F." },
  optim = { "optim.", "opt:", "sched:" }, data = { "data.", "loader:", "ds:", "text:", "sampler:" },
  gpt = { "gpt.", "lm:" }, llama = { "llama.", "llm:" },
  tokenizer = { "tokenizer.", "tok:" },
}

local function line(e)
  if #e[1] >= 40 then
    return ("%s\n%-40s %s"):format(e[1], "", e[2])
  end
  return ("%-40s %s"):format(e[1], e[2])
end

-- Prints every entry of a module, one line each.
local function show_module(key)
  local names, list = index()
  local out = {}
  for _, p in ipairs(module_prefixes[key]) do
    for _, name in ipairs(list) do
      if name:sub(1, #p) == p then
        out[#out + 1] = line(names[name])
      end
    end
  end
  print(table.concat(out, "\n"))
end

local function overview()
  local out = { "help(x) shows a function's signature and what it does: help(tide.matmul),",
                "help(x.reshape), help(\"matmul\"), help(tide.nn.Linear); help(module) lists one:" }
  for _, m in ipairs(modules) do
    out[#out + 1] = ("  %-9s %s"):format(m[1], m[2])
  end
  out[#out + 1] = "The guide: docs/README.md; every function: docs/lua-api.md."
  print(table.concat(out, "\n"))
end

local module_names = {
  tide = "tide", nn = "nn", ["tide.nn"] = "nn", F = "F", functional = "F",
  ["tide.nn.functional"] = "F", ["nn.functional"] = "F", optim = "optim",
  ["tide.optim"] = "optim", data = "data", ["tide.data"] = "data", gpt = "gpt",
  ["tide.models.gpt"] = "gpt", llama = "llama", ["tide.models.llama"] = "llama",
  tokenizer = "tokenizer", ["tide.models.tokenizer"] = "tokenizer",
}

-- The module key of a module table, or nil.
local function module_of(v)
  if v == tide then
    return "tide"
  end
  for _, m in ipairs({ "nn", "optim", "data" }) do
    if rawget(tide, m) == v then
      return m
    end
  end
  local nn = rawget(tide, "nn")
  if nn and v == nn.functional then
    return "F"
  end
  if v ~= nil and v == package.loaded["tide.models.gpt"] then
    return "gpt"
  end
  if v ~= nil and v == package.loaded["tide.models.llama"] then
    return "llama"
  end
  if v ~= nil and v == package.loaded["tide.models.tokenizer"] then
    return "tokenizer"
  end
  return nil
end

-- The entry for a name typed as a string: exact, then with each namespace prefix ("matmul" ->
-- "tide.matmul", "reshape" -> "x:reshape"), x.name read as x:name.
local function entry_for_name(s)
  local names = index()
  if names[s] then
    return names[s]
  end
  s = s:gsub("^x%.", "x:"):gsub("^tide%.nn%.functional%.", "F."):gsub("^tide%.nn%.", "nn.")
  s = s:gsub("^tide%.optim%.", "optim."):gsub("^tide%.data%.", "data.")
  if names[s] then
    return names[s]
  end
  for _, ns in ipairs(namespaces) do
    if names[ns[1] .. s] then
      return names[ns[1] .. s]
    end
  end
  return nil
end

local function explain(x)
  if x == nil then
    return overview()
  end
  if x == help then
    return print(line(index()["tide.help"]))
  end
  local t = type(x)
  local mod = t == "string" and module_names[x] or (t == "table" and module_of(x))
  if mod then
    return show_module(mod)
  end
  local e
  if t == "string" then
    e = entry_for_name(x)
  elseif t == "function" or t == "table" then
    -- a module or optimizer object: its class (the metatable) has the entry
    local class = t == "table" and getmetatable(x)
    e = entry_for_value(x) or (class and entry_for_value(class))
  elseif tide.is_tensor(x) then
    return print("a tensor: help(\"x:<method>\") for a method; help(tide) lists them all")
  end
  if e then
    local name = e[1]:match("^[%w_.:]+")
    local short = name:match("^tide%.([%w_]+)$")
    local also = short and rawget(tide.Tensor, short) ~= nil
                 and rawget(tide.Tensor, short) == help.resolve(name)
                 and ("\n  (also the method x:%s)"):format(short) or ""
    return print(e[1] .. "\n  " .. e[2] .. also)
  end
  local what = t == "string" and ("'" .. x .. "'") or ("this " .. t)
  print(("no help for %s; help() lists the modules"):format(what))
end

return setmetatable(help, {
  __call = function(_, x)
    explain(x)
  end,
  __tostring = function()
    return "help(x): a function's signature and description; help() lists the modules"
  end,
})
