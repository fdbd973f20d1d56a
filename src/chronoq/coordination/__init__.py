"""Leader election for the partitions of the scale-out tier: etcd leases, and a static elector
for tests (see `chronoq.coordination.base` for the port).

```
 PartitionElector (base.py, the port)
 ├── EtcdElector     etcd.py: one lease per process, one create-if-absent key per partition
 └── StaticElector   static.py: leads what a test says, forever
```
"""

from chronoq.coordination.base import Leadership, PartitionElector, PartitionLeader
from chronoq.coordination.etcd import EtcdElector
from chronoq.coordination.static import StaticElector

__all__ = ["EtcdElector", "Leadership", "PartitionElector", "PartitionLeader", "StaticElector"]
