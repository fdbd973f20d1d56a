-- chronoq 0008: keys unique for a period, and the trace context a job was enqueued in.
--
-- chronoq_unique_keys records, per key, the job that took it with `unique_for` and when: an
-- enqueue of the key with `unique_for` within that period returns that job, whatever became of
-- it since, finished or pruned (the record outlives the job; the pruner drops it once the
-- longest period asked of it has passed). chronoq_jobs.trace_context holds the W3C trace
-- context (traceparent, tracestate) of the enqueue, for chronoq.otel.
-- chronoq_enqueue and chronoq_enqueue_result take `unique_for` as their last argument: a new
-- argument is a new signature in PostgreSQL, which CREATE OR REPLACE cannot give an existing
-- function, so the 0006 versions are dropped and created again with it.

ALTER TABLE chronoq_jobs ADD COLUMN trace_context jsonb;

-- Keys taken for a period (`unique_for`): the job that took each one and when (its enqueue on
-- the database clock). No foreign key: the record outlives the pruning of its job, so the key
-- stays taken for the whole period. `keep_until`: the end of the longest period asked of the
-- record so far, after which the pruner drops it.
CREATE TABLE chronoq_unique_keys (
    key         text        PRIMARY KEY,
    job_id      bigint      NOT NULL,
    enqueued_at timestamptz NOT NULL,
    keep_until  timestamptz NOT NULL
);

CREATE INDEX chronoq_unique_keys_keep_idx ON chronoq_unique_keys (keep_until);

-- Take the transaction-scoped advisory locks of `keys` (one per key, shared by keys whose hashes
-- collide), in one order for every session, so that batches locking several keys cannot
-- deadlock each other.
CREATE FUNCTION chronoq_unique_lock_v1(keys text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    lock_id integer;
BEGIN
    FOR lock_id IN SELECT DISTINCT hashtext(k) FROM unnest(keys) AS k ORDER BY 1 LOOP
        -- Two int4 keys: the first one chronoq's own, so no other user of advisory locks
        -- collides.
        PERFORM pg_advisory_xact_lock(hashtext('chronoq_unique_keys'), lock_id);
    END LOOP;
END;
$$;

-- The job an enqueue of `key` unique for `period` returns instead of inserting one: the job that
-- took the key at most `period` ago (on the database clock, from that job's enqueue), whatever
-- its status, even pruned; else the live job holding the key, recorded as the key's taker from
-- its own enqueue. NULL: the key is free, and the caller inserts its job and records it (in
-- the same transaction, as job_insert_unique does). Concurrent enqueues of one key queue on a
-- transaction-scoped advisory lock, so the second sees what the first committed.
CREATE FUNCTION chronoq_unique_holder_v1(key text, period interval) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    taken record;
BEGIN
    PERFORM chronoq_unique_lock_v1(ARRAY[chronoq_unique_holder_v1.key]);
    SELECT u.job_id, u.enqueued_at INTO taken
    FROM chronoq_unique_keys AS u WHERE u.key = chronoq_unique_holder_v1.key;
    IF FOUND AND taken.enqueued_at > clock_timestamp() - period THEN
        UPDATE chronoq_unique_keys AS u
        SET keep_until = greatest(u.keep_until, u.enqueued_at + period)
        WHERE u.key = chronoq_unique_holder_v1.key;
        RETURN taken.job_id;
    END IF;
    SELECT j.id, j.created_at INTO taken
    FROM chronoq_jobs AS j
    WHERE j.key = chronoq_unique_holder_v1.key AND j.status IN ('pending', 'running');
    IF FOUND THEN
        PERFORM chronoq_unique_record_v1(key, taken.id, taken.created_at, period);
        RETURN taken.id;
    END IF;
    RETURN NULL;
END;
$$;

-- Record `job_id`, enqueued at `enqueued_at`, as the taker of `key` for `period`.
CREATE FUNCTION chronoq_unique_record_v1(
    key text, job_id bigint, enqueued_at timestamptz, period interval
) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO chronoq_unique_keys AS u (key, job_id, enqueued_at, keep_until)
    VALUES ($1, $2, $3, $3 + $4)
    ON CONFLICT (key) DO UPDATE
    SET job_id = excluded.job_id, enqueued_at = excluded.enqueued_at,
        keep_until = excluded.keep_until;
$$;

DROP FUNCTION chronoq_enqueue(
    text, jsonb, text, timestamptz, interval, text, bigint, bigint, text, interval, text);
DROP FUNCTION chronoq_enqueue_result(
    text, jsonb, text, timestamptz, interval, text, bigint, bigint, text, interval, text);

-- Enqueue one job (see docs/sql.md): `id` is the job's, `created` false when a live job already
-- held `key`, or with `unique_for` a job took it within that period (the id is then that
-- job's).
CREATE FUNCTION chronoq_enqueue_result(
    task          text,
    payload       jsonb       DEFAULT '{}',
    queue         text        DEFAULT NULL,
    run_at        timestamptz DEFAULT NULL,
    delay         interval    DEFAULT NULL,
    key           text        DEFAULT NULL,
    priority      bigint      DEFAULT NULL,
    max_attempts  bigint      DEFAULT NULL,
    misfire       text        DEFAULT NULL,
    misfire_grace interval    DEFAULT NULL,
    rate_key      text        DEFAULT NULL,
    unique_for    interval    DEFAULT NULL,
    OUT id        bigint,
    OUT created   boolean
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    known record;
    job_payload jsonb := coalesce(chronoq_enqueue_result.payload, '{}'::jsonb);
    job_queue text;
    job_priority integer;
    job_max_attempts integer;
    job_lease float8 := 60;
    job_misfire text;
    job_grace float8;
    job_key text := chronoq_enqueue_result.key;
    misfit text;
BEGIN
    PERFORM chronoq_check_name_v1('task', task);
    SELECT * INTO known FROM chronoq_catalog(task);
    IF known.name IS NULL THEN
        IF queue IS NULL THEN
            PERFORM chronoq_refuse_v1('task',
                format('unknown task %L: no live or recent worker knows it%s', task,
                       chronoq_suggest_v1(task, ARRAY(SELECT name FROM chronoq_catalog()))),
                'give the job''s queue (queue => ...) to enqueue it before its workers are '
                'deployed', '42704');
        END IF;
    END IF;
    IF queue IS NOT NULL THEN
        PERFORM chronoq_check_name_v1('queue', queue);
    END IF;
    job_queue := coalesce(queue, known.queue);

    PERFORM chronoq_check_payload_v1(task, job_payload);
    misfit := chronoq_payload_misfit_v1(task, known.params, job_payload);
    IF misfit IS NOT NULL THEN
        PERFORM chronoq_refuse_v1('payload', misfit);
    END IF;

    IF run_at IS NOT NULL AND delay IS NOT NULL THEN
        PERFORM chronoq_refuse_v1('run_at', 'give either run_at or delay, not both');
    END IF;
    SELECT m.policy, m.grace INTO job_misfire, job_grace
    FROM chronoq_job_misfire_v1(misfire, misfire_grace, known.misfire, known.misfire_grace) AS m;
    IF run_at IS NOT NULL AND NOT run_at BETWEEN '0001-01-01 00:00:00+00'
                                             AND '9999-12-31 23:59:59.999999+00' THEN
        PERFORM chronoq_refuse_v1('run_at', format(
            'run_at=%s is not an instant between the years 1 and 9999 in UTC', run_at));
    END IF;
    IF delay IS NOT NULL AND extract(epoch FROM delay) < 0 THEN
        PERFORM chronoq_refuse_v1('delay', format('delay must not be negative, got %s', delay));
    ELSIF delay IS NOT NULL AND extract(epoch FROM delay) > 100 * 365 * 86400.0 THEN
        PERFORM chronoq_refuse_v1('delay', format('delay %s is longer than 100 years', delay));
    END IF;
    IF priority IS NOT NULL AND NOT priority BETWEEN -2147483648 AND 2147483647 THEN
        PERFORM chronoq_refuse_v1('priority', format(
            'priority must be between -2147483648 and 2147483647, got %s', priority));
    END IF;
    job_priority := coalesce(priority, known.priority, 0);
    IF max_attempts IS NOT NULL AND NOT max_attempts BETWEEN 1 AND 1000 THEN
        PERFORM chronoq_refuse_v1('max_attempts', format(
            'max_attempts must be between 1 and 1000, got %s', max_attempts));
    END IF;
    -- NULL: the worker that claims the job applies its task's setting.
    job_max_attempts := coalesce(max_attempts, known.max_attempts);
    job_lease := coalesce(known.lease, job_lease);
    PERFORM chronoq_check_key_v1('key', job_key);
    PERFORM chronoq_check_key_v1('rate_key', rate_key);
    IF unique_for IS NOT NULL THEN
        IF job_key IS NULL THEN
            PERFORM chronoq_refuse_v1('unique_for',
                'unique_for needs a key: give the job''s key as well (key => ...)');
        ELSIF NOT extract(epoch FROM unique_for) > 0 THEN
            PERFORM chronoq_refuse_v1('unique_for', format(
                'unique_for must be a positive duration, got %s', unique_for));
        ELSIF extract(epoch FROM unique_for) > 100 * 365 * 86400.0 THEN
            PERFORM chronoq_refuse_v1('unique_for', format(
                'unique_for %s is longer than 100 years', unique_for));
        END IF;
    END IF;

    -- The insert of chronoq's own producers (jobs.sql, job_insert): a key is unique among live
    -- jobs. A live job holding the key may finish between the INSERT and the look-up; then the
    -- key is free again and the next INSERT succeeds, so this settles within a few rounds.
    FOR attempt IN 1 .. 10 LOOP
        IF unique_for IS NOT NULL THEN
            -- As chronoq's own producers do (jobs.sql, job_unique_holder and
            -- job_insert_unique): the key's taker within the period, else a live job, else a
            -- new job recorded as the taker.
            chronoq_enqueue_result.id := chronoq_unique_holder_v1(job_key, unique_for);
            IF chronoq_enqueue_result.id IS NOT NULL THEN
                created := false;
                RETURN;
            END IF;
        END IF;
        INSERT INTO chronoq_jobs (
            queue, task, payload, priority, run_at, max_attempts, lease_seconds, key, misfire,
            misfire_grace, rate_key)
        VALUES (
            job_queue, chronoq_enqueue_result.task, job_payload, job_priority,
            coalesce(chronoq_enqueue_result.run_at,
                     clock_timestamp() + coalesce(chronoq_enqueue_result.delay, interval '0')),
            job_max_attempts, job_lease, job_key, job_misfire, job_grace,
            chronoq_enqueue_result.rate_key)
        ON CONFLICT (key) WHERE key IS NOT NULL AND status IN ('pending', 'running') DO NOTHING
        RETURNING chronoq_jobs.id INTO chronoq_enqueue_result.id;
        IF FOUND THEN
            IF unique_for IS NOT NULL THEN
                PERFORM chronoq_unique_record_v1(
                    job_key, chronoq_enqueue_result.id,
                    (SELECT j.created_at FROM chronoq_jobs AS j
                     WHERE j.id = chronoq_enqueue_result.id),
                    unique_for);
            END IF;
            created := true;
            RETURN;
        END IF;
        SELECT j.id INTO chronoq_enqueue_result.id
        FROM chronoq_jobs AS j
        WHERE j.key = job_key AND j.status IN ('pending', 'running');
        IF FOUND THEN
            created := false;
            RETURN;
        END IF;
    END LOOP;
    PERFORM chronoq_refuse_v1('key', format(
        'could not settle the key %L: it keeps changing hands', job_key),
        'retry the enqueue', '40001');
END;
$$;

-- Enqueue one job and return its id (see chronoq_enqueue_result).
CREATE FUNCTION chronoq_enqueue(
    task          text,
    payload       jsonb       DEFAULT '{}',
    queue         text        DEFAULT NULL,
    run_at        timestamptz DEFAULT NULL,
    delay         interval    DEFAULT NULL,
    key           text        DEFAULT NULL,
    priority      bigint      DEFAULT NULL,
    max_attempts  bigint      DEFAULT NULL,
    misfire       text        DEFAULT NULL,
    misfire_grace interval    DEFAULT NULL,
    rate_key      text        DEFAULT NULL,
    unique_for    interval    DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT r.id
            FROM chronoq_enqueue_result($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) AS r);
END;
$$;
