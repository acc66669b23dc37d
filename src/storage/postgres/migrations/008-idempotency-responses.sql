-- The same as SQLite's: what a claimed create made, as its first answer showed it (JSON), so
-- that a retry replays that answer even after the pet or order changed. Claims made before this
-- column existed hold NULL: their retries answer what was made as it is now.
ALTER TABLE idempotency_keys ADD COLUMN response text;
