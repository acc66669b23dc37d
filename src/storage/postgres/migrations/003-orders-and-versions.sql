-- The same as SQLite's, in PostgreSQL's types.
-- A pet's version, incremented by every change: its ETag.
ALTER TABLE pets ADD COLUMN version bigint NOT NULL DEFAULT 1;

-- Idempotency keys name what they created (a pet or an order) without a foreign key, so that no
-- claim keeps a pet from being removed.
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pet_id_fkey;
ALTER TABLE idempotency_keys RENAME COLUMN pet_id TO resource_id;

-- Orders name their pet without a foreign key: a pet whose orders are all final may be removed,
-- and its orders keep its id. At most one order is placed for a pet at a time.
CREATE TABLE orders (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  pet_id     bigint NOT NULL,
  status     text   NOT NULL CHECK (status IN ('placed', 'completed', 'cancelled')),
  placed_at  timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX orders_placed_pet ON orders (pet_id) WHERE status = 'placed';
CREATE INDEX orders_status_id ON orders (status, id);
