-- F.grid_sample as a composite of tide ops (installed into tide.nn.functional).
--
-- input [N, C, H, W], grid [N, Ho, Wo, 2] holding (x, y) in [-1, 1]. Each coordinate is mapped
-- to pixels as PyTorch does (align_corners: -1 and 1 are the corner pixels' centres; else the
-- image's outer edges), clipped to the image with padding_mode "border". Bilinear sampling
-- gathers the four neighbours from the input viewed [N, C, H*W] and weighs them; "zeros" padding
-- drops neighbours outside the image; nearest rounds half to even (nearbyint, as PyTorch). The
-- gradient reaches the input through gather and the grid through the weights.
local tide = require "tide"

local G = {}

local function unnormalize(g, size, align_corners, padding_mode)
  local c
  if align_corners then
    c = (g + 1) * ((size - 1) / 2)
  else
    c = ((g + 1) * size - 1) / 2
  end
  if padding_mode == "border" then c = tide.clamp(c, 0, size - 1) end
  return c
end

-- The input's values at integer pixels (ix, iy) [N, Ho, Wo] (int64, 0-based), 0 outside.
local function pick(flat, ix, iy, h, w, c, weight)
  local n = flat:size(1)
  local inside = ix:ge(0):logical_and(ix:le(w - 1)):logical_and(iy:ge(0)):logical_and(iy:le(h - 1))
  local pos = tide.clamp(iy, 0, h - 1) * w + tide.clamp(ix, 0, w - 1) + 1
  local index = pos:reshape(n, 1, -1):expand(n, c, pos:numel() // n)
  local v = flat:gather(3, index)
  local wt = tide.where(inside, weight, weight * 0):reshape(n, 1, -1)
  return v * wt
end

local modes = { bilinear = true, nearest = true }
local paddings = { zeros = true, border = true }

-- F.grid_sample(input, grid [, {mode="bilinear", padding_mode="zeros", align_corners=false}])
function G.grid_sample(input, grid, opts)
  opts = opts or {}
  local mode, padding = opts.mode or "bilinear", opts.padding_mode or "zeros"
  if not (tide.is_tensor(input) and tide.is_tensor(grid)) then
    error("grid_sample: input and grid must be tensors", 2)
  end
  if not modes[mode] then
    error(("grid_sample: mode must be \"bilinear\" or \"nearest\", got %q"):format(tostring(mode)), 2)
  end
  if not paddings[padding] then
    error(("grid_sample: padding_mode must be \"zeros\" or \"border\", got %q"):format(
      tostring(padding)), 2)
  end
  local gs = grid:size()
  if input:dim() ~= 4 or grid:dim() ~= 4 or gs[4] ~= 2 or gs[1] ~= input:size(1) then
    error(("grid_sample: expected input [N, C, H, W] and grid [N, Ho, Wo, 2], got [%s] and [%s]")
      :format(table.concat(input:size(), ", "), table.concat(gs, ", ")), 2)
  end
  if input.dtype ~= grid.dtype then
    error(("grid_sample: input is %s but grid is %s"):format(input.dtype, grid.dtype), 2)
  end
  local n, c, h, w = table.unpack(input:size())
  local ac = opts.align_corners == true
  local x = unnormalize(grid:select(4, 1), w, ac, padding)
  local y = unnormalize(grid:select(4, 2), h, ac, padding)
  local flat = input:reshape(n, c, h * w)
  local out
  if mode == "nearest" then
    local ix, iy = tide.round(x:detach()):long(), tide.round(y:detach()):long()
    out = pick(flat, ix, iy, h, w, c, x:detach() * 0 + 1)
  else
    local x0f, y0f = tide.floor(x:detach()), tide.floor(y:detach())
    local wx1, wy1 = x - x0f, y - y0f
    local wx0, wy0 = 1 - wx1, 1 - wy1
    local x0, y0 = x0f:long(), y0f:long()
    local x1, y1 = x0 + 1, y0 + 1
    out = pick(flat, x0, y0, h, w, c, wx0 * wy0) + pick(flat, x1, y0, h, w, c, wx1 * wy0) +
          pick(flat, x0, y1, h, w, c, wx0 * wy1) + pick(flat, x1, y1, h, w, c, wx1 * wy1)
  end
  return out:reshape(n, c, gs[2], gs[3])
end

function G.install(S)
  S.grid_sample = G.grid_sample
end

return G
