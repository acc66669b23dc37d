-- How often the set of subscriptions has changed: bumped in the transaction of every write that
-- adds, removes, enables, disables or resubscribes an endpoint, whoever makes it (the API, the
-- worker disabling a failing endpoint, an operator's SQL). An instance that learnt "nothing
-- subscribes to pet.created" at version v inserts a pet without looking for subscribers only
-- while the version is still v, checked in the insert's own statement (docs/several-instances.md).
CREATE TABLE webhook_subscriptions_version (version bigint NOT NULL);
INSERT INTO webhook_subscriptions_version (version) VALUES (0);

CREATE FUNCTION webhook_subscriptions_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE webhook_subscriptions_version SET version = version + 1;
  RETURN NULL;
END
$$;

CREATE TRIGGER webhook_endpoints_added_or_removed AFTER INSERT OR DELETE ON webhook_endpoints
  FOR EACH ROW EXECUTE FUNCTION webhook_subscriptions_changed();
-- Health and secrets change often (every settled attempt may write failing_since): only what
-- decides who receives an event bumps the version.
CREATE TRIGGER webhook_endpoints_resubscribed AFTER UPDATE OF events, enabled ON webhook_endpoints
  FOR EACH ROW WHEN (OLD.events IS DISTINCT FROM NEW.events OR OLD.enabled IS DISTINCT FROM NEW.enabled)
  EXECUTE FUNCTION webhook_subscriptions_changed();
CREATE TRIGGER webhook_endpoints_truncated AFTER TRUNCATE ON webhook_endpoints
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_subscriptions_changed();
