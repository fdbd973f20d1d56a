-- trim.lua: drop the stream entries of one partition that every consumer group is done with,
-- fenced by its epoch. Runs after fence.lua (scripts.py prepends it), which defines refusal()
-- and number_arg().
--
-- KEYS[1]  <prefix>:{p<p>}:epoch
-- KEYS[2]  <prefix>:{p<p>}:queues   (set of the queues whose streams move.lua wrote to)
-- KEYS[3]  <prefix>:{p<p>}:entries  (hash: job_id -> "<token>:<entry id>"; a trimmed entry's
--          field is deleted, unless a newer entry of the job replaced it)
-- ARGV[1]  epoch of the leader
-- ARGV[2]  <prefix>:{p<p>}:q:  the prefix of the partition's stream keys (same slot: the hash
--          tag is in the prefix; see move.lua)
-- ARGV[3]  milliseconds: a consumer idle this long that holds no pending entry is deleted
--          from its group (a worker that stopped or died, whose entries its peers claimed);
--          one still alive is re-created by its next read, so a wrong guess costs nothing
--
-- A stream keeps every entry from its floor on: the smallest id over its groups of
-- (the oldest entry still pending, or else the first one after last-delivered-id). An entry
-- below the floor was delivered to every group and acknowledged by each. A pending entry is
-- never dropped (MAXLEN would drop them: they would then be lost until reconciled), nor one
-- not yet delivered. A stream without any group keeps everything: no worker read it yet.
--
-- Returns {'ok', trimmed, forgotten}: entries deleted over all the partition's streams and
-- consumers deleted, or the refusal of fence.lua ({'stale', stored} or {'lost', stored}),
-- having deleted nothing.

local refused = refusal(KEYS[1], number_arg(ARGV[1], 'the epoch'))
if refused then
  return refused
end
local consumer_idle_ms = number_arg(ARGV[3], 'the consumer idle time')

local function parse_id(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end

local function id_below(a, b)
  local a_ms, a_seq = parse_id(a)
  local b_ms, b_seq = parse_id(b)
  return a_ms < b_ms or (a_ms == b_ms and a_seq < b_seq)
end

local function after(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return ms .. '-' .. tostring(tonumber(seq) + 1)
end

local function fields(flat)
  local out = {}
  for i = 1, #flat, 2 do
    out[flat[i]] = flat[i + 1]
  end
  return out
end

-- The first id a group still needs: its oldest pending entry, or the one after its last
-- delivered (pending entries are never above last-delivered-id).
local function group_floor(stream, group)
  if group['pending'] > 0 then
    return redis.call('XPENDING', stream, group['name'])[2]
  end
  return after(group['last-delivered-id'])
end

-- Consumers of `group` idle past consumer_idle_ms with nothing pending: deleted.
local function forget_dead_consumers(stream, group)
  local forgotten = 0
  for _, flat in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
    local consumer = fields(flat)
    if consumer['pending'] == 0 and consumer['idle'] >= consumer_idle_ms then
      redis.call('XGROUP', 'DELCONSUMER', stream, group, consumer['name'])
      forgotten = forgotten + 1
    end
  end
  return forgotten
end

-- The floor of the stream (nil without groups), and how many dead consumers it forgot.
local function stream_floor(stream)
  local floor, forgotten = nil, 0
  for _, flat in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local group = fields(flat)
    local needed = group_floor(stream, group)
    if floor == nil or id_below(needed, floor) then
      floor = needed
    end
    forgotten = forgotten + forget_dead_consumers(stream, group['name'])
  end
  return floor, forgotten
end

-- At most this many entries a stream are trimmed a call (each costs an HGET): a large
-- acknowledged backlog is trimmed over several calls, each a few milliseconds of Redis.
local TRIM_BATCH = 5000

-- Drop the entries of `stream` below `floor`, and their jobs' fields of KEYS[3].
local function trim_below(stream, floor)
  local below = redis.call('XRANGE', stream, '-', floor, 'COUNT', TRIM_BATCH + 1)
  local last = nil
  local count = 0
  for _, item in ipairs(below) do
    local id = item[1]
    if id == floor or count == TRIM_BATCH then
      break
    end
    local fields_of = fields(item[2])
    local job, token = fields_of['job'], fields_of['token']
    if job and token and redis.call('HGET', KEYS[3], job) == token .. ':' .. id then
      redis.call('HDEL', KEYS[3], job)
    end
    last = id
    count = count + 1
  end
  if last == nil then
    return 0
  end
  return redis.call('XTRIM', stream, 'MINID', after(last))
end

local trimmed, forgotten = 0, 0
for _, queue in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local stream = ARGV[2] .. queue
  if redis.call('EXISTS', stream) == 1 then
    local floor, dead = stream_floor(stream)
    forgotten = forgotten + dead
    if floor then
      trimmed = trimmed + trim_below(stream, floor)
    end
  else
    redis.call('SREM', KEYS[2], queue)
  end
end
return {'ok', trimmed, forgotten}
