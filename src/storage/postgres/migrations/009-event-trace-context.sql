-- As SQLite's: the W3C traceparent of the request that wrote the event, when it was traced;
-- each delivery attempt's span links to it. NULL when tracing is off.
ALTER TABLE webhook_events ADD COLUMN trace_parent text;
