-- A pet's version, incremented by every change: its ETag.
ALTER TABLE pets ADD COLUMN version INTEGER NOT NULL DEFAULT 1;

-- Idempotency keys name what they created (a pet or an order) without a foreign key, so that no
-- claim keeps a pet from being removed. SQLite cannot drop a constraint: the table is rebuilt.
CREATE TABLE idempotency_keys_new (
  api_key_id  INTEGER NOT NULL REFERENCES api_keys (id),
  key         TEXT    NOT NULL,
  fingerprint BLOB    NOT NULL,
  resource_id INTEGER NOT NULL,
  created_at  INTEGER NOT NULL, -- Unix milliseconds
  PRIMARY KEY (api_key_id, key)
) WITHOUT ROWID;
INSERT INTO idempotency_keys_new SELECT api_key_id, key, fingerprint, pet_id, created_at FROM idempotency_keys;
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_new RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Orders name their pet without a foreign key: a pet whose orders are all final may be removed,
-- and its orders keep its id. At most one order is placed for a pet at a time.
CREATE TABLE orders (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  pet_id     INTEGER NOT NULL,
  status     TEXT    NOT NULL CHECK (status IN ('placed', 'completed', 'cancelled')),
  placed_at  TEXT    NOT NULL,
  updated_at TEXT    NOT NULL
);
CREATE UNIQUE INDEX orders_placed_pet ON orders (pet_id) WHERE status = 'placed';
CREATE INDEX orders_status_id ON orders (status, id);
