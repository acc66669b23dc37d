-- v2's Pet carries createdAt (pets.created_at, kept since 001) and updatedAt, written by the
-- repository from the storage's clock. A pet never changed (version 1) was last updated when it was
-- made; for one changed before this migration, when was never kept: it gets the migration's time
-- (the contract says so). SQLite adds a NOT NULL column only with a constant default; every insert
-- names the column, so '' is never stored.
ALTER TABLE pets ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE pets SET updated_at = CASE WHEN version = 1 THEN created_at ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END;
