-- Pets: one catalogue shared by all accounts. AUTOINCREMENT so an id is never reused,
-- even after the highest row is deleted.
CREATE TABLE pets (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  category_id INTEGER NOT NULL CHECK (category_id BETWEEN 1 AND 9007199254740991),
  status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
  created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Serves "WHERE status = ? AND id > ? ORDER BY id" as a range scan; the unfiltered list
-- walks the primary key.
CREATE INDEX pets_status_id ON pets (status, id);

CREATE TABLE accounts (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  name       TEXT    NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 100),
  created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Only the SHA-256 of a key is stored; `prefix` is the first characters, to tell keys apart.
CREATE TABLE api_keys (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  account_id INTEGER NOT NULL REFERENCES accounts (id),
  hash       BLOB    NOT NULL UNIQUE,
  prefix     TEXT    NOT NULL,
  created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  revoked_at TEXT
);

CREATE INDEX api_keys_account ON api_keys (account_id);
