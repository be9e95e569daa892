-- get: the live entry.
-- KEYS[1]: the entry hash `{P:<tag>}:e:<key>`
-- ARGV: now_ms
-- Returns {} when absent or expired at now_ms, else {value, version}.
local now = tonumber(ARGV[1])
local cur = redis.call('HMGET', KEYS[1], 'v', 'n', 'x')
if not cur[2] then return {} end
if cur[3] and now >= tonumber(cur[3]) then return {} end
return {cur[1], tonumber(cur[2])}
