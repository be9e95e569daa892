-- compare_and_set: write value iff the live version is expected.
-- ARGV: prefix, key, expected ("" = none: absent or expired), value,
--       ttl_ms ("" = never expires), now_ms, grace_ms, purge_batch
-- Returns {1, version} when written; {0} when it conflicts with no live
-- entry; {0, value, version} when it conflicts with the live entry.
local p = ARGV[1]
local key = ARGV[2]
local ek = p .. ':e:' .. key
local now = tonumber(ARGV[6])
local cur = redis.call('HMGET', ek, 'v', 'n', 'x')
local live = cur[2] and (not cur[3] or now < tonumber(cur[3]))
if ARGV[3] == '' then
  if live then return {0, cur[1], tonumber(cur[2])} end
else
  if not live then return {0} end
  if tonumber(cur[2]) ~= tonumber(ARGV[3]) then return {0, cur[1], tonumber(cur[2])} end
end
local n = redis.call('INCR', p .. ':rev')
redis.call('DEL', ek)
if ARGV[5] == '' then
  redis.call('HSET', ek, 'v', ARGV[4], 'n', string.format('%d', n), 'u', ARGV[6])
  redis.call('ZREM', p .. ':exp', key)
else
  -- Numbers go back to Redis through string.format('%d'): Lua's own
  -- tostring would print 2^53-sized integers in exponent notation.
  local at = string.format('%d', now + tonumber(ARGV[5]))
  redis.call('HSET', ek, 'v', ARGV[4], 'n', string.format('%d', n), 'x', at, 'u', ARGV[6])
  redis.call('PEXPIRE', ek, string.format('%d', tonumber(ARGV[5]) + tonumber(ARGV[7])))
  redis.call('ZADD', p .. ':exp', at, key)
end
redis.call('ZADD', p .. ':idx', 0, key)
-- Remove up to purge_batch expired entries, oldest expiry first (as SQLite does).
local old = redis.call('ZRANGEBYSCORE', p .. ':exp', '-inf', ARGV[6], 'LIMIT', 0, ARGV[8])
for _, k in ipairs(old) do
  redis.call('DEL', p .. ':e:' .. k)
  redis.call('ZREM', p .. ':exp', k)
  redis.call('ZREM', p .. ':idx', k)
end
return {1, n}
