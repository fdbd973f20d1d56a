"""The fleet registry: which chronoq processes run, what tasks they know, and how that is shown.

```
 records.py  ProcessInfo, ProcessRecord, Fleet, TaskInfo, catalog: the pure records (no I/O),
             which the store reads and writes
 beacon.py   Beacon: each worker, scheduler and server beats its record into the store;
             FleetLookup: a cached read for the worker and the app
 view.py     one shape for `chronoq processes`, the API, the dashboard and /metrics
```

This file imports nothing: the store imports `records`, and `beacon` imports the store.
"""
