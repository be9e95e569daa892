-- purge_expired: remove every entry expired at now_ms.
-- ARGV: prefix, now_ms
-- Returns how many entries it removed (hashes Redis had already expired are
-- cleaned from the indexes but not counted).
local p = ARGV[1]
local removed = 0
for _, k in ipairs(redis.call('ZRANGEBYSCORE', p .. ':exp', '-inf', ARGV[2])) do
  removed = removed + redis.call('DEL', p .. ':e:' .. k)
  redis.call('ZREM', p .. ':exp', k)
  redis.call('ZREM', p .. ':idx', k)
end
return removed
