-- waits.lua: whether a stream entry still waits for a worker to settle it. Prepended to the
-- scripts that ask (waiting.lua, stage.lua; scripts.py does it), so one rule decides for both.
--
-- An entry waits when a worker read it and has not acknowledged it yet (it is in the group's
-- pending list: being confirmed, held until its row is free or its job due, or left by a dead
-- worker for its peers to claim), or when no worker has read it yet (above the group's
-- last-delivered-id, or no group exists: no worker ever read the stream). An entry that is
-- acknowledged or trimmed waits no more, whatever its job's state in the database.

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

-- The last-delivered-id of group `wanted` on `stream`: false when the stream has no such
-- group, 'none' when there is no such stream. Read once a stream per script call.
local delivered_up_to = {}
local function last_delivered(stream, wanted)
  if delivered_up_to[stream] == nil then
    local found = false
    if redis.call('EXISTS', stream) == 1 then
      for _, flat in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
        local info = {}
        for i = 1, #flat, 2 do
          info[flat[i]] = flat[i + 1]
        end
        if info['name'] == wanted then
          found = info['last-delivered-id']
        end
      end
      delivered_up_to[stream] = found
    else
      delivered_up_to[stream] = 'none'
    end
  end
  return delivered_up_to[stream]
end

-- entry_waits(stream, id, group): true when entry `id` of `stream` waits (see above).
local function entry_waits(stream, id, group)
  parse_id(id)
  local last = last_delivered(stream, group)
  if last == 'none' then
    return false
  end
  if last and #redis.call('XPENDING', stream, group, id, id, 1) > 0 then
    return true
  end
  return (not last or id_above(id, last)) and #redis.call('XRANGE', stream, id, id) > 0
end
