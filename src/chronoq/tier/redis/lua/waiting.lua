-- waiting.lua: which stream entries of one partition still wait for a worker to settle them.
-- Read-only and not fenced: any leader (or a status reader) may ask.
--
-- KEYS[1]  <prefix>:{p<p>}:queues   (not read: it names the partition's slot, so that Redis
--          Cluster sends the script to the node holding the partition's streams)
-- ARGV[1]  <prefix>:{p<p>}:q:  the prefix of the partition's stream keys (same slot as KEYS[1])
-- ARGV[2]  the consumer group workers read with ("chronoq")
-- ARGV[3], ARGV[4], ...  pairs of queue and entry id, as move.lua returned them
--
-- An entry waits when a worker read it and has not acknowledged it yet (it is in the group's
-- pending list: being confirmed, held until its row is free or its job due, or left by a dead
-- worker for its peers to claim), or when no worker has read it yet (above the group's
-- last-delivered-id, or no group exists: no worker ever read the stream). An entry that is
-- acknowledged or trimmed waits no more, whatever its job's state in the database.
--
-- Returns the positions (1 for the first pair) of the pairs whose entries wait, in order: entry
-- ids alone would be ambiguous, as streams of different queues can hold the same id.

if #ARGV % 2 ~= 0 then
  error('chronoq: waiting.lua takes the stream prefix, the group, then pairs of queue and id')
end

local function parse_id(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if not ms then
    error('chronoq: a stream entry id must look like <ms>-<seq>, got ' .. tostring(id))
  end
  return tonumber(ms), tonumber(seq)
end

local function id_above(a, b)
  local a_ms, a_seq = parse_id(a)
  local b_ms, b_seq = parse_id(b)
  return a_ms > b_ms or (a_ms == b_ms and a_seq > b_seq)
end

-- The group's last-delivered-id, false when the stream has no such group, nil when no stream.
local delivered_up_to = {}
local function last_delivered(stream)
  if delivered_up_to[stream] == nil then
    local found = false
    if redis.call('EXISTS', stream) == 1 then
      for _, flat in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
        local group = {}
        for i = 1, #flat, 2 do
          group[flat[i]] = flat[i + 1]
        end
        if group['name'] == ARGV[2] then
          found = group['last-delivered-id']
        end
      end
      delivered_up_to[stream] = found
    else
      delivered_up_to[stream] = 'none'
    end
  end
  return delivered_up_to[stream]
end

local waiting = {}
for i = 3, #ARGV, 2 do
  local stream, id = ARGV[1] .. ARGV[i], ARGV[i + 1]
  parse_id(id)
  local last = last_delivered(stream)
  if last ~= 'none' then
    local pending = {}
    if last then
      pending = redis.call('XPENDING', stream, ARGV[2], id, id, 1)
    end
    if #pending > 0 then
      waiting[#waiting + 1] = (i - 1) / 2
    elseif (not last or id_above(id, last)) and #redis.call('XRANGE', stream, id, id) > 0 then
      waiting[#waiting + 1] = (i - 1) / 2
    end
  end
end
return waiting
