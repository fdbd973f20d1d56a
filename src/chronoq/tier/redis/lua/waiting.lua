-- waiting.lua: which stream entries of one partition still wait for a worker to settle them.
-- Read-only and not fenced: any leader (or a status reader) may ask.
--
-- KEYS[1]  <prefix>:{p<p>}:queues   (not read: it names the partition's slot, so that Redis
--          Cluster sends the script to the node holding the partition's streams)
-- ARGV[1]  <prefix>:{p<p>}:q:  the prefix of the partition's stream keys (same slot as KEYS[1])
-- ARGV[2]  the consumer group workers read with ("chronoq")
-- ARGV[3], ARGV[4], ...  pairs of queue and entry id, as move.lua returned them
--
-- What waiting means: waits.lua (scripts.py prepends it), which defines entry_waits().
--
-- Returns the positions (1 for the first pair) of the pairs whose entries wait, in order: entry
-- ids alone would be ambiguous, as streams of different queues can hold the same id.

if #ARGV % 2 ~= 0 then
  error('chronoq: waiting.lua takes the stream prefix, the group, then pairs of queue and id')
end

local waiting = {}
for i = 3, #ARGV, 2 do
  if entry_waits(ARGV[1] .. ARGV[i], ARGV[i + 1], ARGV[2]) then
    waiting[#waiting + 1] = (i - 1) / 2
  end
end
return waiting
