-- Webhook endpoints, each owned by an account. Secrets are kept in clear: signing needs them
-- (only an HMAC of them goes out). Times are Unix milliseconds, from the service's clock.
CREATE TABLE webhook_endpoints (
  id                          INTEGER PRIMARY KEY AUTOINCREMENT,
  account_id                  INTEGER NOT NULL REFERENCES accounts (id),
  url                         TEXT    NOT NULL,
  events                      TEXT    NOT NULL, -- a JSON array of event types
  enabled                     INTEGER NOT NULL DEFAULT 1,
  disabled_reason             TEXT,
  secret                      TEXT    NOT NULL,
  previous_secret             TEXT,
  previous_secret_expires_at  INTEGER,
  secret_rotated_at           INTEGER,
  failing_since               INTEGER,
  created_at                  INTEGER NOT NULL,
  updated_at                  INTEGER NOT NULL
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, id);

-- The transactional outbox: an event is written in the transaction of its change, with one
-- delivery per endpoint subscribed at that moment.
CREATE TABLE webhook_events (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  type       TEXT    NOT NULL,
  body       TEXT    NOT NULL,
  created_at INTEGER NOT NULL
);

CREATE TABLE webhook_deliveries (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id        INTEGER NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  endpoint_id     INTEGER NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  state           TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  lease_until     INTEGER,
  settled_at      INTEGER
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (settled_at) WHERE state <> 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  endpoint_id     INTEGER NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id        INTEGER NOT NULL,
  event_type      TEXT    NOT NULL,
  attempt         INTEGER NOT NULL,
  attempted_at    INTEGER NOT NULL,
  response_status INTEGER,
  error           TEXT,
  duration_ms     INTEGER NOT NULL,
  next_attempt_at INTEGER
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_at ON webhook_attempts (attempted_at);
