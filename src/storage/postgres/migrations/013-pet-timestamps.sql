-- v2's Pet carries createdAt (pets.created_at, kept since 001) and updatedAt, written by the
-- repository from the storage's clock. A pet never changed (version 1) was last updated when it was
-- made; for one changed before this migration, when was never kept: it gets the migration's time
-- (the contract says so).
ALTER TABLE pets ADD COLUMN updated_at timestamptz;
UPDATE pets SET updated_at = CASE WHEN version = 1 THEN created_at ELSE date_trunc('milliseconds', now()) END;
ALTER TABLE pets ALTER COLUMN updated_at SET NOT NULL;
