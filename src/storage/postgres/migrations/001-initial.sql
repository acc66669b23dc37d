-- The same schema as SQLite's 001 and 002, in PostgreSQL's types. Identity columns come from
-- sequences, which never hand out a value twice: an id is never reused, even after a rollback.
CREATE TABLE pets (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name        text   NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
  category_id bigint NOT NULL CHECK (category_id BETWEEN 1 AND 9007199254740991),
  status      text   NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Serves "WHERE status = $1 AND id > $2 ORDER BY id" as a range scan; the unfiltered list
-- walks the primary key.
CREATE INDEX pets_status_id ON pets (status, id);

CREATE TABLE accounts (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text   NOT NULL UNIQUE CHECK (char_length(name) BETWEEN 1 AND 100),
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Only the SHA-256 of a key is stored; `prefix` is the first characters, to tell keys apart.
CREATE TABLE api_keys (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id bigint NOT NULL REFERENCES accounts (id),
  hash       bytea  NOT NULL UNIQUE,
  prefix     text   NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);

CREATE INDEX api_keys_account ON api_keys (account_id);

-- Which pet a createPet with an Idempotency-Key made, per API key, for 24 hours.
-- `fingerprint` is the SHA-256 of the request body, to tell a retry from a reuse of the key.
CREATE TABLE idempotency_keys (
  api_key_id  bigint NOT NULL REFERENCES api_keys (id),
  key         text   NOT NULL,
  fingerprint bytea  NOT NULL,
  pet_id      bigint NOT NULL REFERENCES pets (id),
  created_at  bigint NOT NULL, -- Unix milliseconds, from the service's clock as on SQLite
  PRIMARY KEY (api_key_id, key)
);

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
