-- move.lua: move the due timers of one partition onto their queues' streams, fenced by its
-- epoch. Runs after fence.lua (scripts.py prepends it), which defines refusal() and number_arg().
--
-- KEYS[1]  <prefix>:{p<p>}:epoch
-- KEYS[2]  <prefix>:{p<p>}:timers   (sorted set, member "<job_id>:<token>:<queue>", score due_ms)
-- KEYS[3]  <prefix>:{p<p>}:queues   (set of the queues whose streams exist)
-- KEYS[4]  <prefix>:{p<p>}:entries  (hash: job_id -> "<token>:<entry id>" of its newest entry)
-- ARGV[1]  epoch of the leader
-- ARGV[2]  now_ms: the database clock in milliseconds; a timer is due when its score <= now_ms
-- ARGV[3]  limit: at most this many timers per call (a bounded batch keeps Redis responsive)
-- ARGV[4]  <prefix>:{p<p>}:q:  the prefix of the partition's stream keys
--
-- The stream keys, ARGV[4] .. <queue>, are built here from a member's queue: they cannot be
-- known before the members are read. They carry the partition's hash tag, so they live in the
-- slot of KEYS[1..3] and the script still touches a single slot (Redis Cluster runs it).
--
-- Due members are read in score order (ZRANGE BYSCORE LIMIT), each XADDed as {job, token} to
-- its queue's stream, then removed, all in this one atomic call: no reader sees a timer both in
-- the set and on a stream, and none is lost between the two.
--
-- Returns {'ok', moved, next_due, dropped, job_1, token_1, entry_1, job_2, ...}: `moved`
-- entries added; `next_due` the smallest score left ('' when the set is empty); `dropped`
-- members that could not be parsed (removed, never delivered: the database still holds their
-- jobs); then job, token and stream entry id of each entry added, so that the leader can later
-- ask whether an entry still waits (waiting.lua) before it stages a job again. Or the refusal of
-- fence.lua ({'stale', stored} or {'lost', stored}), having moved nothing.

local refused = refusal(KEYS[1], number_arg(ARGV[1], 'the epoch'))
if refused then
  return refused
end
-- Checked as numbers, passed on as the caller's text: a Lua number would reach Redis through
-- a floating-point format.
number_arg(ARGV[2], 'now_ms')
number_arg(ARGV[3], 'the limit')

local due = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[2], 'BYSCORE', 'LIMIT', 0, ARGV[3])

local moved, dropped = 0, 0
local queues = {}
local entries = {}
for _, member in ipairs(due) do
  -- the queue comes last: it may hold colons
  local job, token, queue = string.match(member, '^(%d+):(%-?%d+):(.+)$')
  if job then
    local entry = redis.call('XADD', ARGV[4] .. queue, '*', 'job', job, 'token', token)
    redis.call('HSET', KEYS[4], job, token .. ':' .. entry)
    entries[#entries + 1] = job
    entries[#entries + 1] = token
    entries[#entries + 1] = entry
    queues[queue] = true
    moved = moved + 1
  else
    redis.log(redis.LOG_WARNING, 'chronoq: dropped a malformed timer member: ' .. member)
    dropped = dropped + 1
  end
end

for first = 1, #due, CHUNK do
  redis.call('ZREM', KEYS[2], unpack(due, first, math.min(first + CHUNK - 1, #due)))
end
for queue in pairs(queues) do
  redis.call('SADD', KEYS[3], queue)
end

local head = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local reply = {'ok', moved, head[2] or '', dropped}
for i = 1, #entries do
  reply[4 + i] = entries[i]
end
return reply
