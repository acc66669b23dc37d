import Database from 'better-sqlite3';
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { listen, parseRawResponse, startApi, type Teardown, type TestApi } from './helpers/api.js';
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
  // SQLite waits its busy timeout (0.25 s) for the lock first; PostgreSQL refuses at once.
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

t.test('SQLite locked by another process: writes are 503s at once and the process keeps answering', async (t) => {
  if (backend !== 'sqlite') return;
  const { fault } = await faultyDatabase(t);
  const api = await startApi(t);
  const before = (await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).json();
  const repair = await fault(api);
  const write = () =>
    api.request({ method: 'POST', url: '/v1/pets', headers: api.auth, payload: { name: 'x', categoryId: 1 } });
  const started = performance.now();
  // The waits for the lock block the event loop: queued behind five writes, /healthz would wait
  // 25 s with a 5 s busy timeout. One write waits the busy timeout; the next ones do not wait.
  const writes = await Promise.all([write(), write(), write(), write(), write()]);
  const health = await api.app.inject({ method: 'GET', url: '/healthz' });
  const elapsed = performance.now() - started;
  t.equal(health.statusCode, 200);
  t.same(
    writes.map((w) => [w.statusCode, w.headers['retry-after']]),
    Array.from({ length: 5 }, () => [503, '2']),
  );
  t.ok(elapsed < 2_000, `five refused writes and /healthz took ${Math.round(elapsed)} ms, under 2 s`);
  const list = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(list.statusCode, 200, 'reads go on while the lock is held');

  await repair();
  // The writes of the next 2 s do not wait for the lock; after that they wait again, and succeed.
  await new Promise((resolve) => setTimeout(resolve, 2_100));
  t.same((await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).json(), before, 'nothing written');
  t.equal((await write()).statusCode, 201, 'writes again once the lock is let go');
});

t.test('/readyz answers 503 once the server is shutting down, while in-flight requests finish', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const opened = () =>
    new Promise<Socket>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => resolve(socket)).once('error', reject);
    });
  const answerOf = (socket: Socket) =>
    new Promise<string>((resolve) => {
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
      socket.on('close', () => resolve(received));
    });
  // A balancer's probe on a connection already open, its request not yet complete when closing begins.
  const probe = await opened();
  const probed = answerOf(probe);
  probe.write('GET /readyz HTTP/1.1\r\nHost: x\r\n');
  const ready = await api.app.inject({ url: '/readyz' });
  t.equal(ready.statusCode, 200, 'ready before');
  const closed = api.app.close();
  await new Promise((resolve) => setTimeout(resolve, 100));
  probe.write('\r\n');
  const response = parseRawResponse(await probed);
  t.equal(response.statusCode, 503, 'not ready while shutting down');
  t.equal(response.headers['retry-after'], '1');
  t.match(response.json(), { code: 'service_unavailable', message: /shutting down/, status: 503 });
  await closed;
});
