-- The same as SQLite's: a key's scopes (NULL: every scope) and when it expires (NULL: never).
ALTER TABLE api_keys ADD COLUMN scopes text[];
ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
