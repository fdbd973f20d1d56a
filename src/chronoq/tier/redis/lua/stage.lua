-- stage.lua: add or update timers of one partition, fenced by its epoch.
-- Runs after fence.lua (scripts.py prepends it), which defines refusal() and number_arg().
--
-- KEYS[1]  <prefix>:{p<p>}:epoch
-- KEYS[2]  <prefix>:{p<p>}:timers   (sorted set, member "<job_id>:<token>:<queue>")
-- ARGV[1]  epoch of the leader
-- ARGV[2], ARGV[3], ...  pairs of due_ms (score) and member; the caller sends at most 1,000
--          pairs a call, so one call blocks Redis for a few milliseconds at most
--
-- Returns {'ok', added}: `added` members were new (a member staged again only gets its new
-- score), or the refusal of fence.lua ({'stale', stored} or {'lost', stored}), having written
-- nothing.

local refused = refusal(KEYS[1], number_arg(ARGV[1], 'the epoch'))
if refused then
  return refused
end

if #ARGV % 2 ~= 1 then
  error('chronoq: stage.lua takes the epoch and then pairs of score and member')
end
for i = 2, #ARGV, 2 do
  number_arg(ARGV[i], 'a score')
end

local added = 0
for first = 2, #ARGV, 2 * CHUNK do
  local last = math.min(first + 2 * CHUNK - 1, #ARGV)
  added = added + redis.call('ZADD', KEYS[2], unpack(ARGV, first, last))
end
return {'ok', added}
