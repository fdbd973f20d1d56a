"""Leader election: the partition elector port and its static adapter for tests.

```
 PartitionElector (base.py, the port)
 ├── StaticElector   static.py: leads what a test says, forever
 └── EtcdElector     chronoq.tier.etcd: one lease per process, one create-if-absent key per
                     partition (it lives with the tier, the one part of chronoq that needs etcd)
```
"""

from chronoq.coordination.base import Leadership, PartitionElector, PartitionLeader
from chronoq.coordination.static import StaticElector

__all__ = ["Leadership", "PartitionElector", "PartitionLeader", "StaticElector"]
