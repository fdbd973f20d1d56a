"""`python -m bench.tiermodel`: how many partitions, Redis shards and scheduler processes a fleet
of the scale-out tier needs, and what limits it first, from measured per-operation costs.

```
 costs  measured now on this machine (bench.tiermodel.measure: PostgreSQL, Redis, the wheel,
        a private etcd), or read from --costs FILE (a JSON written by --save-costs)
   │
   ▼
 model  (bench.tiermodel.model) costs times the fleet's rates, per resource: PostgreSQL CPU and
        memory, Redis CPU and memory, scheduler CPU, etcd CPU; the busiest unit's utilisation
   │
   ▼
 report utilisation per resource, the bottleneck and the first thing to change, the rate at
        which this fleet saturates, and the same fleet at a quarter of the rate up to 4 times it
```

It is a model: linear in every cost, steady state, even spread. Its assumptions are printed with
every report (and listed in docs/tier.md, "Sizing model").
"""
