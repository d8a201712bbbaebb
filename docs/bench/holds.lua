-- wrk -t2 -c64 -d10s -s docs/bench/holds.lua http://localhost:8080 (SHOP: a shop key; stock HOT and M1..M100 first).
-- Holds of one unit, 30% on HOT and the rest over M1..M100, 2 s TTL, a
-- key unique per thread and request.
local threads = 0
setup = function(thread)
  threads = threads + 1
  thread:set("id", threads)
end
local n = 0
request = function()
  n = n + 1
  local sku = "M" .. math.random(1, 100)
  if math.random() < 0.3 then sku = "HOT" end
  local body = '{"order_ref":"o' .. n .. '","items":[{"sku":"' .. sku .. '","quantity":1}],"ttl_seconds":2}'
  return wrk.format("POST", "/v1/reservations", {["Content-Type"]="application/json", ["Authorization"]="Bearer " .. os.getenv("SHOP"), ["Idempotency-Key"]= "t" .. id .. "-" .. n}, body)
end
