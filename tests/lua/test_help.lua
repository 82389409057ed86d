-- test_help.lua — the help table (lua/tide/help/entries.lua) against the docs, both ways, and
-- what tide.help prints.
--
-- How a "documented function" is recognized. The pages: docs/lua-api.md and the guide pages
-- that describe the Lua API by task (PAGES below; from-pytorch/from-torch7 name other libraries'
-- functions and are left out, c-api.md is C). Only inline code spans (`...`) count, not fenced
-- blocks (those are examples, run by test_docs). In a span:
--   * a name with a receiver: tide.f, x:m / x.m (also y, a, b, loss: a tensor), nn.C,
--     nn.init.f, F.f, optim.C, data.f, m:/model:/module: (an nn.Module), opt:/optimizer:,
--     sched:/scheduler:, loader:, ds:/dataset:, text: (a TextDataset), gpt.f
--     (tide.models.gpt), lm: (a gpt.GPT model), llama.f (tide.models.llama), llm: (a
--     llama.Llama model), tokenizer.f (tide.models.tokenizer), tok: (a Tokenizer), sampler: (a
--     data.DistributedSampler) — anywhere
--     in the span;
--   * a bare name that starts the span (`exp`, `narrow(dim, start, len)`): tide.<name>, else
--     the tensor method x:<name>;
--   * after either, "/name" continues with the same receiver: `tide.zeros/ones(...)`,
--     `x:float()/double()`, `F.relu/relu6`.
-- Such a name is a documented function when it resolves (tide.help.resolve) to a function or
-- a callable class; a non-callable one (x.shape, tide.float32, tide.nn) and a bare name that
-- resolves to nothing (`tostring(x)`, `len()`) are not. A name with a receiver written as a
-- call (`tide.foo(`) that resolves to nothing fails the test: the docs name a function that
-- does not exist. Names are compared by value, so x:sum and tide.sum (the same function) need
-- one entry. A help entry must resolve to a callable that the docs name this way.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local help = require "tide.help"

local DOCS = (arg[0]:match("(.*/)") or "./") .. "../../docs/"
local PAGES = { "lua-api.md", "tensors.md", "autograd.md", "nn.md", "checkpoints.md",
                "devices.md", "jit.md", "repl.md", "threads.md" }

local receivers = {
  tide = "tide.", x = "x:", y = "x:", a = "x:", b = "x:", loss = "x:", nn = "nn.", F = "F.",
  optim = "optim.", data = "data.", m = "m:", model = "m:", module = "m:", opt = "opt:",
  optimizer = "opt:", sched = "sched:", scheduler = "sched:", loader = "loader:", ds = "ds:",
  dataset = "ds:", text = "text:", gpt = "gpt.", lm = "lm:", scaler = "scaler:", llama = "llama.",
  llm = "llm:", tokenizer = "tokenizer.", tok = "tok:", sampler = "sampler:",
}

local function read_spans(page)
  local f = assert(io.open(DOCS .. page, "r"), "cannot open " .. DOCS .. page)
  local text = f:read("a")
  f:close()
  text = ("\n" .. text):gsub("\n```.-\n```", "\n")
  local spans = {}
  for span in text:gmatch("`([^`]+)`") do
    spans[#spans + 1] = span
  end
  return spans
end

-- Calls found(name, is_call) for every name the rule above takes from one span.
local function names_in(span, found)
  -- "/name" continuations after position pos, with the receiver prefix
  local function continue(prefix, pos)
    while true do
      local call_end = span:match("^%b()()", pos) or pos
      local name, after = span:match("^/([%a_][%w_]*)()", call_end)
      if not name then
        return
      end
      found(prefix .. name, span:sub(after, after) == "(")
      pos = after
    end
  end
  local bare, after = span:match("^([%a_][%w_]*)()")
  if bare and not span:sub(after, after):match("[.:]") and not receivers[bare] then
    local key = help.resolve("tide." .. bare) ~= nil and "tide." or "x:"
    found(key .. bare, false) -- a bare name may be another library's or a method elsewhere
    continue(key, after)
  end
  for start, recv, path, stop in span:gmatch("()([%a_][%w_]*)[.:]([%a_][%w_.]*)()") do
    local before = start > 1 and span:sub(start - 1, start - 1) or ""
    local prefix = receivers[recv]
    if prefix and not before:match("[%w_.:\"']") then
      path = path:gsub("%.$", "")
      found(prefix .. path, span:sub(stop, stop) == "(")
      continue(prefix .. (path:match("^(.*%.)") or ""), stop) -- nn.init.a/b: nn.init.b
    end
  end
end

-- documented[value] = the first name the docs use for it; missing = calls that do not exist
local function documented_functions()
  local documented, missing, count = {}, {}, 0
  for _, page in ipairs(PAGES) do
    for _, span in ipairs(read_spans(page)) do
      names_in(span, function(name, is_call)
        local ok, v = pcall(help.resolve, name)
        if ok and help.callable(v) then
          if not documented[v] then
            documented[v] = name .. " (" .. page .. ")"
            count = count + 1
          end
        elseif is_call and (not ok or v == nil) then
          missing[#missing + 1] = ("%s (%s: `%s`)"):format(name, page, span)
        end
      end)
    end
  end
  return documented, missing, count
end

H.test("the docs name no function that does not exist", function()
  local _, missing = documented_functions()
  if #missing > 0 then
    error("documented but absent:\n  " .. table.concat(missing, "\n  "))
  end
end)

H.test("every documented function has a help entry", function()
  local documented, _, count = documented_functions()
  local names, list = help.index()
  local covered = {}
  for _, name in ipairs(list) do
    local ok, v = pcall(help.resolve, name)
    if ok and v ~= nil then
      covered[v] = true
    end
  end
  local lacking = {}
  for v, name in pairs(documented) do
    if not covered[v] then
      lacking[#lacking + 1] = name
    end
  end
  table.sort(lacking)
  if #lacking > 0 then
    error(("%d of %d documented functions have no help entry:\n  %s"):format(
      #lacking, count, table.concat(lacking, "\n  ")))
  end
  H.eq(#list > 100, true)
  assert(names["tide.matmul"], "tide.matmul has an entry")
end)

H.test("every help entry names a documented function", function()
  local documented = documented_functions()
  local names, list = help.index()
  local stray = {}
  for _, name in ipairs(list) do
    local ok, v = pcall(help.resolve, name)
    if not ok or not help.callable(v) then
      stray[#stray + 1] = name .. " (no such function)"
    elseif not documented[v] then
      stray[#stray + 1] = name .. " (not in the docs)"
    end
    local e = names[name]
    if type(e[2]) ~= "string" or e[2] == "" or e[2]:find("\n") then
      stray[#stray + 1] = name .. " (the description must be one line)"
    end
  end
  if #stray > 0 then
    error("help entries without a documented function:\n  " .. table.concat(stray, "\n  "))
  end
end)

-- What help prints, captured.
local function printed(...)
  local lines = {}
  local saved = print
  print = function(...)
    local parts = table.pack(...)
    for i = 1, parts.n do
      parts[i] = tostring(parts[i])
    end
    lines[#lines + 1] = table.concat(parts, "\t")
  end
  local ok, err = pcall(help, ...)
  print = saved
  assert(ok, err)
  return table.concat(lines, "\n")
end

local function has(text, want)
  if not text:find(want, 1, true) then
    error(("expected %q in:\n%s"):format(want, text), 2)
  end
end

H.test("help(x) by value and by name", function()
  local x = tide.ones(2, 2)
  local by_value = printed(tide.matmul)
  has(by_value, "tide.matmul(")
  H.eq(printed(x.matmul), by_value)
  H.eq(printed("matmul"), by_value)
  H.eq(printed("tide.matmul"), by_value)
  has(printed(tide.nn.Linear), "nn.Linear(in_features, out_features")
  H.eq(printed("tide.nn.Linear"), printed(tide.nn.Linear))
  has(printed(x.reshape), "tide.reshape(")
  has(printed("size"), "x:size(")
  has(printed(tide.nn.functional.relu), "F.relu(")
  has(printed(tide.help), "tide.help(")
  has(printed(tide.nn.Linear(2, 3)), "nn.Linear(in_features") -- an object: its class's entry
  has(printed("no_such_thing"), "no help for 'no_such_thing'")
  has(printed({}), "no help for this table")
end)

H.test("help() lists the modules; help(module) lists its entries", function()
  local all = printed()
  for _, m in ipairs({ "tide", "nn", "F", "optim", "data" }) do
    has(all, "  " .. m .. " ")
  end
  has(printed(tide.nn), "nn.Linear(")
  has(printed(tide.optim), "optim.SGD(")
  has(printed("data"), "data.DataLoader(")
  has(printed(tide), "tide.zeros(")
end)

H.done()
