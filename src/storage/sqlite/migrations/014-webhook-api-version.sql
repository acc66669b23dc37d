-- Each endpoint receives its events in the API version it names ('v1', 'v2'): the outbox keeps the
-- newest version's payload and the delivery worker migrates it down to the endpoint's version
-- (src/events/payload-versions.ts). Endpoints made before this migration were all made through v1,
-- so they are 'v1' and keep receiving what they always did (the contract says so). The default
-- stays, as on PostgreSQL: an insert that names no version is one made through v1.
ALTER TABLE webhook_endpoints ADD COLUMN api_version TEXT NOT NULL DEFAULT 'v1';
