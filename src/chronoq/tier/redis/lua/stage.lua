-- stage.lua: add or update timers of one partition, fenced by its epoch.
-- Runs after fence.lua and waits.lua (scripts.py prepends them), which define refusal(),
-- number_arg() and entry_waits().
--
-- KEYS[1]  <prefix>:{p<p>}:epoch
-- KEYS[2]  <prefix>:{p<p>}:timers   (sorted set, member "<job_id>:<token>:<queue>")
-- KEYS[3]  <prefix>:{p<p>}:entries  (hash: job_id -> "<token>:<entry id>" of the entry
--          move.lua last added for it, until trim.lua drops that entry)
-- ARGV[1]  epoch of the leader
-- ARGV[2]  <prefix>:{p<p>}:q:  the prefix of the partition's stream keys (same slot)
-- ARGV[3]  the consumer group workers read with ("chronoq")
-- ARGV[4], ARGV[5], ...  pairs of due_ms (score) and member; the caller sends at most 1,000
--          pairs a call, so one call blocks Redis for a few milliseconds at most
--
-- A timer whose job has an entry under the same token that still waits on its stream
-- (waits.lua) is not staged: a predecessor moved it, or this leader did and lost track. The
-- leader learns of it from the reply and asks again later (waiting.lua), so a new leader puts
-- no second entry beside each waiting one. An entry acknowledged or trimmed does not hold its
-- job back: the job is pending again (a released claim, a queue paused then resumed).
--
-- Returns {'ok', added, job_1, token_1, entry_1, job_2, ...}: `added` members were new (a
-- member staged again only gets its new score), then job, token and entry id of each timer
-- skipped for its entry; or the refusal of fence.lua ({'stale', stored} or {'lost', stored}),
-- having written nothing.

local refused = refusal(KEYS[1], number_arg(ARGV[1], 'the epoch'))
if refused then
  return refused
end

if #ARGV % 2 ~= 1 then
  error('chronoq: stage.lua takes the epoch, the stream prefix, the group, then pairs of score'
    .. ' and member')
end
for i = 4, #ARGV, 2 do
  number_arg(ARGV[i], 'a score')
end

local pairs_to_add, moved_already = {}, {}
for i = 4, #ARGV, 2 do
  local job, token, queue = string.match(ARGV[i + 1], '^(%d+):(%-?%d+):(.+)$')
  local entry = job and redis.call('HGET', KEYS[3], job)
  local entry_token, entry_id = nil, nil
  if entry then
    entry_token, entry_id = string.match(entry, '^(%-?%d+):(.+)$')
  end
  if entry_token == token and entry_waits(ARGV[2] .. queue, entry_id, ARGV[3]) then
    moved_already[#moved_already + 1] = job
    moved_already[#moved_already + 1] = token
    moved_already[#moved_already + 1] = entry_id
  else
    pairs_to_add[#pairs_to_add + 1] = ARGV[i]
    pairs_to_add[#pairs_to_add + 1] = ARGV[i + 1]
  end
end

local added = 0
for first = 1, #pairs_to_add, 2 * CHUNK do
  local last = math.min(first + 2 * CHUNK - 1, #pairs_to_add)
  added = added + redis.call('ZADD', KEYS[2], unpack(pairs_to_add, first, last))
end
local reply = {'ok', added}
for i = 1, #moved_already do
  reply[2 + i] = moved_already[i]
end
return reply
