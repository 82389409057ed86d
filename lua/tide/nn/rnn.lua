-- tide.nn's recurrent layers, as torch.nn's: nn.RNN (tanh or relu), nn.LSTM, nn.GRU, the cells
-- nn.RNNCell / nn.LSTMCell / nn.GRUCell, and nn.utils.rnn.pack_padded_sequence /
-- pad_packed_sequence. tide.nn installs them when it loads:
--   require("tide.nn.rnn").install(nn, helpers)
--
--   local lstm = nn.LSTM(10, 20, {num_layers = 2, batch_first = true})
--   local out, hc = lstm(x)                       -- hc = {h_n, c_n}
--   local out, h_n = gru(x, h0, {lengths = {5, 3}})   -- variable lengths
--
-- Everything is tide ops (linear, sigmoid, tanh, mul, add, where), so autograd and tide.jit see
-- it: a traced call records the whole time loop as one plan per sequence length. As PyTorch's
-- CPU layers do, a layer's input product is one GEMM over all steps ([T, B, in] -> [T, B, G]);
-- each step selects its rows, adds its hidden product and does the gate arithmetic. Backward
-- adds each step's gradient into its rows of one [T, B, G] gradient (autograd's engine does
-- that for selects and slices), so the input product's gradients are one GEMM each as well.
--
-- Variable lengths: a `lengths` list (or an int64 tensor) of the batch's valid steps. A step past
-- a sequence's length keeps its hidden state (so h_n is the state at its last valid step, and
-- the reverse direction starts at that step) and outputs zeros there, as PyTorch's packed
-- sequences do. A "packed" sequence here is the padded tensor with its lengths
-- ({data=, lengths=, batch_first=}), not PyTorch's interleaved layout.
local tide = require "tide"

local rnn = {}

-- Gate rows per hidden unit, in PyTorch's order: LSTM i, f, g, o; GRU r, z, n.
local GATES = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }

-- ---- one step of each cell --------------------------------------------------------------------
-- xw: the step's input product [B, G] (input_product below); h (and c): the state [B, H]; w:
-- the weights {ih, hh, b_ih, b_hh}. RNN and LSTM add both biases in the input product; the GRU
-- keeps b_hh in the hidden product (r scales its n part).

-- x [..., in] times W_ih^T, with the biases that belong to it: [..., G].
local function input_product(mode, x, w)
  if mode == "GRU" then return tide.linear(x, w.ih, w.b_ih) end
  return tide.linear(x, w.ih, w.b_ih and w.b_ih + w.b_hh)
end

local function rnn_step(act)
  return function(xw, h, _, w)
    local pre = xw + tide.linear(h, w.hh)
    return act == "relu" and tide.relu(pre) or tide.tanh(pre)
  end
end

local function lstm_step(xw, h, c, w)
  local gates = xw + tide.linear(h, w.hh)
  local i, f, g, o = table.unpack(gates:chunk(4, 2))
  local c1 = tide.sigmoid(f) * c + tide.sigmoid(i) * tide.tanh(g)
  return tide.sigmoid(o) * tide.tanh(c1), c1
end

local function gru_step(xw, h, _, w)
  local gh = tide.linear(h, w.hh, w.b_hh)
  local xr, xz, xn = table.unpack(xw:chunk(3, 2))
  local hr, hz, hn = table.unpack(gh:chunk(3, 2))
  local r = tide.sigmoid(xr + hr)
  local z = tide.sigmoid(xz + hz)
  local n = tide.tanh(xn + r * hn)
  return n + z * (h - n) -- (1 - z) * n + z * h
end

local function step_of(mode)
  if mode == "LSTM" then return lstm_step end
  if mode == "GRU" then return gru_step end
  return rnn_step(mode == "RNN_RELU" and "relu" or "tanh")
end

-- ---- lengths ----------------------------------------------------------------------------------

-- A list of integers from a Lua list or a 1-D integer tensor; checked against T and B.
local function lengths_list(name, lengths, T, B)
  if tide.is_tensor(lengths) then
    if lengths:dim() ~= 1 or lengths:is_floating_point() then
      error(("%s: lengths must be a 1-D integer tensor, got a %d-D %s tensor"):format(name,
        lengths:dim(), lengths.dtype), 3)
    end
    lengths = lengths:totable()
  end
  if type(lengths) ~= "table" or #lengths ~= B then
    error(("%s: lengths must list one length per sequence (%d), got %s"):format(name, B,
      type(lengths) == "table" and #lengths .. " entries" or type(lengths)), 3)
  end
  local out = {}
  for i, n in ipairs(lengths) do
    n = math.tointeger(n)
    if n == nil or n < 1 or n > T then
      error(("%s: length %d is %s; lengths must be integers in [1, %d] (the sequence length)")
        :format(name, i, tostring(lengths[i]), T), 3)
    end
    out[i] = n
  end
  return out
end

-- masks[t]: a bool [B, 1] tensor, true where step t is inside sequence b.
local function step_masks(lens, T, device)
  local masks = {}
  for t = 1, T do
    local row = {}
    for b, n in ipairs(lens) do row[b] = { t <= n } end
    masks[t] = tide.tensor(row, { dtype = "bool", device = device })
  end
  return masks
end

-- ---- the time loop ------------------------------------------------------------------------------

-- tide.stack(list, 1) built as a tree of stacks and cats of at most 6 tensors each: tide.jit
-- traces an op of at most 6 inputs (JIT_MAX_IN), so one stack of 100 steps would break the
-- traced loop into eager pieces.
local JIT_MAX_IN = 6
local function stack_steps(list)
  local parts = {}
  for i = 1, #list, JIT_MAX_IN do
    local last = math.min(i + JIT_MAX_IN - 1, #list)
    parts[#parts + 1] = tide.stack({ table.unpack(list, i, last) }, 1)
  end
  while #parts > 1 do
    local joined = {}
    for i = 1, #parts, JIT_MAX_IN do
      local last = math.min(i + JIT_MAX_IN - 1, #parts)
      joined[#joined + 1] = last > i and tide.cat({ table.unpack(parts, i, last) }, 1) or parts[i]
    end
    parts = joined
  end
  return parts[1]
end
rnn.stack_steps = stack_steps

-- ---- one direction ------------------------------------------------------------------------------

-- One direction of one layer over x [T, B, in]; returns the list of outputs [B, H], h_n and c_n.
local function run_direction(mode, x, h, c, w, masks, reverse)
  local T, step = x:size(1), step_of(mode)
  local xw = input_product(mode, x, w)
  local outs = {}
  for k = 1, T do
    local t = reverse and T - k + 1 or k
    local h1, c1 = step(xw:select(1, t), h, c, w)
    if masks then -- past the length: keep the state, output zeros
      local m = masks[t]
      h = tide.where(m, h1, h)
      if c1 then c = tide.where(m, c1, c) end
      outs[t] = tide.where(m, h1, tide.zeros_like(h1))
    else
      h, c = h1, c1
      outs[t] = h1
    end
  end
  return outs, h, c
end

rnn.run_direction = run_direction

function rnn.install(nn, helpers)
local Module, init = nn.Module, nn.init
local F = require "tide.nn.functional"
local check_opts, check_int, dtype_of = helpers.check_opts, helpers.check_int, helpers.dtype_of

local function reset_uniform(self, H)
  local bound = 1 / math.sqrt(H)
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -bound, bound) end
end

-- ---- RNN / LSTM / GRU ---------------------------------------------------------------------------

local RNNBase = Module:extend("RNNBase")

local base_opts = { num_layers = true, bias = true, batch_first = true, dropout = true,
                    bidirectional = true, proj_size = true, dtype = true, nonlinearity = true }

function RNNBase:__init(mode, name, input_size, hidden_size, opts)
  Module.__init(self)
  opts = check_opts(opts, name, base_opts)
  if opts.nonlinearity ~= nil and name ~= "RNN" then
    error(name .. ": unknown option 'nonlinearity'", 3)
  end
  if (opts.proj_size or 0) ~= 0 then
    error(name .. ": proj_size is not supported (only proj_size=0)", 3)
  end
  local dropout = opts.dropout or 0
  if type(dropout) ~= "number" or dropout < 0 or dropout > 1 then
    error(("%s: dropout must be a number in [0, 1], got %s"):format(name, tostring(dropout)), 3)
  end
  self.mode, self.dropout = mode, dropout
  self.input_size = check_int(input_size, name, "input_size")
  self.hidden_size = check_int(hidden_size, name, "hidden_size")
  self.num_layers = check_int(opts.num_layers or 1, name, "num_layers")
  self.bias = opts.bias ~= false
  self.batch_first = opts.batch_first == true
  self.bidirectional = opts.bidirectional == true
  local H, dirs = self.hidden_size, self.bidirectional and 2 or 1
  local G = GATES[mode] * H
  for l = 0, self.num_layers - 1 do
    local in_l = l == 0 and self.input_size or H * dirs
    for d = 1, dirs do
      local sfx = ("_l%d%s"):format(l, d == 2 and "_reverse" or "")
      self:register_parameter("weight_ih" .. sfx, nn.Parameter(tide.empty(G, in_l, dtype_of(opts))))
      self:register_parameter("weight_hh" .. sfx, nn.Parameter(tide.empty(G, H, dtype_of(opts))))
      if self.bias then
        self:register_parameter("bias_ih" .. sfx, nn.Parameter(tide.empty(G, dtype_of(opts))))
        self:register_parameter("bias_hh" .. sfx, nn.Parameter(tide.empty(G, dtype_of(opts))))
      end
    end
  end
  reset_uniform(self, H)
end

function RNNBase:reset_parameters()
  reset_uniform(self, self.hidden_size)
end

-- The weights of layer l (0-based), direction d (1 forward, 2 reverse).
function RNNBase:_weights(l, d)
  local sfx = ("_l%d%s"):format(l, d == 2 and "_reverse" or "")
  return { ih = self["weight_ih" .. sfx], hh = self["weight_hh" .. sfx],
           b_ih = self["bias_ih" .. sfx], b_hh = self["bias_hh" .. sfx] }
end

-- Input [T, B, in] (or batch_first [B, T, in], or unbatched [T, in]), hx [layers*dirs, B, H]
-- ({h0, c0} for the LSTM); opts {lengths=}. Also takes a packed sequence from
-- nn.utils.rnn.pack_padded_sequence in place of the input.
function RNNBase:forward(input, hx, opts)
  local name = self.__name
  local packed = type(input) == "table" and input.lengths ~= nil and not tide.is_tensor(input)
  opts = check_opts(opts, name, { lengths = true })
  local lengths = opts.lengths
  if packed then
    lengths = input.lengths
    local data = input.data
    if input.batch_first ~= self.batch_first then data = data:transpose(1, 2) end
    input = data
  end
  if not tide.is_tensor(input) then
    error(("%s: expected an input tensor, got %s"):format(name, type(input)), 2)
  end
  local x, batched = self:_input(input)
  local T, B = x:size(1), x:size(2)
  local h0, c0 = self:_state(hx, B, batched, x)
  local masks = lengths and step_masks(lengths_list(name, lengths, T, B), T, x.device)
  local out, hs, cs = self:_layers(x, h0, c0, masks)
  if self.batch_first then out = out:transpose(1, 2) end
  local h_n = stack_steps(hs)
  local c_n = cs[1] and stack_steps(cs)
  if not batched then
    out, h_n = out:squeeze(2), h_n:squeeze(2)
    c_n = c_n and c_n:squeeze(2)
  end
  if packed then out = { data = out, lengths = lengths, batch_first = self.batch_first } end
  if self.mode == "LSTM" then
    return out, { h_n, c_n }
  end
  return out, h_n
end

-- x as [T, B, in], and whether the input had a batch dim.
function RNNBase:_input(input)
  local name = self.__name
  local nd = input:dim()
  if nd ~= 2 and nd ~= 3 then
    error(("%s: expected a 2-D (unbatched) or 3-D input, got [%s]"):format(name,
      table.concat(input:size(), ", ")), 3)
  end
  if not input:is_floating_point() then
    error(("%s: expected a floating-point input, got %s"):format(name, input.dtype), 3)
  end
  if input:size(nd) ~= self.input_size then
    error(("%s: input [%s] has %d features, expected input_size=%d"):format(name,
      table.concat(input:size(), ", "), input:size(nd), self.input_size), 3)
  end
  if nd == 2 then return input:unsqueeze(2), false end
  if self.batch_first then return input:transpose(1, 2), true end
  return input, true
end

-- The initial states as lists of [B, H] tensors, one per layer and direction (zeros if hx is nil).
function RNNBase:_state(hx, B, batched, x)
  local name, H = self.__name, self.hidden_size
  local n = self.num_layers * (self.bidirectional and 2 or 1)
  local function split(t, what)
    if t == nil then
      local z = tide.zeros(B, H, { dtype = x.dtype, device = x.device })
      local out = {}
      for i = 1, n do out[i] = z end
      return out
    end
    if not tide.is_tensor(t) then
      error(("%s: %s must be a tensor, got %s"):format(name, what, type(t)), 4)
    end
    if not batched then t = t:unsqueeze(2) end
    local s = t:size()
    if #s ~= 3 or s[1] ~= n or s[2] ~= B or s[3] ~= H then
      error(("%s: %s has shape [%s], expected [%d, %d, %d] (layers*directions, batch, hidden)")
        :format(name, what, table.concat(t:size(), ", "), n, B, H), 4)
    end
    local out = {}
    for i = 1, n do out[i] = t:select(1, i) end
    return out
  end
  if self.mode == "LSTM" then
    if hx ~= nil and (type(hx) ~= "table" or tide.is_tensor(hx)) then
      error(name .. ": hx must be a pair {h_0, c_0}", 3)
    end
    hx = hx or {}
    return split(hx[1], "h_0"), split(hx[2], "c_0")
  end
  return split(hx, "h_0"), nil
end

-- All layers over x [T, B, in]: the last layer's output [T, B, H * directions] and the final
-- states. Each layer's steps are stacked into the next layer's input [T, B, H * directions].
function RNNBase:_layers(x, h0, c0, masks)
  local dirs = self.bidirectional and 2 or 1
  local hs, cs = {}, {}
  for l = 0, self.num_layers - 1 do
    if l > 0 and self.dropout > 0 and self.training then
      x = F.dropout(x, self.dropout, true)
    end
    local outs = {}
    for d = 1, dirs do
      local k = l * dirs + d
      local steps
      steps, hs[k], cs[k] = run_direction(self.mode, x, h0[k], c0 and c0[k],
                                          self:_weights(l, d), masks, d == 2)
      outs[d] = stack_steps(steps)
    end
    x = dirs == 2 and tide.cat(outs, 3) or outs[1]
  end
  return x, hs, cs
end

function RNNBase:extra_repr()
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  if not self.bias then s = s .. ", bias=false" end
  if self.batch_first then s = s .. ", batch_first=true" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. self.dropout end
  if self.bidirectional then s = s .. ", bidirectional=true" end
  return s
end

-- nn.RNN(input_size, hidden_size [, {num_layers=1, nonlinearity="tanh", bias=true,
-- batch_first=false, dropout=0, bidirectional=false, dtype=}])
local RNN = RNNBase:extend("RNN")
nn.RNN = RNN
function RNN:__init(input_size, hidden_size, opts)
  local act = type(opts) == "table" and opts.nonlinearity or "tanh"
  if act ~= "tanh" and act ~= "relu" then
    error("RNN: nonlinearity must be \"tanh\" or \"relu\", got " .. tostring(act), 2)
  end
  RNNBase.__init(self, act == "relu" and "RNN_RELU" or "RNN_TANH", "RNN", input_size,
                 hidden_size, opts)
  self.nonlinearity = act
end

-- nn.LSTM(input_size, hidden_size [, opts as nn.RNN's, without nonlinearity])
local LSTM = RNNBase:extend("LSTM")
nn.LSTM = LSTM
function LSTM:__init(input_size, hidden_size, opts)
  RNNBase.__init(self, "LSTM", "LSTM", input_size, hidden_size, opts)
end

-- nn.GRU(input_size, hidden_size [, opts as nn.LSTM's])
local GRU = RNNBase:extend("GRU")
nn.GRU = GRU
function GRU:__init(input_size, hidden_size, opts)
  RNNBase.__init(self, "GRU", "GRU", input_size, hidden_size, opts)
end

-- ---- cells --------------------------------------------------------------------------------------

local CellBase = Module:extend("RNNCellBase")

function CellBase:__init(mode, name, input_size, hidden_size, opts)
  Module.__init(self)
  opts = check_opts(opts, name, { bias = true, dtype = true, nonlinearity = name == "RNNCell" })
  self.mode = mode
  self.input_size = check_int(input_size, name, "input_size")
  self.hidden_size = check_int(hidden_size, name, "hidden_size")
  self.bias = opts.bias ~= false
  local G, H = GATES[mode] * self.hidden_size, self.hidden_size
  self:register_parameter("weight_ih", nn.Parameter(tide.empty(G, self.input_size, dtype_of(opts))))
  self:register_parameter("weight_hh", nn.Parameter(tide.empty(G, H, dtype_of(opts))))
  if self.bias then
    self:register_parameter("bias_ih", nn.Parameter(tide.empty(G, dtype_of(opts))))
    self:register_parameter("bias_hh", nn.Parameter(tide.empty(G, dtype_of(opts))))
  end
  reset_uniform(self, H)
end

function CellBase:reset_parameters()
  reset_uniform(self, self.hidden_size)
end

-- input [B, in] or [in]; hx [B, H] (a pair {h, c} for LSTMCell), zeros if nil. Returns h'
-- (h', c' for LSTMCell).
function CellBase:forward(input, hx)
  local name = self.__name
  if not tide.is_tensor(input) or (input:dim() ~= 1 and input:dim() ~= 2)
     or input:size(input:dim()) ~= self.input_size then
    error(("%s: expected an input [batch, %d] or [%d], got %s"):format(name, self.input_size,
      self.input_size, tide.is_tensor(input) and "[" .. table.concat(input:size(), ", ") .. "]"
      or type(input)), 2)
  end
  local batched = input:dim() == 2
  local x = batched and input or input:unsqueeze(1)
  local B, H = x:size(1), self.hidden_size
  local function state(t, what)
    if t == nil then return tide.zeros(B, H, { dtype = x.dtype, device = x.device }) end
    if not tide.is_tensor(t) then
      error(("%s: %s must be a tensor, got %s"):format(name, what, type(t)), 3)
    end
    if not batched then t = t:unsqueeze(1) end
    if t:dim() ~= 2 or t:size(1) ~= B or t:size(2) ~= H then
      error(("%s: %s has shape [%s], expected [%d, %d]"):format(name, what,
        table.concat(t:size(), ", "), B, H), 3)
    end
    return t
  end
  local h, c
  if self.mode == "LSTM" then
    hx = hx or {}
    h, c = state(hx[1], "h_0"), state(hx[2], "c_0")
  else
    h = state(hx, "hx")
  end
  local w = { ih = self.weight_ih, hh = self.weight_hh, b_ih = self.bias_ih, b_hh = self.bias_hh }
  local h1, c1 = step_of(self.mode)(input_product(self.mode, x, w), h, c, w)
  if not batched then
    h1, c1 = h1:squeeze(1), c1 and c1:squeeze(1)
  end
  return h1, c1
end

function CellBase:extra_repr()
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ", bias=false" end
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  return s
end

-- nn.RNNCell(input_size, hidden_size [, {bias=true, nonlinearity="tanh", dtype=}])
local RNNCell = CellBase:extend("RNNCell")
nn.RNNCell = RNNCell
function RNNCell:__init(input_size, hidden_size, opts)
  local act = type(opts) == "table" and opts.nonlinearity or "tanh"
  if act ~= "tanh" and act ~= "relu" then
    error("RNNCell: nonlinearity must be \"tanh\" or \"relu\", got " .. tostring(act), 2)
  end
  CellBase.__init(self, act == "relu" and "RNN_RELU" or "RNN_TANH", "RNNCell", input_size,
                  hidden_size, opts)
  self.nonlinearity = act
end

-- nn.LSTMCell(input_size, hidden_size [, {bias=true, dtype=}]): h', c' = cell(x, {h, c})
local LSTMCell = CellBase:extend("LSTMCell")
nn.LSTMCell = LSTMCell
function LSTMCell:__init(input_size, hidden_size, opts)
  CellBase.__init(self, "LSTM", "LSTMCell", input_size, hidden_size, opts)
end

-- nn.GRUCell(input_size, hidden_size [, {bias=true, dtype=}])
local GRUCell = CellBase:extend("GRUCell")
nn.GRUCell = GRUCell
function GRUCell:__init(input_size, hidden_size, opts)
  CellBase.__init(self, "GRU", "GRUCell", input_size, hidden_size, opts)
end

-- ---- nn.utils.rnn -------------------------------------------------------------------------------

local utils_rnn = {}
nn.utils.rnn = utils_rnn

-- pack_padded_sequence(input, lengths [, {batch_first=false, enforce_sorted=true}]): the padded
-- input with its lengths, for an RNN to read only each sequence's valid steps.
function utils_rnn.pack_padded_sequence(input, lengths, opts)
  opts = check_opts(opts, "pack_padded_sequence", { batch_first = true, enforce_sorted = true })
  if not tide.is_tensor(input) or input:dim() < 2 then
    error("pack_padded_sequence: expected a padded input tensor of at least 2 dims", 2)
  end
  local bf = opts.batch_first == true
  local T, B = input:size(bf and 2 or 1), input:size(bf and 1 or 2)
  local lens = lengths_list("pack_padded_sequence", lengths, T, B)
  if opts.enforce_sorted ~= false then
    for i = 2, #lens do
      if lens[i] > lens[i - 1] then
        error("pack_padded_sequence: lengths must be sorted in decreasing order "
          .. "(or pass enforce_sorted=false)", 2)
      end
    end
  end
  return { data = input, lengths = lens, batch_first = bf }
end

-- pad_packed_sequence(sequence [, {batch_first=false, padding_value=0, total_length=}]):
-- the padded tensor (padded positions hold padding_value) and the lengths as an int64 tensor.
function utils_rnn.pad_packed_sequence(seq, opts)
  opts = check_opts(opts, "pad_packed_sequence", { batch_first = true, padding_value = true,
                                                    total_length = true })
  if type(seq) ~= "table" or not tide.is_tensor(seq.data) or seq.lengths == nil then
    error("pad_packed_sequence: expected a sequence from pack_padded_sequence or an RNN", 2)
  end
  local x = seq.data
  if seq.batch_first then x = x:transpose(1, 2) end -- [T, B, ...]
  local T, maxlen = x:size(1), 0
  for _, n in ipairs(seq.lengths) do maxlen = math.max(maxlen, n) end
  local total = opts.total_length or maxlen
  if total < maxlen then
    error(("pad_packed_sequence: total_length %d is below the longest length %d"):format(
      total, maxlen), 2)
  end
  x = x:narrow(1, 1, math.min(T, total))
  local masks = step_masks(seq.lengths, x:size(1), x.device)
  local shape = { x:size(1), x:size(2) } -- the masks as [T, B, 1, ...], broadcast over x
  for _ = 3, x:dim() do shape[#shape + 1] = 1 end
  local m = stack_steps(masks):reshape(shape)
  local fill = opts.padding_value or 0
  x = tide.where(m, x, tide.full_like(x, fill))
  if total > x:size(1) then
    local pad_shape = x:size()
    pad_shape[1] = total - x:size(1)
    x = tide.cat({ x, tide.full(pad_shape, fill, { dtype = x.dtype, device = x.device }) }, 1)
  end
  if opts.batch_first then x = x:transpose(1, 2) end
  return x, tide.tensor(seq.lengths, { dtype = "int64" })
end

end

return rnn
