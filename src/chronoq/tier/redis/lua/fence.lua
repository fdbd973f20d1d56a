-- fence.lua: the epoch fence, prepended to every script that mutates a partition
-- (stage.lua, move.lua, trim.lua), so that one rule decides for all of them.
--
-- Key schema of partition p (every key carries the hash tag {p<p>}, so one script touches one
-- slot and Redis Cluster can run it):
--   <prefix>:{p<p>}:epoch     string integer: the highest epoch that took the partition over
--   <prefix>:{p<p>}:timers    sorted set: member "<job_id>:<token>:<queue>", score due_ms
--   <prefix>:{p<p>}:queues    set: every queue whose stream move.lua has written to
--   <prefix>:{p<p>}:q:<queue> stream, fields job and token; consumer group "chronoq"
--
-- refusal(epoch_key, epoch) returns nil when `epoch` is the one stored, else the reply the
-- script must return at once, before it writes anything:
--   {'stale', stored}  a higher epoch took the partition over: this leader must stop
--   {'lost', stored}   no epoch is stored, or a lower one (Redis restarted empty, was flushed or
--                      came back from an older snapshot): what was staged may be gone; take the
--                      partition over again and re-stage ('' when nothing is stored)

local function refusal(epoch_key, epoch)
  local stored = redis.call('GET', epoch_key)
  if not stored then
    return {'lost', ''}
  end
  local held = tonumber(stored)
  if held > epoch then
    return {'stale', stored}
  end
  if held < epoch then
    return {'lost', stored}
  end
  return nil
end

-- Redis scripts are atomic but not transactional: a command that fails half-way leaves the
-- writes before it in place. Every script therefore checks its input before its first write.
local function number_arg(value, name)
  local parsed = tonumber(value)
  if not parsed then
    error('chronoq: ' .. name .. ' must be a number, got ' .. tostring(value))
  end
  return parsed
end

-- unpack() is bounded by Lua's C stack (about 8,000 values): variadic commands go in chunks.
local CHUNK = 500

