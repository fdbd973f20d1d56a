-- chronoq 0006 (PostgreSQL only): enqueue from SQL. `chronoq_enqueue` lets code in any language,
-- and triggers in the database itself, enqueue a job by its task's name in the caller's
-- transaction, taking the task's queue and settings from the fleet registry (0005) and checking
-- the job as the Python producers do (chronoq.core.enqueue.prepare); `chronoq_enqueue_result`
-- also says whether a live job already held the key; `chronoq_catalog` lists the known tasks.
-- Every refusal is an exception whose COLUMN field names the argument at fault (docs/sql.md).
-- The helpers carry a version in their names, so a later migration can replace one beside the
-- old while the public functions keep theirs.

-- The tasks live or recent processes know, each with the settings of the live process that
-- reported it most recently, failing any live one of the most recent record of the last day
-- (chronoq.core.fleet.catalog). `task` given: that task only.
CREATE FUNCTION chronoq_catalog(task text DEFAULT NULL)
RETURNS TABLE (
    name          text,
    queue         text,
    priority      integer,
    max_attempts  integer,
    lease         double precision,
    timeout       double precision,
    misfire       text,
    misfire_grace double precision,
    params        jsonb,
    live          boolean,
    seen_at       timestamptz
)
-- PL/pgSQL rather than SQL for its plan cache: the enqueue calls it once per job.
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now)
    SELECT DISTINCT ON (t.info ->> 'name')
           t.info ->> 'name', t.info ->> 'queue',
           coalesce((t.info ->> 'priority')::integer, 0), (t.info ->> 'max_attempts')::integer,
           (t.info ->> 'lease')::float8, (t.info ->> 'timeout')::float8,
           coalesce(t.info ->> 'misfire', 'run_late'), (t.info ->> 'misfire_grace')::float8,
           coalesce(t.info -> 'params', '[]'::jsonb),
           p.stopped_at IS NULL AND p.expires_at > clock.now, p.seen_at
    FROM clock, chronoq_processes AS p,
         jsonb_array_elements(p.tasks) WITH ORDINALITY AS t(info, n)
    WHERE least(coalesce(p.stopped_at, p.expires_at), p.expires_at) > clock.now - interval '1 day'
      AND ($1 IS NULL OR p.tasks @> jsonb_build_array(jsonb_build_object('name', $1)))
      AND ($1 IS NULL OR t.info ->> 'name' = $1)
    ORDER BY t.info ->> 'name', p.stopped_at IS NULL AND p.expires_at > clock.now DESC,
             p.seen_at DESC, p.id, t.n;
END;
$$;

-- Raises the error of an argument chronoq refuses: `field` goes in the COLUMN field.
CREATE FUNCTION chronoq_refuse_v1(
    field text, message text, hint text DEFAULT NULL, code text DEFAULT '22023'
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = message, ERRCODE = code, COLUMN = field,
        HINT = coalesce(hint, format('see the %s argument of chronoq_enqueue', field));
END;
$$;

-- "; did you mean 'x'?" for the closest choice, else "; known: a, b", else "". Close: a share
-- of characters in common order (2 x longest common subsequence / both lengths) of at least
-- 0.6, the measure Python's difflib approximates.
CREATE FUNCTION chronoq_suggest_v1(wanted text, choices text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    choice text;
    best text;
    best_score float8 := 0.6;
    score float8;
    a text[] := regexp_split_to_array(wanted, '');
    b text[];
    prev integer[];
    cur integer[];
BEGIN
    IF coalesce(cardinality(choices), 0) = 0 THEN
        RETURN '';
    END IF;
    FOREACH choice IN ARRAY (SELECT array_agg(c ORDER BY c) FROM unnest(choices) AS c) LOOP
        CONTINUE WHEN 2.0 * least(length(wanted), length(choice))
                      / greatest(length(wanted) + length(choice), 1) < best_score;
        b := regexp_split_to_array(choice, '');
        prev := array_fill(0, ARRAY[cardinality(b) + 1]);
        FOR i IN 1 .. cardinality(a) LOOP
            cur := array_fill(0, ARRAY[cardinality(b) + 1]);
            FOR j IN 1 .. cardinality(b) LOOP
                cur[j + 1] := CASE WHEN a[i] = b[j] THEN prev[j] + 1
                                   ELSE greatest(prev[j + 1], cur[j]) END;
            END LOOP;
            prev := cur;
        END LOOP;
        score := 2.0 * prev[cardinality(b) + 1] / (length(wanted) + length(choice));
        IF score > best_score OR (score = best_score AND best IS NULL) THEN
            best := choice;
            best_score := score;
        END IF;
    END LOOP;
    IF best IS NOT NULL THEN
        RETURN format('; did you mean %L?', best);
    END IF;
    RETURN '; known: ' || (SELECT string_agg(c, ', ' ORDER BY c) FROM unnest(choices) AS c);
END;
$$;

-- A task or queue name: non-empty text without control characters, at most 200 characters.
CREATE FUNCTION chronoq_check_name_v1(field text, value text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF value IS NULL OR value ~ '^\s*$' THEN
        PERFORM chronoq_refuse_v1(field, format('%s name must be a non-empty string, got %s',
                                                field, coalesce(quote_literal(value), 'NULL')));
    ELSIF char_length(value) > 200 THEN
        PERFORM chronoq_refuse_v1(field, format('%s name is %s characters long; the limit is 200',
                                                field, char_length(value)));
    ELSIF value ~ '[\x01-\x1f\x7f]' THEN
        PERFORM chronoq_refuse_v1(field, format('%s name %L contains control characters',
                                                field, value));
    END IF;
END;
$$;

-- A job key or rate key: non-empty, at most 1000 characters and 1800 bytes (it shares a btree
-- entry with its queue's name in chronoq_key_buckets).
CREATE FUNCTION chronoq_check_key_v1(field text, value text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF value = '' THEN
        PERFORM chronoq_refuse_v1(field, format('%s must be a non-empty string, got %L',
                                                field, value));
    ELSIF char_length(value) > 1000 THEN
        PERFORM chronoq_refuse_v1(field, format('%s is %s characters long; the limit is 1000',
                                                field, char_length(value)));
    ELSIF octet_length(value) > 1800 THEN
        PERFORM chronoq_refuse_v1(field, format(
            '%s is %s bytes long in UTF-8; the limit is 1800 bytes', field, octet_length(value)));
    END IF;
END;
$$;

-- The payload: a JSON object, nested at most 256 deep, at most `chronoq.payload_limit` bytes
-- (1 MiB unless set) as compact JSON, the encoding the Python producers measure.
CREATE FUNCTION chronoq_check_payload_v1(task text, payload jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    text_form text := payload::text;
    size bigint := octet_length(payload::text);
    payload_limit bigint := coalesce(
        nullif(current_setting('chronoq.payload_limit', true), '')::bigint, 1048576);
BEGIN
    IF jsonb_typeof(payload) <> 'object' THEN
        PERFORM chronoq_refuse_v1('payload', format(
            'payload for task %L must be a JSON object (of the handler''s arguments), got %s',
            task, jsonb_typeof(payload)));
    END IF;
    -- Counting brackets first spares the walk to almost every payload; strings may hold some.
    IF length(text_form) - length(translate(text_form, '[{', '')) > 256
       AND jsonb_path_exists(payload, 'strict $.**{256} ? (@.type() == "object" '
                                      '|| @.type() == "array")')
    THEN
        PERFORM chronoq_refuse_v1('payload', format(
            'payload for task %L is nested more than 256 levels deep (objects and arrays)', task));
    END IF;
    IF size > payload_limit THEN
        -- The text form puts a space after each ':' and ',' between members: compact JSON
        -- has neither.
        size := size - (
            SELECT coalesce(sum(CASE jsonb_typeof(item)
                                    WHEN 'object' THEN greatest(2 * members - 1, 0)
                                    ELSE greatest(members - 1, 0) END), 0)
            FROM jsonb_path_query(payload, 'strict $.** ? (@.type() == "object" '
                                           '|| @.type() == "array")') AS item,
                 LATERAL (SELECT CASE jsonb_typeof(item)
                                     WHEN 'object' THEN (SELECT count(*)
                                                         FROM jsonb_object_keys(item))
                                     ELSE jsonb_array_length(item) END AS members) AS m);
    END IF;
    IF size > payload_limit THEN
        PERFORM chronoq_refuse_v1('payload', format(
            'payload for task %L is %s bytes encoded; the limit is %s bytes', task, size,
            payload_limit),
            'raise chronoq.payload_limit, or store the data elsewhere and pass a reference',
            '54000');
    END IF;
END;
$$;

-- Why a handler with the recorded `params` (TaskInfo.params) cannot take `payload` as keyword
-- arguments, or NULL when it can (chronoq.core.validate.PayloadShape).
CREATE FUNCTION chronoq_payload_misfit_v1(task text, params jsonb, payload jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF params IS NULL THEN
        RETURN NULL;  -- a task no process knows: any payload object goes
    END IF;
    RETURN (
        WITH param AS (
            SELECT p ->> 'name' AS name, p ->> 'kind' AS kind,
                   (p ->> 'required')::boolean AS required, n
            FROM jsonb_array_elements(params) WITH ORDINALITY AS a(p, n)
        ),
        given AS (SELECT jsonb_object_keys(payload) AS name),
        problems AS (
            SELECT concat_ws('; ',
                (SELECT 'missing ' || string_agg(quote_literal(name), ', ' ORDER BY name)
                 FROM param WHERE required AND kind IN ('positional_or_keyword', 'keyword_only')
                              AND name NOT IN (SELECT name FROM given)),
                (SELECT 'unexpected ' || string_agg(quote_literal(g.name), ', ' ORDER BY g.name)
                 FROM given AS g
                 WHERE NOT EXISTS (
                     SELECT 1 FROM param
                     WHERE (param.name = g.name
                            AND param.kind IN ('positional_or_keyword', 'keyword_only'))
                        OR (param.kind = 'var_keyword' AND NOT EXISTS (
                            SELECT 1 FROM param AS po
                            WHERE po.kind = 'positional_only' AND po.name = g.name)))),
                (SELECT 'positional-only ' || string_agg(quote_literal(name), ', ' ORDER BY name)
                        || ' cannot be given in a payload'
                 FROM param WHERE required AND kind = 'positional_only')
            ) AS text
        )
        SELECT format('payload does not fit %s(%s): %s', task,
                      (SELECT string_agg(CASE kind WHEN 'var_positional' THEN '*'
                                                   WHEN 'var_keyword' THEN '**' ELSE '' END
                                         || name, ', ' ORDER BY n)
                       FROM param),
                      problems.text)
        FROM problems
        WHERE problems.text <> '');
END;
$$;

-- A job's misfire rule as chronoq_jobs stores it: the job's own policy and grace, else its
-- task's, else "run_late"; a grace given alone means "skip" for a task without a rule
-- (chronoq.core.enqueue). `grace` (seconds) is set for "skip" only.
CREATE FUNCTION chronoq_job_misfire_v1(
    given text, given_grace interval, task_policy text, task_grace float8,
    OUT policy text, OUT grace float8
)
LANGUAGE plpgsql AS $$
DECLARE
    seconds float8 := coalesce(task_grace, 60);
BEGIN
    IF given IS NULL AND given_grace IS NULL THEN
        policy := coalesce(task_policy, 'run_late');
    ELSE
        policy := replace(lower(btrim(coalesce(given, task_policy, 'skip'))), '-', '_');
        seconds := coalesce(extract(epoch FROM given_grace)::float8, 60);
    END IF;
    IF policy IN ('coalesce', 'catch_up') THEN
        PERFORM chronoq_refuse_v1('misfire', format(
            'misfire policy %L applies to schedules only; a one-off job takes ''run_late'' or '
            '''skip''', given));
    ELSIF policy NOT IN ('run_late', 'skip') THEN
        PERFORM chronoq_refuse_v1('misfire', format(
            'unknown misfire policy %L%s (choose run_late or skip)', given,
            chronoq_suggest_v1(policy, ARRAY['run_late', 'skip'])));
    END IF;
    IF seconds < 0 THEN
        PERFORM chronoq_refuse_v1('misfire_grace', format(
            'misfire grace must not be negative, got %s', given_grace));
    ELSIF seconds > 100 * 365 * 86400.0 THEN
        PERFORM chronoq_refuse_v1('misfire_grace', format(
            'misfire grace must be at most 100 years, got %s', given_grace));
    END IF;
    grace := CASE WHEN policy = 'skip' THEN seconds END;
END;
$$;

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
