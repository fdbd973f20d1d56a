-- chronoq 0006 down: forgets enqueue from SQL.
DROP FUNCTION IF EXISTS chronoq_enqueue(
    text, jsonb, text, timestamptz, interval, text, bigint, bigint, text, interval, text);
DROP FUNCTION IF EXISTS chronoq_enqueue_result(
    text, jsonb, text, timestamptz, interval, text, bigint, bigint, text, interval, text);
DROP FUNCTION IF EXISTS chronoq_job_misfire_v1(text, interval, text, float8);
DROP FUNCTION IF EXISTS chronoq_payload_misfit_v1(text, jsonb, jsonb);
DROP FUNCTION IF EXISTS chronoq_check_payload_v1(text, jsonb);
DROP FUNCTION IF EXISTS chronoq_check_key_v1(text, text);
DROP FUNCTION IF EXISTS chronoq_check_name_v1(text, text);
DROP FUNCTION IF EXISTS chronoq_suggest_v1(text, text[]);
DROP FUNCTION IF EXISTS chronoq_refuse_v1(text, text, text, text);
DROP FUNCTION IF EXISTS chronoq_catalog(text);
