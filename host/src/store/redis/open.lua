-- open: claim or check the store's metadata.
-- KEYS[1]: the metadata hash `{P}:meta`
-- ARGV: schema (the client's schema version, "2")
-- Returns {status, app, schema}: status 1 = usable (created or the same
-- schema), 0 = another application's or another schema (the caller says which).
local mk = KEYS[1]
redis.call('HSETNX', mk, 'app', 'agent-recovery')
redis.call('HSETNX', mk, 'schema', ARGV[1])
local m = redis.call('HMGET', mk, 'app', 'schema')
if m[1] == 'agent-recovery' and tonumber(m[2]) == tonumber(ARGV[1]) then
  return {1, m[1], m[2]}
end
return {0, m[1] or '', m[2] or ''}
