"""Leader election for the partitions of the scale-out tier: etcd leases, and a static elector
for tests (see `chronoq.coordination.base` for the port)."""
