-- take_over.lua: a new leader records its epoch for a partition.
--
-- KEYS[1]  <prefix>:{p<p>}:epoch
-- ARGV[1]  epoch of the new leadership (an integer that only grows per partition)
-- ARGV[2]  '1' to take the partition over from a higher stored epoch, else '0'. Only a leader
--          that has shown the stored epoch cannot belong to a live leader sends '1': its
--          coordination service still grants it the partition under its own, lower epoch long
--          after Redis first refused it, which no leader of the same service can explain (one
--          leader key per partition: a higher epoch would need ours gone). The stored epoch was
--          issued by an etcd that was since rebuilt or replaced, whose revisions start again.
--
-- Returns {status, lost, stored}:
--   status 'ok'     the epoch is recorded (an equal epoch taking over again is accepted)
--   status 'stale'  a higher epoch is stored and ARGV[2] is not '1': nothing is written, this
--                   leadership must not act
--   lost    1 when no epoch was stored: Redis never saw the partition, or lost it (a restart
--           without persistence, a flush). A brand-new store reports it too, which costs one
--           re-stage of the horizon, which a new leader does anyway. 0 otherwise.
--   stored  the epoch stored before this call ('' when none)

local epoch = tonumber(ARGV[1])
if not epoch then
  error('chronoq: the epoch must be a number, got ' .. tostring(ARGV[1]))
end
if ARGV[2] ~= '0' and ARGV[2] ~= '1' then
  error('chronoq: the force flag must be 0 or 1, got ' .. tostring(ARGV[2]))
end

local stored = redis.call('GET', KEYS[1])
if stored and tonumber(stored) > epoch and ARGV[2] ~= '1' then
  return {'stale', 0, stored}
end
redis.call('SET', KEYS[1], ARGV[1])
if stored then
  return {'ok', 0, stored}
end
return {'ok', 1, ''}
