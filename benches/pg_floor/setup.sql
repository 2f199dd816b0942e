-- Tables shaped like loopx's todos and journal, without its rules.
CREATE TABLE todos (id text PRIMARY KEY, body jsonb NOT NULL, seq bigint NOT NULL);
CREATE INDEX ON todos (seq);
CREATE TABLE journal (seq bigint PRIMARY KEY, line text NOT NULL);
INSERT INTO todos SELECT 't-' || i, '{"title":"x","status":"open","priority":"P2"}', 1
  FROM generate_series(1, 2001) i;
INSERT INTO journal VALUES (1, 'genesis');
