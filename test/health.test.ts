import Database from 'better-sqlite3';
import t from 'tap';
import { startApi, type Teardown, type TestApi } from './helpers/api.js';
import { backend } from './helpers/backend.js';
import { startOwnPostgres } from './helpers/postgres.js';

/** Makes the database unable to take a write, as a fault would; resolves with how to undo it. */
type Fault = (api: TestApi) => Promise<() => Promise<void>>;

/**
 * A database for the fault, and the fault: another process holding SQLite's write lock (a long
 * migration, a backup), or PostgreSQL stopped.
 */
async function faultyDatabase(t: Teardown): Promise<{ databaseUrl?: string; fault: Fault }> {
  if (backend === 'sqlite') {
    return {
      fault: async (api) => {
        const other = new Database(api.databaseUrl);
        other.exec('BEGIN EXCLUSIVE');
        return async () => {
          other.exec('ROLLBACK');
          other.close();
        };
      },
    };
  }
  const server = await startOwnPostgres(t);
  return {
    databaseUrl: await server.newDatabase(t),
    fault: async () => {
      await server.stop();
      return () => server.start();
    },
  };
}

t.test('/readyz answers 503 while the database cannot be written, and recovers', async (t) => {
  const { databaseUrl, fault } = await faultyDatabase(t);
  const api = await startApi(t, databaseUrl === undefined ? {} : { databaseUrl });
  const ready = async () => api.app.inject({ method: 'GET', url: '/readyz' });
  t.equal((await ready()).statusCode, 200);

  const repair = await fault(api);
  const blocked = await ready();
  t.equal(blocked.statusCode, 503);
  t.same(blocked.json(), {
    code: 'service_unavailable',
    message: 'The database is not available; retry shortly',
    status: 503,
  });
  t.equal(blocked.headers['retry-after'], '2');
  t.equal(blocked.headers['content-type'], 'application/json; charset=utf-8');
  t.equal((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, 'the process is still alive');
  // SQLite waits its busy timeout (5 s) for the lock first; PostgreSQL refuses at once.
  const write = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: api.auth,
    payload: { name: 'x', categoryId: 1 },
  });
  t.equal(write.statusCode, 503, 'a write the database cannot take is a 503, not a 500');
  t.equal(write.headers['retry-after'], '2');

  await repair();
  t.equal((await ready()).statusCode, 200, 'ready again once the database is');
  const pets = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(pets.statusCode, 200, 'and the API works');
});
