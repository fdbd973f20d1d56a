"""The store port, one part per table as the SQL is split (`storage/<dialect>/*.sql`).

```
 JobStore (chronoq.storage.base) = every part below + leadership
   session.py    SessionPort     migrations, the database clock, change listeners   session.sql
   jobs.py       JobsPort        enqueue, claim, finish, leases, wake-ups            jobs.sql
   jobadmin.py   JobAdminPort    look-ups, cancel, dead letters, counts, pruning     jobs.sql
   queues.py     QueuesPort      pause, rate and concurrency limits, key limits      queues.sql
   schedules.py  SchedulesPort   schedules and the cron enqueuer's passes            schedules.sql
   processes.py  ProcessesPort   the fleet registry                                  processes.sql
   tier.py       TierPort        staging and claims by id for tiered dispatch        tier.sql
```

Each module holds its methods' params and result dataclasses beside its Protocol. Code that
uses the store imports them from `chronoq.storage.base`, which names them all.
"""
