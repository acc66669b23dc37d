-- PostgreSQL's 012 counts the changes to who subscribes to what, for instances that share the
-- database. On SQLite the outbox's cache of subscribers sees every change itself, as the key
-- cache does (011): nothing to do. This file keeps the two backends' migrations under the same
-- numbers and names.
SELECT 1;
