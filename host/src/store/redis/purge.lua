-- purge: remove one entry if it has expired at now_ms.
-- KEYS[1]: the entry hash `{P:<tag>}:e:<key>`
-- ARGV: now_ms
-- Returns 1 when it removed the entry, else 0. The client finds the
-- candidates with SCAN on every primary (purge_expired is a sweep).
local x = redis.call('HGET', KEYS[1], 'x')
if x and tonumber(ARGV[1]) >= tonumber(x) then
  return redis.call('DEL', KEYS[1])
end
return 0
