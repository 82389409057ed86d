-- test_linalg_ops.lua — issue 24's linear algebra, shape, indexing ops, einsum and normal from
-- Lua: known answers (small inputs worked by hand or by plain Lua loops), gradients against
-- central finite differences in float64, the jit against eager (bitwise: the same kernels in the
-- same order), Vulkan against the CPU, and errors that name the op and the shapes.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"

tide.manual_seed(24)

local function T(v, dt) return tide.tensor(v, { dtype = dt or "float64" }) end

H.test("linear algebra: known answers", function()
  local a = T({ { 1, 2 }, { 3, 4 } })
  local b = T({ { 5, 6 }, { 7, 8 } })
  -- a @ b = {{19, 22}, {43, 50}}
  H.values(tide.addmm(T({ 1, 1 }), a, b), { { 20, 23 }, { 44, 51 } }, 0)
  H.values(tide.addmm(T({ 1, 1 }), a, b, { beta = 2, alpha = 0.5 }), { { 11.5, 13 }, { 23.5, 27 } }, 0)
  H.values(a:addmm(a, b, { beta = 0 }), { { 19, 22 }, { 43, 50 } }, 0, "beta 0 ignores input")
  H.values(tide.addmv(T({ 1, 2 }), a, T({ 1, 1 })), { 4, 9 }, 0)
  local b1, b2 = T({ { { 1, 2 } }, { { 3, 4 } } }), T({ { { 1 }, { 1 } }, { { 2 }, { 2 } } })
  H.values(tide.baddbmm(T({ 10 }), b1, b2), { { { 13 } }, { { 24 } } }, 0)
  H.values(tide.addbmm(T({ { 10 } }), b1, b2, { alpha = 2 }), { { 10 + 2 * (3 + 14) } }, 0)
  H.values(tide.outer(T({ 1, 2 }), T({ 3, 4, 5 })), { { 3, 4, 5 }, { 6, 8, 10 } }, 0)
  H.values(tide.cross(T({ 1, 0, 0 }), T({ 0, 1, 0 })), { 0, 0, 1 }, 0)
  H.values(tide.cross(T({ { 1, 2, 3 }, { 0, 0, 1 } }), T({ { 4, 5, 6 }, { 1, 0, 0 } }), 2),
    { { -3, 6, -3 }, { 0, 1, 0 } }, 0)
  local m = tide.arange(1, 10):reshape(3, 3):double()
  H.values(tide.diag(m), { 1, 5, 9 }, 0)
  H.values(tide.diag(m, 1), { 2, 6 }, 0)
  H.values(tide.diag(m, -2), { 7 }, 0)
  H.values(tide.diag(T({ 1, 2 }), -1), { { 0, 0, 0 }, { 1, 0, 0 }, { 0, 2, 0 } }, 0)
  H.values(m:diagonal(), { 1, 5, 9 }, 0)
  H.values(m:diagonal(-1), { 4, 8 }, 0)
  local c = tide.arange(0, 24):reshape(2, 3, 4)
  H.values(c:diagonal(0, 2, 3), { { 0, 5, 10 }, { 12, 17, 22 } }, 0, "batched diagonal")
  H.values(c:diagonal(1, 1, 3), { { 1, 14 }, { 5, 18 }, { 9, 22 } }, 0, "dims 1 and 3")
  H.eq(tide.trace(m):item(), 15)
  H.values(tide.diag_embed(T({ { 1, 2 } })), { { { 1, 0 }, { 0, 2 } } }, 0)
  H.values(tide.kron(T({ { 1, 2 }, { 3, 4 } }), T({ { 0, 1 }, { 1, 0 } })),
    { { 0, 1, 0, 2 }, { 1, 0, 2, 0 }, { 0, 3, 0, 4 }, { 3, 0, 4, 0 } }, 0)
  H.values(tide.tensordot(tide.ones(2, 3, 4), tide.ones(3, 4, 5)), H.build({ 2, 5 }, function() return 12 end), 0)
  H.values(tide.tensordot(a, b, { { 1 }, { 1 } }), { { 26, 30 }, { 38, 44 } }, 0, "a^T b")
  H.values(tide.tensordot(a, b, 0), H.build({ 2, 2, 2, 2 }, function(i, j, k, l)
    return a:totable()[i][j] * b:totable()[k][l] end), 0, "outer product")
  local p, q = T({ { 0, 0 }, { 3, 4 } }), T({ { 0, 0 }, { 1, 1 } })
  H.values(tide.cdist(p, q), { { 0, math.sqrt(2) }, { 5, math.sqrt(13) } }, 1e-15)
  H.values(tide.cdist(p, q, 1), { { 0, 2 }, { 7, 5 } }, 0)
  H.values(tide.cdist(p, q, math.huge), { { 0, 1 }, { 4, 3 } }, 0)
  H.values(tide.cdist(p, q, 0), { { 0, 2 }, { 2, 2 } }, 0)
  H.values(tide.cdist(p, q, 3), { { 0, 2 ^ (1 / 3) }, { 91 ^ (1 / 3), 35 ^ (1 / 3) } }, 1e-14)
  H.values(tide.block_diag(T({ { 1, 2 } }), T(3), T({ 4, 5 })),
    { { 1, 2, 0, 0, 0 }, { 0, 0, 3, 0, 0 }, { 0, 0, 0, 4, 5 } }, 0)
end)

H.test("diagonal and unfold are views; writes show through", function()
  local m = tide.zeros(3, 3)
  local d = m:diagonal()
  d:copy_(tide.tensor({ 1, 2, 3 }))
  H.values(m, { { 1, 0, 0 }, { 0, 2, 0 }, { 0, 0, 3 } }, 0)
  local x = tide.arange(1, 8):double()
  local u = x:unfold(1, 3, 2)
  H.values(u, { { 1, 2, 3 }, { 3, 4, 5 }, { 5, 6, 7 } }, 0)
  H.values(tide.arange(0, 12):reshape(3, 4):unfold(2, 2, 2), { { { 0, 1 }, { 2, 3 } },
    { { 4, 5 }, { 6, 7 } }, { { 8, 9 }, { 10, 11 } } }, 0)
  H.values(tide.arange(0, 6):reshape(2, 3):unfold(1, 2, 1), { { { 0, 3 }, { 1, 4 }, { 2, 5 } } }, 0, "dim 1")
end)

H.test("shape ops: known answers", function()
  H.values(tide.tile(T({ 1, 2 }), 2, 2), { { 1, 2, 1, 2 }, { 1, 2, 1, 2 } }, 0)
  H.values(T({ { 1 }, { 2 } }):tile({ 2 }), { { 1, 1 }, { 2, 2 } }, 0, "short reps")
  H.values(tide.roll(tide.arange(1, 6), 2), { 4, 5, 1, 2, 3 }, 0)
  H.values(tide.roll(tide.arange(1, 6), -1), { 2, 3, 4, 5, 1 }, 0)
  local m = tide.arange(1, 7):reshape(2, 3)
  H.values(m:roll(1), { { 6, 1, 2 }, { 3, 4, 5 } }, 0, "flattened")
  H.values(m:roll({ 1, -1 }, { 1, 2 }), { { 5, 6, 4 }, { 2, 3, 1 } }, 0, "two dims")
  H.values(tide.repeat_interleave(T({ 1, 2 }), 2), { 1, 1, 2, 2 }, 0)
  H.values(m:repeat_interleave(2, 1), { { 1, 2, 3 }, { 1, 2, 3 }, { 4, 5, 6 }, { 4, 5, 6 } }, 0)
  H.values(m:repeat_interleave(tide.tensor({ 0, 1, 2 }), 2), { { 2, 3, 3 }, { 5, 6, 6 } }, 0)
  H.values(m:repeat_interleave(tide.tensor(2)), { 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6 }, 0)
  local u = m:unbind(2)
  H.eq(#u, 3)
  H.values(u[2], { 2, 5 }, 0)
  H.eq(tide.movedim(tide.ones(2, 3, 4), 1, 3):size(), { 3, 4, 2 })
  H.eq(tide.movedim(tide.ones(2, 3, 4), { 1, 2 }, { 3, 1 }):size(), { 3, 4, 2 })
  H.eq(tide.moveaxis(tide.ones(2, 3, 4), -1, 1):size(), { 4, 2, 3 })
  H.values(m:swapaxes(1, 2), { { 1, 4 }, { 2, 5 }, { 3, 6 } }, 0)
  H.values(m:swapdims(2, 1), { { 1, 4 }, { 2, 5 }, { 3, 6 } }, 0)
  H.values(T({ 1, 2 }):broadcast_to(2, 2), { { 1, 2 }, { 1, 2 } }, 0)
  local v1, v2 = T({ 1, 2 }), T({ 3, 4 })
  H.values(tide.vstack({ v1, v2 }), { { 1, 2 }, { 3, 4 } }, 0)
  H.values(tide.hstack({ v1, v2 }), { 1, 2, 3, 4 }, 0)
  H.values(tide.hstack({ m, m }), { { 1, 2, 3, 1, 2, 3 }, { 4, 5, 6, 4, 5, 6 } }, 0)
  H.values(tide.dstack({ v1, v2 }), { { { 1, 3 }, { 2, 4 } } }, 0)
  H.values(tide.column_stack({ v1, v2, T({ { 5 }, { 6 } }) }), { { 1, 3, 5 }, { 2, 4, 6 } }, 0)
  local s = tide.tensor_split(tide.arange(1, 8), 3)
  H.eq(#s, 3)
  H.values(s[1], { 1, 2, 3 }, 0)
  H.values(s[3], { 6, 7 }, 0)
  s = tide.arange(1, 8):tensor_split({ 1, 4 })
  H.values(s[1], { 1 }, 0)
  H.values(s[2], { 2, 3, 4 }, 0)
  H.values(s[3], { 5, 6, 7 }, 0)
  s = m:split_with_sizes({ 1, 2 }, 2)
  H.values(s[2], { { 2, 3 }, { 5, 6 } }, 0)
  H.values(tide.rot90(m), { { 3, 6 }, { 2, 5 }, { 1, 4 } }, 0)
  H.values(m:rot90(2), { { 6, 5, 4 }, { 3, 2, 1 } }, 0)
  H.values(m:rot90(-1), { { 4, 1 }, { 5, 2 }, { 6, 3 } }, 0)
  H.values(m:rot90(1, { 2, 1 }), { { 4, 1 }, { 5, 2 }, { 6, 3 } }, 0, "dims swapped")
  H.values(m:fliplr(), { { 3, 2, 1 }, { 6, 5, 4 } }, 0)
  H.values(m:flipud(), { { 4, 5, 6 }, { 1, 2, 3 } }, 0)
  local X, Y = tide.meshgrid(T({ 1, 2 }), T({ 3, 4, 5 }))
  H.values(X, { { 1, 1, 1 }, { 2, 2, 2 } }, 0)
  H.values(Y, { { 3, 4, 5 }, { 3, 4, 5 } }, 0)
  X, Y = tide.meshgrid({ T({ 1, 2 }), T({ 3, 4, 5 }) }, { indexing = "xy" })
  H.values(X, { { 1, 2 }, { 1, 2 }, { 1, 2 } }, 0)
  H.values(Y, { { 3, 3 }, { 4, 4 }, { 5, 5 } }, 0)
  H.values(tide.cartesian_prod(T({ 1, 2 }), T({ 3, 4 })), { { 1, 3 }, { 1, 4 }, { 2, 3 }, { 2, 4 } }, 0)
  H.eq(tide.atleast_1d(T(1)):size(), { 1 })
  H.eq(tide.atleast_2d(T({ 1, 2 })):size(), { 1, 2 })
  H.eq(tide.atleast_3d(T({ 1, 2 })):size(), { 1, 2, 1 })
  H.eq(tide.atleast_3d(m):size(), { 2, 3, 1 })
  H.eq(tide.atleast_2d(m):size(), { 2, 3 })
end)

H.test("indexing ops: known answers (1-based index values)", function()
  local m = tide.arange(1, 10):reshape(3, 3):double()
  H.values(tide.masked_select(m, m:gt(6)), { 7, 8, 9 }, 0)
  H.values(m:masked_select(tide.tensor({ true, false, true })), { 1, 3, 4, 6, 7, 9 }, 0, "broadcast mask")
  H.eq(m:masked_select(m:gt(100)):size(), { 0 })
  H.values(m:take(tide.tensor({ { 1, 9 }, { 5, 2 } })), { { 1, 9 }, { 5, 2 } }, 0)
  local z = tide.zeros(2, 3):double()
  H.values(z:scatter(2, tide.tensor({ { 3, 1 }, { 2, 2 } }), T({ { 7, 8 }, { 9, 10 } })),
    { { 8, 0, 7 }, { 0, 10, 0 } }, 0, "replace; of a repeated index the last source wins")
  H.values(z:scatter(1, tide.tensor({ { 2, 1, 2 } }), 5), { { 0, 5, 0 }, { 5, 0, 5 } }, 0, "value")
  H.values(tide.ones(2, 3):double():scatter(2, tide.tensor({ { 1, 1 }, { 3, 2 } }),
    T({ { 2, 3 }, { 4, 5 } }), { reduce = "add" }), { { 6, 1, 1 }, { 1, 6, 5 } }, 0)
  H.values(tide.ones(2, 3):double():scatter(2, tide.tensor({ { 1, 1 }, { 3, 2 } }),
    T({ { 2, 3 }, { 4, 5 } }), { reduce = "multiply" }), { { 6, 1, 1 }, { 1, 5, 4 } }, 0)
  H.values(tide.ones(3, 2):double():scatter(1, tide.tensor({ { 3 } }), 4, { reduce = "multiply" }),
    { { 1, 1 }, { 1, 1 }, { 4, 1 } }, 0, "index smaller than the input")
  H.values(z:index_add(2, tide.tensor({ 1, 3, 1 }), T({ { 1, 2, 3 }, { 4, 5, 6 } })),
    { { 4, 0, 2 }, { 10, 0, 5 } }, 0)
  H.values(z:index_add(1, tide.tensor({ 2 }), T({ { 1, 2, 3 } }), { alpha = 2 }),
    { { 0, 0, 0 }, { 2, 4, 6 } }, 0)
  H.values(z:index_copy(2, tide.tensor({ 3, 1 }), T({ { 1, 2 }, { 3, 4 } })), { { 2, 0, 1 }, { 4, 0, 3 } }, 0)
  H.values(z:index_fill(2, tide.tensor({ 1, 3 }), -1), { { -1, 0, -1 }, { -1, 0, -1 } }, 0)
  local w = tide.zeros(2, 2)
  H.eq(rawequal(w:index_fill_(1, tide.tensor({ 2 }), 3), w), true, "in place returns self")
  H.values(w, { { 0, 0 }, { 3, 3 } }, 0)
  w:index_add_(2, tide.tensor({ 1 }), tide.ones(2, 1))
  H.values(w, { { 1, 0 }, { 4, 3 } }, 0)
  w:index_copy_(1, tide.tensor({ 1 }), tide.full({ 1, 2 }, 9))
  H.values(w, { { 9, 9 }, { 4, 3 } }, 0)
  w:scatter_(2, tide.tensor({ { 2 }, { 1 } }), 0)
  H.values(w, { { 9, 0 }, { 0, 3 } }, 0)
  -- where broadcasts all three arguments
  local c = tide.tensor({ { true }, { false } })
  H.values(tide.where(c, T({ 1, 2, 3 }), T({ { 10 }, { 20 } })), { { 1, 2, 3 }, { 20, 20, 20 } }, 0)
end)

H.test("normal: tensors or numbers, seeded like the other random ops", function()
  tide.manual_seed(5)
  local a = tide.normal(tide.zeros(1000), tide.ones(1000))
  tide.manual_seed(5)
  local b = tide.randn(1000)
  H.ok(tide.equal(a, b), "normal(0, 1) draws randn's numbers")
  tide.manual_seed(5)
  local c = tide.normal(T({ 1, 2 }), 3)
  tide.manual_seed(5)
  local r = tide.randn(2):double()
  H.values(c, { 1 + 3 * r:totable()[1], 2 + 3 * r:totable()[2] }, 1e-7, "mean + std * z")
  local d = tide.normal(2, 0.5, { 20000 })
  H.eq(d:size(), { 20000 })
  -- sample mean of 20000 N(2, 0.25) draws: standard error 0.0035, so 0.02 is > 5 sigma
  H.near(d:mean():item(), 2, 0.01)
  H.near(((d - d:mean()) ^ 2):mean():sqrt():item(), 0.5, 0.02)
  H.eq(tide.normal(0, 1, { 2, 3 }, { dtype = "float64" }).dtype, "float64")
end)

H.test("einsum: PyTorch's equations against matmul and loops", function()
  local a, b = tide.randn(3, 4):double(), tide.randn(4, 5):double()
  local function close(x, y, what) H.ok(tide.allclose and tide.allclose(x, y, 1e-12, 1e-12) or
    (x - y):abs():max():item() < 1e-12, what) end
  close(tide.einsum("ij,jk->ik", a, b), a:matmul(b), "matmul")
  close(tide.einsum("ij,jk", a, b), a:matmul(b), "implicit output")
  close(tide.einsum("ij,jk->ki", { a, b }), a:matmul(b):t(), "permuted output, list form")
  close(tide.einsum("ij->ji", a), a:t(), "transpose")
  close(tide.einsum("ij->", a), a:sum(), "sum")
  close(tide.einsum("ij->j", a), a:sum(1), "column sums")
  local sq = tide.randn(4, 4):double()
  close(tide.einsum("ii", sq), tide.trace(sq), "trace")
  close(tide.einsum("ii->i", sq), sq:diagonal(), "diagonal")
  local x, y = tide.randn(2, 3, 4):double(), tide.randn(2, 4, 5):double()
  close(tide.einsum("bij,bjk->bik", x, y), x:matmul(y), "batched")
  close(tide.einsum("...ij,...jk->...ik", x, y), x:matmul(y), "ellipsis")
  close(tide.einsum("...ij,jk", x, b), x:matmul(b), "ellipsis broadcast")
  close(tide.einsum("i,i->", T({ 1, 2, 3 }), T({ 4, 5, 6 })), T(32), "dot")
  close(tide.einsum("i,j->ij", T({ 1, 2 }), T({ 3, 4 })), tide.outer(T({ 1, 2 }), T({ 3, 4 })), "outer")
  close(tide.einsum("bii->b", tide.arange(0, 18):reshape(2, 3, 3):double()), T({ 12, 39 }), "batched trace")
  local p, q, r = tide.randn(2, 3):double(), tide.randn(3, 4):double(), tide.randn(4, 2):double()
  close(tide.einsum("ij,jk,kl->il", p, q, r), p:matmul(q):matmul(r), "three operands")
  close(tide.einsum("ij,jk,ki->", p, q, r), tide.trace(p:matmul(q):matmul(r)), "cyclic trace")
  -- a loop reference for a mixed case: out[b, k] = sum_{i, j} X[b, i, j] * Y[j, k] * Z[i]
  local X, Y, Z = tide.randn(2, 3, 4):double(), tide.randn(4, 2):double(), tide.randn(3):double()
  local xt, yt, zt = X:totable(), Y:totable(), Z:totable()
  H.values(tide.einsum("bij,jk,i->bk", X, Y, Z), H.build({ 2, 2 }, function(bb, k)
    local s = 0
    for i = 1, 3 do for j = 1, 4 do s = s + xt[bb][i][j] * yt[j][k] * zt[i] end end
    return s
  end), 1e-12, "loop reference")
  close(tide.einsum("Ab,bA->A", T({ { 1, 2 } }), T({ { 3 }, { 4 } })), T({ 11 }), "upper case")
end)

-- ---- gradients, jit, Vulkan over one table of cases ---------------------------------------------

-- Central differences of sum(f(inputs) * w) in float64; step 1e-6 gives a truncation error near
-- 1e-12 and a rounding error near 1e-10 for these O(1) values, so 1e-6 relative is ample.
local function gradcheck(name, f, inputs)
  local ins = {}
  for i, x in ipairs(inputs) do ins[i] = x:double():detach():requires_grad_() end
  local out = f(table.unpack(ins))
  local w = tide.randn(table.unpack(out:size())):double()
  ;(out * w):sum():backward()
  for i, x in ipairs(ins) do
    local base = H.flatten(x:detach():totable())
    local shape = x:size()
    local num = {}
    for k = 1, #base do
      local function at(delta)
        local v = { table.unpack(base) }
        v[k] = v[k] + delta
        local args = {}
        for j, y in ipairs(ins) do args[j] = y:detach() end
        args[i] = tide.tensor(v, { dtype = "float64" }):reshape(shape)
        return (f(table.unpack(args)) * w):sum():item()
      end
      num[k] = (at(1e-6) - at(-1e-6)) / 2e-6
    end
    local got = H.flatten(x.grad:totable())
    for k = 1, #num do
      if math.abs(got[k] - num[k]) > 1e-6 * (1 + math.abs(num[k])) then
        error(("%s: input %d element %d: autograd %.10g, finite differences %.10g"):format(
          name, i, k, got[k], num[k]))
      end
    end
  end
end

-- index tensors follow their input's device (the Vulkan run moves the inputs)
local function ix(x, v) return tide.tensor(v):to(x.device) end
local idx = { { 3, 1 }, { 2, 2 } }
local cases = {
  { "addmm", function(i, a, b) return tide.addmm(i, a, b, { beta = 0.5, alpha = 2 }) end, { { 3 }, { 2, 4 }, { 4, 3 } } },
  { "addmv", function(i, a, v) return tide.addmv(i, a, v) end, { { 2 }, { 2, 3 }, { 3 } } },
  { "baddbmm", function(i, a, b) return tide.baddbmm(i, a, b, { alpha = 0.5 }) end, { { 1, 3 }, { 2, 2, 4 }, { 2, 4, 3 } } },
  { "addbmm", function(i, a, b) return tide.addbmm(i, a, b) end, { { 2, 3 }, { 2, 2, 4 }, { 2, 4, 3 } } },
  { "outer", tide.outer, { { 3 }, { 4 } } },
  { "cross", function(a, b) return tide.cross(a, b, 2) end, { { 2, 3 }, { 2, 3 } } },
  { "diag", function(x) return tide.diag(x, 1) end, { { 3 } } },
  { "diagonal", function(x) return x:diagonal(-1, 1, 3) * 2 end, { { 3, 2, 4 } } },
  { "trace", function(x) return tide.trace(x):reshape(1) end, { { 3, 4 } } },
  { "kron", tide.kron, { { 2, 3 }, { 2, 2 } } },
  { "tensordot", function(a, b) return tide.tensordot(a, b, { { 1, 3 }, { 2, 1 } }) end, { { 2, 3, 4 }, { 4, 2, 5 } } },
  { "cdist", function(a, b) return tide.cdist(a, b) end, { { 3, 4 }, { 2, 4 } } },
  -- pow's gradient (p * x^(p-1) * g) under the jit differs from eager by an ulp, already for
  -- x:abs():pow(3) alone (not this op's doing), so this case compares within 1e-5 of O(1) values
  { "cdist p=3", function(a, b) return tide.cdist(a, b, 3) end, { { 3, 4 }, { 2, 4 } }, jit_tol = 1e-5 },
  { "block_diag", function(a, b) return tide.block_diag(a, b) end, { { 2, 2 }, { 3 } } },
  { "tile", function(x) return x:tile(2, 1, 2) end, { { 2, 3 } } },
  { "roll", function(x) return x:roll({ 1, -2 }, { 1, 2 }) end, { { 3, 4 } } },
  { "repeat_interleave", function(x) return x:repeat_interleave(2, 2) end, { { 2, 3 } } },
  { "movedim", function(x) return x:movedim(1, 3) * 1 end, { { 2, 3, 4 } } },
  { "rot90", function(x) return x:rot90(1) end, { { 2, 3 } } },
  { "stacks", function(a, b) return tide.vstack({ a, b }) + tide.column_stack({ a:t(), b:t() }):t() end, { { 2, 3 }, { 2, 3 } } },
  { "unfold", function(x) return x:unfold(2, 3, 2) * 1 end, { { 2, 7 } } },
  { "take", function(x) return x:take(ix(x, { 1, 6, 6 })) end, { { 2, 3 } } },
  { "scatter", function(x, s) return x:scatter(2, ix(x, idx), s) end, { { 2, 3 }, { 2, 2 } } },
  { "scatter add", function(x, s) return x:scatter(2, ix(x, idx), s, { reduce = "add" }) end, { { 2, 3 }, { 2, 2 } } },
  { "scatter multiply", function(x, s) return x:scatter(2, ix(x, idx), s, { reduce = "multiply" }) end, { { 2, 3 }, { 2, 2 } } },
  { "index_add", function(x, s) return x:index_add(1, ix(x, { 2, 2, 1 }), s, { alpha = 3 }) end, { { 2, 3 }, { 3, 3 } } },
  { "index_copy", function(x, s) return x:index_copy(2, ix(x, { 3, 1 }), s) end, { { 2, 3 }, { 2, 2 } } },
  { "index_fill", function(x) return x:index_fill(2, ix(x, { 2 }), 5) end, { { 2, 3 } } },
  { "einsum", function(a, b) return tide.einsum("bij,bjk->bki", a, b) end, { { 2, 3, 4 }, { 2, 4, 2 } } },
  { "einsum diagonal", function(a, b) return tide.einsum("iij,j->i", a, b) end, { { 3, 3, 2 }, { 2 } } },
  { "normal", function(m, s) tide.manual_seed(3); return tide.normal(m, s) end, { { 4 }, { 4 } } },
  { "where", function(a, b) return tide.where(ix(a, { { true }, { false } }), a, b) end, { { 3 }, { 2, 1 } } },
}

local function make_inputs(shapes, dt)
  local xs = {}
  for i, s in ipairs(shapes) do xs[i] = tide.randn(table.unpack(s)):to(dt or "float64") end
  return xs
end

H.test("gradients against finite differences", function()
  for _, c in ipairs(cases) do
    gradcheck(c[1], c[2], make_inputs(c[3]))
  end
end)

H.test("masked_select: gradient, and a graph break under the jit", function()
  local x = tide.randn(3, 4):double():requires_grad_()
  local m = x:detach():gt(0)
  ;(x:masked_select(m) * 2):sum():backward()
  H.values(x.grad, H.map(m:totable(), function(b) return b and 2 or 0 end), 0)
  local f = tide.jit(function(t) return (t:masked_select(t:gt(0)) * 3):sum(), t * 2 end)
  for rep = 1, 3 do
    local t = tide.randn(5, 6)
    local s1, d1 = f(t)
    local want = t:masked_select(t:gt(0)):sum():item() * 3
    H.near(s1:item(), want, 1e-5, "call " .. rep)
    H.ok(tide.equal(d1, t * 2), "call " .. rep .. " second output")
  end
  H.ok(f:stats().breaks > 0, "the count read back is a graph break")
  H.eq(f:stats().fallbacks, 0, "no fallback to eager")
  local e = tide.jit(function(a, b) return tide.einsum("ij,jk->ik", a, b):relu() end)
  for _ = 1, 2 do e(tide.randn(3, 4), tide.randn(4, 5)) end
  H.eq(e:stats().breaks, 0, "einsum stays in the plan")
  local g = tide.jit(function(t) return t:masked_select(t:gt(0)) end)
  for _, n in ipairs({ 4, 4, 9 }) do
    local t = tide.randn(n)
    H.ok(tide.equal(g(t), t:masked_select(t:gt(0))), "sizes vary with the data")
  end
end)

local function bitwise(a, b, what)
  H.eq(a:size(), b:size(), what .. " shape")
  H.eq(a.dtype, b.dtype, what .. " dtype")
  H.ok(tide.equal(a, b), what .. ": not bitwise equal")
end

H.test("jit: the same bits as eager, forward and backward", function()
  for _, c in ipairs(cases) do
    local function step(...)
      local args = { ... }
      for i, a in ipairs(args) do args[i] = a:detach():requires_grad_() end
      local out = c[2](table.unpack(args))
      out:sum():backward()
      return out, args[1].grad
    end
    local f = tide.jit(step)
    for rep = 1, 2 do
      local xs = make_inputs(c[3], "float32")
      local o1, g1 = f(table.unpack(xs))
      local o2, g2 = step(table.unpack(xs))
      if c.jit_tol then -- see the case's comment
        H.ok((o1 - o2):abs():max():item() <= c.jit_tol, c[1] .. " forward " .. rep)
        H.ok((g1 - g2):abs():max():item() <= c.jit_tol, c[1] .. " grad " .. rep)
      else
        bitwise(o1, o2, c[1] .. " forward " .. rep)
        bitwise(g1, g2, c[1] .. " grad " .. rep)
      end
    end
  end
end)

local vk = tide.vulkan.available()
H.test("vulkan: against the CPU", function()
  if not vk then
    print("test_linalg_ops.lua: no Vulkan device, skipped")
    return
  end
  for _, c in ipairs(cases) do
    local xs = make_inputs(c[3], "float32")
    local vs = {}
    for i, x in ipairs(xs) do vs[i] = x:to("vulkan") end
    local okc, cpu = pcall(c[2], table.unpack(xs))
    H.ok(okc, c[1] .. ": " .. tostring(cpu))
    local okv, gpu = pcall(c[2], table.unpack(vs))
    H.ok(okv, c[1] .. " on vulkan: " .. tostring(gpu))
    -- float32 sums in another order (matmul, reductions): a few ulps of O(10) values
    local diff = (gpu:to("cpu") - cpu):abs():max():item()
    H.ok(diff <= 1e-4, ("%s: vulkan differs from the cpu by %g"):format(c[1], diff))
  end
  local x = tide.randn(4, 5)
  H.ok(tide.equal(x:to("vulkan"):masked_select(x:to("vulkan"):gt(0)):to("cpu"), x:masked_select(x:gt(0))),
    "masked_select")
end)

H.test("errors name the op, the shapes and the dtypes", function()
  local m = tide.ones(2, 3)
  H.raises(function() return tide.addmm(tide.ones(2), tide.ones(3), m) end, "addmm", "mat1 must be 2-D", "[3]")
  H.raises(function() return tide.addmm(tide.ones(2), m, m) end, "addmm", "matmul")
  H.raises(function() return tide.addmm(tide.ones(5), m, m:t()) end, "addmm", "expand")
  H.raises(function() return tide.addmm(m, m, m:t(), { gamma = 1 }) end, "addmm", "gamma")
  H.raises(function() return tide.addmm(m, m, m:t(), 2) end, "addmm", "options must be a table")
  H.raises(function() return m:index_copy_(1, tide.tensor({ 1 }), tide.ones(1, 3), "x") end, "index_copy_", "options must be a table")
  H.raises(function() return tide.cross(m, m, 1) end, "cross", "size 3", "[2, 3]")
  H.raises(function() return tide.diag(tide.ones(2, 2, 2)) end, "diag", "1-D or 2-D", "[2, 2, 2]")
  H.raises(function() return m:diagonal(0, 1, 1) end, "diagonal", "differ")
  H.raises(function() return tide.trace(tide.ones(3)) end, "trace", "2-D", "[3]")
  H.raises(function() return tide.tensordot(m, m, { { 1 }, { 2 } }) end, "tensordot", "differ in size")
  H.raises(function() return tide.cdist(tide.ones(2, 3), tide.ones(2, 4)) end, "cdist", "[2, 3]", "[2, 4]")
  H.raises(function() return tide.cdist(tide.ones(2, 3, { dtype = "int64" }), m) end, "cdist", "int64")
  H.raises(function() return tide.block_diag(tide.ones(1, 1, 1)) end, "block_diag", "at most 2 dims")
  H.raises(function() return m:unfold(2, 4, 1) end, "unfold", "size 4", "[2, 3]")
  H.raises(function() return m:unfold(2, 2, 0) end, "unfold", "step 0")
  H.raises(function() return m:tile(-1) end, "tile", "-1")
  H.raises(function() return m:roll({ 1, 2 }, 1) end, "roll", "2 shifts for 1 dims")
  H.raises(function() return m:repeat_interleave(tide.tensor({ 1, 2 }), 2) end, "repeat_interleave", "2 entries", "size 3")
  H.raises(function() return m:repeat_interleave(tide.tensor({ 1, -1, 1 }), 2) end, "repeat_interleave", ">= 0")
  H.raises(function() return m:movedim({ 1, 2 }, 1) end, "movedim", "2 source dims but 1")
  H.raises(function() return m:rot90(1, { 1, 1 }) end, "rot90", "differ")
  H.raises(function() return tide.meshgrid(m, m) end, "meshgrid", "0-D or 1-D")
  H.raises(function() return tide.meshgrid(tide.ones(2), { indexing = "yx" }) end, "meshgrid", "indexing")
  H.raises(function() return m:masked_select(tide.ones(2, 3)) end, "masked_select", "bool", "float32")
  H.raises(function() return m:masked_select(tide.ones(4):gt(0)) end, "masked_select", "[2, 3]", "[4]")
  H.raises(function() return m:take(tide.tensor({ 7 })) end, "take", "7")
  H.raises(function() return m:take(tide.tensor({ 1.5 })) end, "take", "int64")
  H.raises(function() return m:scatter(2, tide.tensor({ { 4 } }), 1) end, "scatter", "4")
  H.raises(function() return m:scatter(2, tide.tensor({ { 1 } }), 1, { reduce = "max" }) end, "scatter", "reduce")
  H.raises(function() return m:scatter(2, tide.tensor({ 1 }), tide.ones(1)) end, "scatter", "dims")
  H.raises(function() return m:index_add(1, tide.tensor({ 1 }), tide.ones(2, 3)) end, "index_add", "[1]", "[2, 3]")
  H.raises(function() return m:index_fill(1, tide.tensor({ 3 }), 0) end, "index_fill", "3")
  H.raises(function() return tide.normal(tide.ones(2), tide.ones(3)) end, "normal", "broadcast", "[2]", "[3]")
  H.raises(function() return tide.normal(tide.tensor({ 1 }), tide.tensor({ 1 })) end, "normal", "floating")
  H.raises(function() return tide.einsum("ij,jk", m) end, "einsum", "more operands")
  H.raises(function() return tide.einsum("ij", m, m) end, "einsum", "fewer")
  H.raises(function() return tide.einsum("ij,jk->ik", m, m) end, "einsum", "'j'", "size 2", "3")
  H.raises(function() return tide.einsum("i1", m) end, "einsum", "'1' is not a letter")
  H.raises(function() return tide.einsum("ijk", m) end, "einsum", "3 subscripts", "[2, 3]")
  H.raises(function() return tide.einsum("ij->k", m) end, "einsum", "'k' appears in no operand")
  H.raises(function() return tide.einsum("ij->ii", m) end, "einsum", "twice")
  H.raises(function() return tide.einsum("i..j", m) end, "einsum", "\"...\"")
  H.raises(function() return tide.einsum("ii", m) end, "einsum", "'i' has size 3", "2 elsewhere")
end)

H.done()
