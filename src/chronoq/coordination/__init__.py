"""Leadership: one port, `PartitionElector`, and its adapters.

Every singleton duty of chronoq is an election: the scheduler's leader-only services (cron,
rescuer, pruner) and, in tiered dispatch, each partition of the tier. One shape serves both: a
duty is an election over a number of partitions, and the scheduler's duty is an election over
one partition, partition 0.

```
 PartitionElector (base.py, the port)
 ├── PostgresElector  postgres.py  an advisory lock per (duty, partition), held by a session
 │                                 of its own; the term in a chronoq_leaders row
 ├── SqliteElector    sqlite.py    a chronoq_leaders row per (duty, partition), with an expiry
 │        └── both: RecordedElector (records.py): claim every partition it can, trust, resign
 ├── EtcdElector      chronoq.tier.etcd: one lease per process, a create-if-absent key per
 │                    partition, a fair share of them among the live members
 └── StaticElector    static.py: leads what a test says, forever (also chronoq.testing's)
```

Term-scoped
-----------
`step()` is called again and again by every candidate. It renews what the process holds,
campaigns for what it may take, and returns the partitions led now, each a `Leadership
(partition, epoch, trusted_until)`. The epoch names the term: it grows strictly at every change
of leader of a partition (PostgreSQL and SQLite count `term` up in the row when the holder
changes; etcd's is the key's create revision), so anything a leader writes can carry it and a
stale leader's write can be refused (the tier's Redis writes are). A leader resigns by its
(holder, term): `close()` expires only the rows, and deletes only the keys, of its own terms.

Conservative
------------
Trust is local and ends first:

```
 step sent at t ──► confirmed ──────────── trusted ──────────┐ trusted_until = t + ttl/2
                                                             │ the leader stops acting here
                                            the lease or row can expire: t + ttl (or later)
                                            only then can a successor be elected
```

A leader acts for a partition only before `trusted_until` (monotonic seconds of its own
process), measured from when the confirming request was *sent*, so a slow answer eats into the
window and never extends it. A step that cannot confirm (the store or etcd does not answer, a
statement fails on the lock's session) returns {}: the leader steps down at once rather than
guessing. A step that outlasted its own window returns {} too.

Ordered transitions
-------------------
An elector returns states; the process that steps it turns successive states into transitions
and delivers them to its observers in the order they happened, from the one thread that steps:
the scheduler emits `LeaderChanged` (elected, then deposed, with the reason), the tier's leader
`PartitionLeaderChanged` per partition (a partition lost or re-elected under a new epoch is a
step-down before the new term starts). Nothing is delivered from the elector's own threads, so a
subscriber never sees a deposition before the election it ends.

A new elector
-------------
Implement the four methods of `PartitionElector` (and `holder`, `partitions`), keep to the two
rules above (epochs grow at each new leader; trust ends before anyone else can be elected), and
add a kit for it to `tests/contract/test_elector.py`, which runs the same contract on every
adapter. Give it to `Scheduler(app, elector=...)` or `TierLeader(app.runtime(), elector, ...)`.
The single-duty shape that came before the port (`attempt()`, `resign()`) is still accepted, with
a DeprecationWarning (`legacy.py`).
"""

from chronoq.coordination.base import Leadership, LeaderTerm, PartitionElector, PartitionLeader
from chronoq.coordination.static import StaticElector

__all__ = ["LeaderTerm", "Leadership", "PartitionElector", "PartitionLeader", "StaticElector"]
