-- The help table (tide.help): one entry per documented function, {signature, description}.
-- The signature starts with the name help looks up, with its receiver prefix: tide.<f> for
-- module functions (also the method when x:<f> is the same function), x:<m> for tensor-only
-- methods, nn.<Class>, nn.init.<f>, F.<f>, optim.<Class>, data.<f>, and m: (nn.Module),
-- opt: (optimizers), sched: (LR schedulers), loader: (DataLoader), ds: (Dataset) for methods.
-- Adding a function: add its line here and name it in docs/lua-api.md; tests/lua/test_help.lua
-- fails until both agree. Keep descriptions to one line.
return {
}
