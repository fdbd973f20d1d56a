"""The etcd adapter of the partition elector port (`chronoq.coordination.base`).

```
 EtcdElector   elector.py: one lease per process, one create-if-absent key per partition
   └── Gateway gateway.py: the few etcd requests it makes, over etcd's HTTP gateway, on
         │                 several members
         └── Login access.py: the user, its token and the TLS files (EtcdAccess)
 FairShare     share.py: how many partitions each live member campaigns for
```
"""

from chronoq.tier.etcd.elector import EtcdElector

__all__ = ["EtcdElector"]
