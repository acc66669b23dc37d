-- PostgreSQL's 011 announces every change to api_keys to the other instances (NOTIFY). On SQLite
-- the key cache sees every change itself, its own connection's through temporary triggers and
-- another's through PRAGMA data_version (src/storage/sqlite/table-cache.ts): nothing to do. This
-- file keeps the two backends' migrations under the same numbers and names.
SELECT 1;
