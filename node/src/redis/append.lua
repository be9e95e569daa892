-- append: add a record to a stream; its sequence number is one past the last.
-- ARGV: prefix, stream, record, now_ms
-- Returns the sequence number (1 for a new stream).
local sk = ARGV[1] .. ':s:' .. ARGV[2]
local last = redis.call('XREVRANGE', sk, '+', '-', 'COUNT', 1)
local seq = 1
if #last > 0 then
  seq = tonumber(string.match(last[1][1], '^(%d+)')) + 1
end
redis.call('XADD', sk, string.format('%d', seq) .. '-0', 'r', ARGV[3], 't', ARGV[4])
return seq
