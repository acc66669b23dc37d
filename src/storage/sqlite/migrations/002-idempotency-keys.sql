-- Remembers which pet a createPet with an Idempotency-Key made, per API key, for 24 hours.
-- `fingerprint` is the SHA-256 of the request body, to tell a retry from a reuse of the key.
CREATE TABLE idempotency_keys (
  api_key_id  INTEGER NOT NULL REFERENCES api_keys (id),
  key         TEXT    NOT NULL,
  fingerprint BLOB    NOT NULL,
  pet_id      INTEGER NOT NULL REFERENCES pets (id),
  created_at  INTEGER NOT NULL, -- Unix milliseconds
  PRIMARY KEY (api_key_id, key)
) WITHOUT ROWID;

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
