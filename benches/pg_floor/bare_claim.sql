-- A bare claim, as pgbench runs it: no rules, no checks, no client work. One todo locked
-- with SKIP LOCKED, the journal's lock, the lease written with its chained journal line, an
-- asynchronous COMMIT, then a second transaction that waits for the disk (as loopx does: it
-- writes WAL of its own, a logical message, without which its commit would not wait).
\set a random(1, 2000)
BEGIN;
SELECT id, body, seq FROM todos WHERE id = ANY(ARRAY['t-' || :a, 't-' || (:a + 1)]) LIMIT 1 FOR UPDATE SKIP LOCKED;
SELECT pg_advisory_xact_lock(42);
WITH h AS (SELECT seq, line FROM journal ORDER BY seq DESC LIMIT 1),
 u AS (UPDATE todos t SET body = t.body || '{"lease":{"holder":"a1","fence":3,"expires_at":"2026-12-01T18:00:00Z"}}', seq = (SELECT seq + 1 FROM h) WHERE t.id = 't-' || :a RETURNING 1)
INSERT INTO journal SELECT h.seq + 1, '{"seq":' || (h.seq + 1) || ',"at":"2026-12-01T17:00:00Z","actor":"a1","action":"todo.claim","target":"t-1","data":{"fence":3},"prev":"' || encode(sha256(convert_to(h.line, 'UTF8')), 'hex') || '","tx":1,"files":[]}' FROM h;
SET LOCAL synchronous_commit = off;
COMMIT;
BEGIN;
SELECT pg_logical_emit_message(true, 'loopx', '');
COMMIT;
