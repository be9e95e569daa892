-- keys: the live keys starting with prefix, in UTF-8 byte order.
-- ARGV: prefix, key prefix ("" = all), now_ms
-- Index members whose hash Redis already expired are dropped on the way.
local p = ARGV[1]
local now = tonumber(ARGV[3])
local lo, hi = '-', '+'
if ARGV[2] ~= '' then
  -- UTF-8 never contains the byte 0xFF, so it bounds every key with this prefix.
  lo, hi = '[' .. ARGV[2], '(' .. ARGV[2] .. '\255'
end
local out = {}
for _, k in ipairs(redis.call('ZRANGEBYLEX', p .. ':idx', lo, hi)) do
  local x = redis.call('HMGET', p .. ':e:' .. k, 'n', 'x')
  if not x[1] then
    redis.call('ZREM', p .. ':idx', k)
    redis.call('ZREM', p .. ':exp', k)
  elseif not x[2] or now < tonumber(x[2]) then
    out[#out + 1] = k
  end
end
return out
