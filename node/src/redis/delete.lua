-- delete: remove key unconditionally.
-- ARGV: prefix, key
-- Returns 1 when the entry hash existed (even if it had expired), else 0.
local p = ARGV[1]
local existed = redis.call('DEL', p .. ':e:' .. ARGV[2])
redis.call('ZREM', p .. ':idx', ARGV[2])
redis.call('ZREM', p .. ':exp', ARGV[2])
return existed
