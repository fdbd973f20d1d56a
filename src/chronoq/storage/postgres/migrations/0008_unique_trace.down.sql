-- chronoq 0008 down: forgets keys unique for a period and the jobs' trace context, and gives
-- chronoq_enqueue and chronoq_enqueue_result back their 0006 form.
DROP FUNCTION chronoq_enqueue(
    text, jsonb, text, timestamptz, interval, text, bigint, bigint, text, interval, text,
    interval);
DROP FUNCTION chronoq_enqueue_result(
    text, jsonb, text, timestamptz, interval, text, bigint, bigint, text, interval, text,
    interval);
DROP FUNCTION chronoq_unique_holder_v1(text, interval);
DROP FUNCTION chronoq_unique_record_v1(text, bigint, timestamptz, interval);
DROP FUNCTION chronoq_unique_lock_v1(text[]);
DROP TABLE chronoq_unique_keys;
ALTER TABLE chronoq_jobs DROP COLUMN trace_context;

-- Enqueue one job (see docs/sql.md): `id` is the job's, `created` false when a live job already
-- held `key` (the id is then that job's).
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

    -- The insert of chronoq's own producers (jobs.sql, job_insert): a key is unique among live
    -- jobs. A live job holding the key may finish between the INSERT and the look-up; then the
    -- key is free again and the next INSERT succeeds, so this settles within a few rounds.
    FOR attempt IN 1 .. 10 LOOP
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
    rate_key      text        DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT r.id
            FROM chronoq_enqueue_result($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS r);
END;
$$;
