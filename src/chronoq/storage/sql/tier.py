"""The shared SQL of tiered dispatch's port (`TierPort`): the partition count, recorded once per
database. The tier's claims by id and its staging differ per dialect and stay in each store.
"""

from __future__ import annotations

from chronoq.storage.sql.dialect import SqlDialect
from chronoq.storage.tier import check_partition_count


class TierSql(SqlDialect):
    """The partition count of tiered dispatch, recorded once per database."""

    def tier_partitions(self, requested: int) -> int:
        """The partition count of tiered dispatch: `requested` at the first call on a database,
        the count recorded then at every later call."""
        check_partition_count(requested)
        with self._write() as db:
            # Two statements, each its own transaction on PostgreSQL: the read must see what a
            # concurrent first call committed while the insert waited for it (see tier_record).
            db.execute(self.Q["tier_record"], {"partitions": requested, "now": self._clock()})
            row = db.execute(self.Q["tier_get"]).fetchone()
        return int(row["partitions"])
