-- test_ref_jit.lua — training steps on the reference device under tide.jit equal eager ref
-- steps bitwise: ref interprets every fusion group (devices/ref/ref_jit.c) with the per-element
-- functions of its eager kernels, so a traced step (matmul epilogues, row reductions of the
-- loss and layer norm, optimizer updates written back in place) gives eager's bits.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local H = require "harness"
local tide = require "tide"
local nn = require "tide.nn"
local optim = require "tide.optim"
local F = require "tide.nn.functional"

for _, which in ipairs({ "SGD", "Adam", "AdamW" }) do
  H.test("training step on ref under jit equals eager: " .. which, function()
    local function make()
      tide.manual_seed(5)
      local m = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 4))
      m:to("ref")
      local o
      if which == "SGD" then
        o = optim.SGD(m:parameters(), { lr = 0.05, momentum = 0.9, weight_decay = 1e-4 })
      else
        o = optim[which](m:parameters(), { lr = 1e-2 })
      end
      return m, o
    end
    local x = tide.randn(12, 20):to("ref")
    local y = tide.randint(1, 5, { 12 }):to("ref")
    local function step(m, o)
      o:zero_grad()
      local loss = F.cross_entropy(m(x), y)
      loss:backward()
      o:step()
      return loss
    end
    local m1, o1 = make()
    local m2, o2 = make()
    local js = tide.jit(step)
    for i = 1, 3 do
      H.eq(js(m2, o2):item(), step(m1, o1):item(), which .. " loss at step " .. i)
    end
    local p1, p2 = m1:parameters(), m2:parameters()
    for i = 1, #p1 do
      H.eq(p2[i].device, "ref", which .. " parameter " .. i .. " device")
      H.eq((p1[i] - p2[i]):abs():max():item(), 0, which .. " parameter " .. i)
    end
    local s = js:stats()
    H.ok(s.compiles >= 1 and s.hits >= 1 and s.breaks == 0,
      ("%s: %d compiles, %d hits, %d breaks"):format(which, s.compiles, s.hits, s.breaks))
  end)
end

H.done()
