"""The shared half of the two SQL stores, one part per port (`chronoq.storage.port`).

```
 SqlStore (chronoq.storage.sqlstore) = the parts below + migrations + leadership
   dialect.py    SqlDialect    the hooks each store supplies: connections, values, fences
   jobs.py       JobsSql       streamed enqueue, lease rescue, fenced batch writes
   jobadmin.py   JobAdminSql   look-ups, cancel, dead letters, counts, pruning
   queues.py     QueuesSql     pause, rate and concurrency limits, key limits
   schedules.py  SchedulesSql  schedules and the cron enqueuer's passes
   processes.py  ProcessesSql  the fleet registry
   tier.py       TierSql       the partition count of tiered dispatch
```
"""
