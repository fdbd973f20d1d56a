"""Tiered dispatch, the scale-out tier: everything of it lives in this package.

Partition leaders (elected with etcd leases) keep near-due timers in Redis sorted sets and an
in-memory timing wheel, and move due jobs onto Redis Streams with one epoch-fenced Lua script;
workers read the streams and confirm each job in PostgreSQL, the system of record (docs/tier.md).

```
 scheduler process                                  worker process
   leader.py   TierLeader: leadership, the loops      source.py  StreamJobSource (a JobSource)
     ├── stager.py   Stager: PostgreSQL → Redis           └── redis/streams.py RedisStreamReader
     ├── mover.py    Mover: Redis → streams, trims
     ├── partitions.py Led: what stager and mover share
     ├── wheel.py    TimingWheel
     ├── redis/timers.py RedisTimerStore + lua/*.lua
     ├── etcd/       EtcdElector (a PartitionElector)
     └── dbclock.py  the database's clock, read once a step
 ports.py    TimerStore, StreamReader: what the leader and the source need of Redis
 wiring.py   builds the parts from an app's settings, with one clear error each
 status.py   what `chronoq tier status`, the dashboard and /metrics read
 metrics.py  the tier's Prometheus counters and its scrape-time collector
```

The store keeps only its side of the tier: the port methods (`job_stage_candidates`,
`job_claim_ids`, `tier_partitions`) and their SQL, shared by the adapters in
`chronoq.storage.tier`. Only this package imports redis or etcd3gw, and nothing imports this
package unless dispatch is tiered, so a db-dispatch app never loads either client.
"""
