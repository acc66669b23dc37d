import Database from 'better-sqlite3';
import t from 'tap';
import { startApi } from './helpers/api.js';

t.test('/readyz answers 503 while the database cannot be written, and recovers', async (t) => {
  const api = await startApi(t);
  const ready = async () => api.app.inject({ method: 'GET', url: '/readyz' });
  t.equal((await ready()).statusCode, 200);

  // Another process holding the write lock (a long migration, a backup) makes the API unable to write.
  const other = new Database(api.databaseFile);
  t.teardown(() => other.close());
  other.exec('BEGIN EXCLUSIVE');
  const blocked = await ready();
  t.equal(blocked.statusCode, 503);
  t.same(blocked.json(), { code: 'service_unavailable', message: 'The database is not available', status: 503 });
  t.equal(blocked.headers['content-type'], 'application/json; charset=utf-8');
  t.equal((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process is still alive');

  other.exec('ROLLBACK');
  t.equal((await ready()).statusCode, 200, 'ready again once the lock is released');
  const pets = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(pets.statusCode, 200, 'and the API works');
});
