-- compare_and_set: write value iff the live version is expected.
-- KEYS[1]: the entry hash `{P:<tag>}:e:<key>`
-- KEYS[2]: the store-wide revision `{P}:rev`, on one server only (on a
--          cluster it lives in another slot and the client passes the version)
-- ARGV: expected ("" = none: absent or expired), value,
--       ttl_ms ("" = never expires), now_ms, grace_ms,
--       version ("" = INCR KEYS[2]; "?" = check only; digits = this version)
-- Returns {1, version} when written; {0} when it conflicts with no live
-- entry; {0, value, version} when it conflicts with the live entry;
-- {2} when the check passed and version was "?" (nothing written).
local ek = KEYS[1]
local now = tonumber(ARGV[4])
local cur = redis.call('HMGET', ek, 'v', 'n', 'x')
local live = cur[2] and (not cur[3] or now < tonumber(cur[3]))
if ARGV[1] == '' then
  if live then return {0, cur[1], tonumber(cur[2])} end
else
  if not live then return {0} end
  if tonumber(cur[2]) ~= tonumber(ARGV[1]) then return {0, cur[1], tonumber(cur[2])} end
end
local n
if ARGV[6] == '?' then
  return {2}
elseif ARGV[6] == '' then
  n = redis.call('INCR', KEYS[2])
else
  n = tonumber(ARGV[6])
end
-- The hash is rewritten in place, never deleted first: while its slot
-- migrates, a key this node no longer holds may not be touched again.
-- Numbers go back to Redis through string.format('%d'): Lua's own
-- tostring would print 2^53-sized integers in exponent notation.
if ARGV[3] == '' then
  redis.call('HSET', ek, 'v', ARGV[2], 'n', string.format('%d', n), 'u', ARGV[4])
  redis.call('HDEL', ek, 'x')
  redis.call('PERSIST', ek)
else
  local at = string.format('%d', now + tonumber(ARGV[3]))
  redis.call('HSET', ek, 'v', ARGV[2], 'n', string.format('%d', n), 'x', at, 'u', ARGV[4])
  redis.call('PEXPIRE', ek, string.format('%d', tonumber(ARGV[3]) + tonumber(ARGV[5])))
end
return {1, n}
