-- tide.optim.LBFGS: limited-memory BFGS as PyTorch 1.13's (the same iteration, the same
-- optional strong-Wolfe line search, the same stopping tests), on all parameters seen as one
-- flat vector. tide.optim installs it:  require("tide.optim.lbfgs").install(optim, make_class)
--
--   local opt = optim.LBFGS(model:parameters(), {lr = 1, line_search_fn = "strong_wolfe"})
--   opt:step(function() opt:zero_grad(); local l = loss_fn(); l:backward(); return l end)
--
-- step(closure) calls the closure (with grad enabled) up to max_eval times, and reads the loss
-- and a few dot products back as numbers each iteration: the search directions depend on them,
-- so a traced step breaks the graph there. The state (history of steps and gradient changes)
-- is kept under the first parameter, as PyTorch's.
local tide = require "tide"

local lbfgs = {}

-- The minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to bounds (default:
-- the interval between x1 and x2); the bounds' middle when the cubic has no minimum.
local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
  if lo == nil then lo, hi = math.min(x1, x2), math.max(x1, x2) end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 * d1 - g1 * g2
  if d2_square < 0 then return (lo + hi) / 2 end
  local d2 = math.sqrt(d2_square)
  local pos
  if x1 <= x2 then
    pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
  else
    pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
  end
  return math.min(math.max(pos, lo), hi)
end
lbfgs.cubic_interpolate = cubic_interpolate

local function dot(a, b) return (a * b):sum():item() end
local function absmax(a) return a:abs():max():item() end

-- Bracketing phase: from step t, widen until a bracket [t_prev, t] holds a point meeting the
-- strong Wolfe conditions, or t itself meets them. ls = the search's running record.
local function wolfe_bracket(ls, obj, t, f, gtd)
  local f_new, g_new = obj(t)
  local gtd_new = dot(g_new, ls.d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, ls.g, gtd
  ls.evals, ls.iter = 1, 0
  while ls.iter < ls.max_ls do
    if f_new > f + ls.c1 * t * gtd or (ls.iter > 1 and f_new >= f_prev) then
      return { t_prev, t }, { f_prev, f_new }, { g_prev, g_new }, { gtd_prev, gtd_new }, false
    end
    if math.abs(gtd_new) <= -ls.c2 * gtd then
      return { t }, { f_new }, { g_new }, { gtd_new }, true
    end
    if gtd_new >= 0 then
      return { t_prev, t }, { f_prev, f_new }, { g_prev, g_new }, { gtd_prev, gtd_new }, false
    end
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                          t + 0.01 * (t - t_prev), t * 10)
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
    f_new, g_new = obj(t)
    gtd_new = dot(g_new, ls.d)
    ls.evals, ls.iter = ls.evals + 1, ls.iter + 1
  end
  return { 0, t }, { f, f_new }, { ls.g, g_new }, { gtd, gtd_new }, false
end

-- Zoom phase: shrink the bracket by cubic interpolation until a point meets the conditions.
local function wolfe_zoom(ls, obj, f, gtd, b, bf, bg, bgtd, done)
  local insuf_progress = false
  local low, high = 1, 2
  if bf[1] > bf[#bf] then low, high = 2, 1 end
  while not done and ls.iter < ls.max_ls do
    if math.abs(b[2] - b[1]) * ls.d_norm < ls.tolerance_change then break end
    local t = cubic_interpolate(b[1], bf[1], bgtd[1], b[2], bf[2], bgtd[2])
    local bmax, bmin = math.max(b[1], b[2]), math.min(b[1], b[2])
    local eps = 0.1 * (bmax - bmin)
    if math.min(bmax - t, t - bmin) < eps then -- too near an end: move away unless progressing
      if insuf_progress or t >= bmax or t <= bmin then
        t = math.abs(t - bmax) < math.abs(t - bmin) and bmax - eps or bmin + eps
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    local f_new, g_new = obj(t)
    local gtd_new = dot(g_new, ls.d)
    ls.evals, ls.iter = ls.evals + 1, ls.iter + 1
    if f_new > f + ls.c1 * t * gtd or f_new >= bf[low] then
      b[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new, gtd_new
      if bf[1] <= bf[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -ls.c2 * gtd then
        done = true
      elseif gtd_new * (b[high] - b[low]) >= 0 then
        b[high], bf[high], bg[high], bgtd[high] = b[low], bf[low], bg[low], bgtd[low]
      end
      b[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new, gtd_new
    end
  end
  return bf[low], bg[low], b[low]
end

-- A step t along d satisfying the strong Wolfe conditions (c1 = 1e-4, c2 = 0.9, at most 25
-- evaluations): returns the loss and flat gradient there, t, and the evaluations used.
local function strong_wolfe(obj, t, d, f, g, gtd, tolerance_change)
  local ls = { d = d, g = g, c1 = 1e-4, c2 = 0.9, max_ls = 25, d_norm = absmax(d),
               tolerance_change = tolerance_change }
  local b, bf, bg, bgtd, done = wolfe_bracket(ls, obj, t, f, gtd)
  local f_new, g_new, t_new = wolfe_zoom(ls, obj, f, gtd, b, bf, bg, bgtd, done)
  return f_new, g_new, t_new, ls.evals
end
lbfgs.strong_wolfe = strong_wolfe

function lbfgs.install(optim, make_class)

local LBFGS = make_class("LBFGS", function(o)
  local d = { lr = 1, max_iter = 20, max_eval = false, tolerance_grad = 1e-7,
              tolerance_change = 1e-9, history_size = 100, line_search_fn = false }
  for k, v in pairs(o) do
    if d[k] == nil then error("LBFGS: unknown option '" .. tostring(k) .. "'", 3) end
    d[k] = v
  end
  if d.line_search_fn and d.line_search_fn ~= "strong_wolfe" then
    error("LBFGS: line_search_fn must be nil or \"strong_wolfe\", got "
      .. tostring(d.line_search_fn), 3)
  end
  if math.type(d.max_iter) ~= "integer" or d.max_iter < 1 then
    error("LBFGS: max_iter must be a positive integer, got " .. tostring(d.max_iter), 3)
  end
  if not d.max_eval then d.max_eval = d.max_iter * 5 // 4 end
  return d
end, nil)
optim.LBFGS = LBFGS

function LBFGS:_params()
  if #self.param_groups ~= 1 then
    error("LBFGS: doesn't support per-parameter options (parameter groups)", 3)
  end
  return self.param_groups[1].params
end

-- All gradients as one flat vector (zeros for a parameter without one).
function LBFGS:_flat_grad()
  local parts = {}
  for i, p in ipairs(self:_params()) do
    local g = p.grad
    parts[i] = g and g:reshape(-1) or tide.zeros(p:numel(), { dtype = p.dtype, device = p.device })
  end
  return tide.cat(parts, 1)
end

-- params += t * d (d flat).
function LBFGS:_add_dir(t, d)
  local off = 0
  for _, p in ipairs(self:_params()) do
    local n = p:numel()
    p:copy_(p + d:narrow(1, off + 1, n):view(p:size()) * t)
    off = off + n
  end
end

function LBFGS:_set_params(values)
  for i, p in ipairs(self:_params()) do p:copy_(values[i]) end
end

local function eval_loss(closure)
  local loss = tide.enable_grad(closure)
  return tide.is_tensor(loss) and loss:item() or loss
end

-- As Optimizer's, but the flat vectors (d, prev_flat_grad, the history lists) span all the
-- parameters: they are kept as they are, not shaped like the first parameter.
function LBFGS:load_state_dict(sd, metadata)
  if type(sd) == "table" and sd.param_groups == nil then
    local nested = optim.unflatten(sd)
    if metadata then optim.unflatten(metadata, nested) end
    sd = nested
  end
  if type(sd) ~= "table" then
    error("LBFGS: load_state_dict expects a table, got " .. type(sd), 2)
  end
  local plain, flat = { param_groups = sd.param_groups, state = {} }, {}
  for i, st in pairs(sd.state or {}) do
    plain.state[i], flat[i] = {}, {}
    for k, v in pairs(st) do
      local vector = type(v) == "table" or (tide.is_tensor(v) and v:dim() > 0)
      if vector then flat[i][k] = v else plain.state[i][k] = v end
    end
  end
  optim.Optimizer.load_state_dict(self, plain)
  local p = self.param_groups[1].params[1]
  for k, v in pairs(flat[1] or {}) do
    if tide.is_tensor(v) then v = v:clone() end
    if type(v) == "table" then -- a history list: tensors, or numbers (ro)
      local copy = {}
      for j, e in pairs(v) do copy[j] = tide.is_tensor(e) and e:clone() or e end
      v = copy
    end
    self.state[p][k] = v
  end
end

-- The two-loop recursion: the quasi-Newton direction -H g from the stored history.
local function direction(st, flat_grad, history_size)
  local y = flat_grad - st.prev_flat_grad
  local s = st.d * st.t
  local ys = dot(y, s)
  if ys > 1e-10 then -- keep the pair only when the curvature condition holds
    if #st.old_dirs == history_size then
      table.remove(st.old_dirs, 1); table.remove(st.old_stps, 1); table.remove(st.ro, 1)
    end
    st.old_dirs[#st.old_dirs + 1] = y
    st.old_stps[#st.old_stps + 1] = s
    st.ro[#st.ro + 1] = 1 / ys
    st.H_diag = ys / dot(y, y)
  end
  local al, q = {}, -flat_grad
  for i = #st.old_dirs, 1, -1 do
    al[i] = dot(st.old_stps[i], q) * st.ro[i]
    q = q - st.old_dirs[i] * al[i]
  end
  local r = q * st.H_diag
  for i = 1, #st.old_dirs do
    local be_i = dot(st.old_dirs[i], r) * st.ro[i]
    r = r + st.old_stps[i] * (al[i] - be_i)
  end
  return r
end

-- One L-BFGS step of up to max_iter iterations; closure() clears the gradients, computes the
-- loss, calls backward and returns the loss. Returns the first evaluation's loss.
function LBFGS:step(closure)
  if type(closure) ~= "function" then
    error("LBFGS: step needs a closure that reevaluates the model and returns the loss", 2)
  end
  local g = self.param_groups[1]
  local params = self:_params()
  local st = self.state[params[1]]
  if st == nil then
    st = { func_evals = 0, n_iter = 0 }
    self.state[params[1]] = st
  end
  local orig_loss = tide.enable_grad(closure)
  local loss = tide.is_tensor(orig_loss) and orig_loss:item() or orig_loss
  st.func_evals = st.func_evals + 1
  tide.no_grad(function() self:_iterate(closure, g, st, loss) end)
  return orig_loss
end

-- Whether an iteration's result ends the step (PyTorch's tests, in its order).
local function converged(g, n_iter, evals, opt_cond, d, t, loss, prev_loss)
  return n_iter == g.max_iter or evals >= g.max_eval or opt_cond
      or absmax(d * t) <= g.tolerance_change or math.abs(loss - prev_loss) < g.tolerance_change
end

function LBFGS:_iterate(closure, g, st, loss)
  local flat_grad = self:_flat_grad()
  if absmax(flat_grad) <= g.tolerance_grad then return end
  local n_iter, evals = 0, 1
  while n_iter < g.max_iter do
    n_iter, st.n_iter = n_iter + 1, st.n_iter + 1
    if st.n_iter == 1 then
      st.d, st.old_dirs, st.old_stps, st.ro, st.H_diag = -flat_grad, {}, {}, {}, 1
    else
      st.d = direction(st, flat_grad, g.history_size)
    end
    st.prev_flat_grad, st.prev_loss = flat_grad:clone(), loss
    local t = g.lr
    if st.n_iter == 1 then t = math.min(1, 1 / flat_grad:abs():sum():item()) * g.lr end
    st.t = t
    local gtd = dot(flat_grad, st.d)
    if gtd > -g.tolerance_change then break end -- not a descent direction
    local ls_evals, opt_cond = 0, false
    if g.line_search_fn == "strong_wolfe" then
      local x0 = {}
      for i, p in ipairs(self:_params()) do x0[i] = p:clone() end
      local function obj(step) -- loss and gradient at x0 + step * d
        self:_add_dir(step, st.d)
        local l = eval_loss(closure)
        local fg = self:_flat_grad()
        self:_set_params(x0)
        return l, fg
      end
      loss, flat_grad, t, ls_evals = strong_wolfe(obj, t, st.d, loss, flat_grad, gtd,
                                                  g.tolerance_change)
      self:_add_dir(t, st.d)
      opt_cond = absmax(flat_grad) <= g.tolerance_grad
    else
      self:_add_dir(t, st.d)
      if n_iter ~= g.max_iter then
        loss = eval_loss(closure)
        flat_grad = self:_flat_grad()
        opt_cond = absmax(flat_grad) <= g.tolerance_grad
        ls_evals = 1
      end
    end
    st.t = t
    evals, st.func_evals = evals + ls_evals, st.func_evals + ls_evals
    if converged(g, n_iter, evals, opt_cond, st.d, t, loss, st.prev_loss) then break end
  end
end

end

return lbfgs
