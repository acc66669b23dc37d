-- A receiver's unbounded Retry-After, before the schedule capped it, could put a message's next
-- attempt past any date: never due, never pruned, and its attempt's time unreadable. Such messages
-- are due now, within their attempt limit.
UPDATE webhook_deliveries SET next_attempt_at = 0
WHERE state = 'pending' AND next_attempt_at > 8640000000000000;
