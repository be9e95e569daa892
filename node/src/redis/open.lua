-- open: claim or check the store's metadata.
-- ARGV: prefix, schema (the client's schema version, "1")
-- Returns {status, app, schema}: status 1 = usable (created or matching),
-- 0 = another application's or a newer schema (the caller says which).
local p = ARGV[1]
local mk = p .. ':meta'
redis.call('HSETNX', mk, 'app', 'agent-recovery')
redis.call('HSETNX', mk, 'schema', ARGV[2])
local m = redis.call('HMGET', mk, 'app', 'schema')
if m[1] == 'agent-recovery' and tonumber(m[2]) ~= nil and tonumber(m[2]) <= tonumber(ARGV[2]) then
  return {1, m[1], m[2]}
end
return {0, m[1] or '', m[2] or ''}
