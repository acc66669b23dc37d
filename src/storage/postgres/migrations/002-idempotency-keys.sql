-- SQLite's 002 made idempotency_keys; on PostgreSQL 001 made it with the rest of the schema.
-- Nothing to do: this file keeps the two backends' migrations under the same numbers and names.
SELECT 1;
