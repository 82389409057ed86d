-- stall.lua — under mpirun -np 2: rank 1 stalls inside a training step (sleeps far past the
-- timeout) while rank 0 waits in the step's all_reduce. Rank 0 must fail with tide's timeout
-- error naming it, and the launch must end long before rank 1 would wake up
-- (tests/test_distributed.sh checks both).
local tide = require "tide"
local dist = tide.distributed
local rank = dist.init{ timeout = 2 }
local w = tide.ones(4, 4):requires_grad_()
for step = 1, 3 do
  local loss = (w * w):sum()
  loss:backward()
  if rank == 1 and step == 2 then
    os.execute("sleep 60")
  end
  dist.all_reduce(w.grad)
  w.grad = nil
end
print("rank " .. rank .. " finished: the stall was not detected")
