"""Chaos over a tiered fleet on a Redis Cluster: the fleet of tests.chaos.tiered (3 schedulers,
3 workers, the session's etcd), with timers and streams on a private Redis Cluster of 3 masters
and 3 replicas (tests.services.redis_cluster) started for the run.

```
 faults:  kill_redis_master   SIGKILL the master serving a random partition's slot, while jobs
                              are being moved and read; its replica is promoted (about 2 s with
                              a 1 s node timeout), then the killed node starts again and rejoins
                              as a replica, so the next kill has a replica to promote
```

The checker's rules are those of every run: every job runs, none runs twice at once, stale
writes are refused. Entries that reached the killed master and not its replica are lost with it;
their jobs are still pending and are staged again (docs/tier.md), so they run late, not never.
"""

from __future__ import annotations

import time
from pathlib import Path

import chronoq
from chronoq.tier.redis import partition_keys
from tests.chaos.cluster import PrivateCluster
from tests.chaos.runner import Outcome, Scenario
from tests.chaos.tiered import PARTITIONS, TTL, TieredRun, TierServices, _tiered
from tests.services.redis_cluster import PrivateRedisCluster


class ClusterTieredRun(TieredRun):
    def __init__(
        self,
        cluster: PrivateCluster,
        scenario: Scenario,
        seed: int,
        work: Path,
        tier: TierServices,
    ) -> None:
        super().__init__(cluster, scenario, seed, work, tier)
        self.redis_cluster = PrivateRedisCluster()
        self.promotions: list[float] = []  # seconds from a master's kill to its replica serving

    def tier_env(self) -> dict[str, str]:
        return {**super().tier_env(), "CHRONOQ_REDIS_URL": self.redis_cluster.url}

    def open_app(self) -> chronoq.App:
        return chronoq.App(
            self.dsn,
            dispatch="tiered",
            redis_url=self.redis_cluster.url,
            etcd_endpoints=",".join(self.tier.etcd.endpoints),
            redis_prefix=self.prefix,
            partitions=PARTITIONS,
            leader_ttl=TTL,
        )

    def execute(self) -> Outcome:
        self.redis_cluster.start()
        try:
            outcome = super().execute()
        finally:
            self.redis_cluster.stop()
        print(f"    redis master killed -> replica serving: {self.promotions}", flush=True)
        return outcome

    def kill_redis_master(self) -> None:
        partition = self.rng.randrange(PARTITIONS)
        key = partition_keys(self.prefix, partition).epoch
        killed_at = time.time()
        port = self.redis_cluster.kill_master_of(key)
        self.record("kill_redis_master", port)
        self.promotions.append(round(time.time() - killed_at, 2))
        self.redis_cluster.restart(port)


CLUSTER_SCENARIOS = {
    scenario.name: scenario
    for scenario in (_tiered("redis-cluster-master-sigkill", ("kill_redis_master",), (3.0, 5.0)),)
}
