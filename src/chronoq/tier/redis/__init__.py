"""The Redis side of tiered dispatch: the timer store of partition leaders and the stream reader
of workers.

```
 partition leader (epoch e)                         worker
   RedisTimerStore                                    RedisStreamReader
     take_over ─► lua/take_over.lua                     read ─► XREADGROUP over all P x Q streams
     stage     ─► lua/stage.lua    ┐                           (+ XAUTOCLAIM of orphans)
     move_due  ─► lua/move.lua     ├ fenced by          ack  ─► XACK
     trim      ─► lua/trim.lua     ┘ lua/fence.lua
                                                       then confirm each claim in PostgreSQL
 <prefix>:{p7}:epoch   :timers   :queues   :q:<queue>      (keys.py: one hash slot per partition)
```

PostgreSQL stays the system of record: anything here can be lost (a restart without
persistence) and is rebuilt from the database; the scripts notice the loss (no epoch stored)
and say so instead of acting on an empty partition.

`connect(url)` opens a checked client. Errors: a malformed URL is `InvalidDSN` (a
`ConfigError`), a Redis that cannot be reached `RedisUnavailable` (a `StoreError`), any other
Redis failure `StoreError`; the ports' `StaleEpoch` and `PartitionLost` come from `stage`.
"""

from __future__ import annotations

from chronoq.tier.redis.connection import RedisUnavailable, connect
from chronoq.tier.redis.keys import DEFAULT_PREFIX, PartitionKeys, partition_keys
from chronoq.tier.redis.streams import DEFAULT_GROUP, RedisStreamReader
from chronoq.tier.redis.timers import MAX_MOVE_LIMIT, STAGE_BATCH, RedisTimerStore

__all__ = [
    "DEFAULT_GROUP",
    "DEFAULT_PREFIX",
    "MAX_MOVE_LIMIT",
    "STAGE_BATCH",
    "PartitionKeys",
    "RedisStreamReader",
    "RedisTimerStore",
    "RedisUnavailable",
    "connect",
    "partition_keys",
]
