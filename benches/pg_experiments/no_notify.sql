-- For scale only, never on a real database: no NOTIFY at each commit (boards and `hook serve`
-- would not wake), so `pg_claims` shows what the wake-up costs.
ALTER TABLE loopx.journal DISABLE TRIGGER journal_notify;
