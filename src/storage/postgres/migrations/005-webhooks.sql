-- The same as SQLite's, in PostgreSQL's types; events is a jsonb array of event types.
CREATE TABLE webhook_endpoints (
  id                          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  account_id                  bigint  NOT NULL REFERENCES accounts (id),
  url                         text    NOT NULL,
  events                      jsonb   NOT NULL,
  enabled                     boolean NOT NULL DEFAULT true,
  disabled_reason             text,
  secret                      text    NOT NULL,
  previous_secret             text,
  previous_secret_expires_at  bigint,
  secret_rotated_at           bigint,
  failing_since               bigint,
  created_at                  bigint  NOT NULL,
  updated_at                  bigint  NOT NULL
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, id);

CREATE TABLE webhook_events (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type       text   NOT NULL,
  body       text   NOT NULL,
  created_at bigint NOT NULL
);

CREATE TABLE webhook_deliveries (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  event_id        bigint NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  endpoint_id     bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  state           text   NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at bigint NOT NULL,
  lease_until     bigint,
  settled_at      bigint
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (settled_at) WHERE state <> 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id     bigint  NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id        bigint  NOT NULL,
  event_type      text    NOT NULL,
  attempt         integer NOT NULL,
  attempted_at    bigint  NOT NULL,
  response_status integer,
  error           text,
  duration_ms     integer NOT NULL,
  next_attempt_at bigint
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_at ON webhook_attempts (attempted_at);
