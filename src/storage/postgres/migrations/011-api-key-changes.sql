-- Each instance keeps the keys it has looked up until api_keys changes (src/storage/postgres/accounts.ts).
-- Whoever changes it (an instance, the CLI, an operator's own SQL) announces it to every instance
-- listening: PostgreSQL sends the notification when the change commits, and not if it rolls back.
CREATE FUNCTION petstore_api_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('petstore_api_keys', '');
  RETURN NULL;
END
$$;
CREATE TRIGGER api_keys_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION petstore_api_keys_changed();
