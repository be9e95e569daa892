-- get: the live entry at key.
-- ARGV: prefix, key, now_ms
-- Returns {} when absent or expired at now_ms, else {value, version}.
local ek = ARGV[1] .. ':e:' .. ARGV[2]
local now = tonumber(ARGV[3])
local cur = redis.call('HMGET', ek, 'v', 'n', 'x')
if not cur[2] then return {} end
if cur[3] and now >= tonumber(cur[3]) then return {} end
return {cur[1], tonumber(cur[2])}
