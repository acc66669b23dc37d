-- A key's scopes, space-separated (NULL: every scope, as every key had before scopes), and when
-- it expires (NULL: never), in the same form as created_at.
ALTER TABLE api_keys ADD COLUMN scopes TEXT;
ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
