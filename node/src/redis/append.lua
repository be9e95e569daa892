-- append: add a record to a stream; its sequence number is one past the last.
-- KEYS[1]: the stream `{P:<tag>}:s:<stream>`
-- ARGV: record, now_ms
-- Returns the sequence number. A stream that does not exist starts at the
-- server's clock in microseconds (Redis TIME), not at 1: a stream lost with
-- the server's data (a restart without persistence, a failover to an empty
-- replica) then never hands out a number it handed out before, as long as the
-- lost stream took fewer numbers than microseconds passed since it started.
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local seq
if #last > 0 then
  seq = tonumber(string.match(last[1][1], '^(%d+)')) + 1
else
  local t = redis.call('TIME')
  seq = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
redis.call('XADD', KEYS[1], string.format('%d', seq) .. '-0', 'r', ARGV[1], 't', ARGV[2])
return seq
