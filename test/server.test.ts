import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import type { Pet } from '../src/storage/types.js';
import { conformingFetch, temporaryDirectory } from './helpers/api.js';
import { backend, newDatabase } from './helpers/backend.js';
import { failedStart, startServerProcess } from './helpers/process.js';

async function call(url: string, init: RequestInit = {}): Promise<Response> {
  return conformingFetch(new Request(url, init));
}

t.test('npm start on an empty database prints where it serves and a working key', async (t) => {
  const databaseUrl = await newDatabase(t);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  t.ok(server.key, 'a development key is printed');
  // The banner is one write; pino's own lines may land before or after it.
  const lines = server.output().trimEnd().split('\n');
  const notice = lines.findIndex((line) => line.startsWith('No API keys existed'));
  t.equal(lines[notice + 2], server.key, 'alone on the last line of the banner');
  t.match(server.output(), /docs: http:\/\/127\.0\.0\.1:\d+\/docs/);
  const auth = { authorization: `Bearer ${server.key ?? ''}` };

  const created = await call(`${server.baseUrl}/pets`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Curl', categoryId: 1 }),
  });
  t.equal(created.status, 201);
  const pet = (await created.json()) as Pet;
  const listed = await call(`${server.baseUrl}/pets`, { headers: auth });
  t.same(await listed.json(), [pet]);
  const fetched = await call(`${server.baseUrl}/pets/${pet.id}`, { headers: auth });
  t.same(await fetched.json(), pet);

  const origin = new URL(server.baseUrl).origin;
  t.equal((await fetch(`${origin}/healthz`)).status, 200, '/healthz needs no key');
  t.equal((await fetch(`${origin}/readyz`)).status, 200, '/readyz needs no key');

  t.equal(await server.stop('SIGTERM'), 0, 'SIGTERM shuts down cleanly');
  t.match(server.output(), /"msg":"shutting down"/);
  t.notMatch(
    server.output().split('\n').slice(lines.length).join('\n'),
    server.key ?? '',
    'the key appears only in the banner',
  );

  const again = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  t.equal(again.key, undefined, 'no new key once keys exist');
  const afterRestart = await call(`${again.baseUrl}/pets`, { headers: auth });
  t.same(await afterRestart.json(), [pet], 'a restart keeps the data and the key');
  t.equal(await again.stop('SIGINT'), 0);
});

t.test('a start that cannot listen issues no key; the next one prints it', async (t) => {
  const databaseUrl = await newDatabase(t);
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const { port } = taken.address() as AddressInfo;
  await t.rejects(startServerProcess(t, { DATABASE_URL: databaseUrl, PORT: String(port) }), /EADDRINUSE/);

  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  t.ok(server.key, 'the key is printed by the first start that serves');
  const listed = await call(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${server.key ?? ''}` } });
  t.equal(listed.status, 200, 'and it works');
  t.equal(await server.stop(), 0);

  const again = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  const hint = /a new key: (DATABASE_URL=(?:'[^']+'|<[^>]+>)) npx petstore keys create <account>/.exec(again.output());
  t.ok(hint, 'a later start says how to get a key');
  // A PostgreSQL URL may hold a password: the banner does not repeat it.
  const named = backend === 'sqlite' ? `DATABASE_URL='${databaseUrl}'` : 'DATABASE_URL=<this DATABASE_URL>';
  t.equal(hint?.[1], named, 'for the database it serves');
});

t.test('the server refuses to start on bad configuration, saying why', async (t) => {
  const dir = temporaryDirectory(t);
  await t.rejects(
    startServerProcess(t, { DATABASE_URL: join(dir, 'x.db'), PORT: 'eighty' }),
    /PORT must be an integer/,
  );
  await t.rejects(
    startServerProcess(t, { DATABASE_URL: join(dir, 'x.db'), LOG_LEVEL: 'loud' }),
    /LOG_LEVEL must be one of/,
  );
});

t.test('a SQLite file whose directory cannot be created stops the start at once, naming DATABASE_URL', async (t) => {
  const started = Date.now();
  // Node 20's recursive mkdir never returns on a path under /proc.
  const start = failedStart({ DATABASE_URL: '/proc/nope/x.db' });
  t.equal(start.code, 1, 'exits 1 rather than hanging');
  t.ok(Date.now() - started < 10_000, 'within seconds');
  t.match(start.stderr, /DATABASE_URL names the SQLite file \/proc\/nope\/x\.db, which cannot be opened \(ENOENT/);
  t.match(start.stderr, /set DATABASE_URL to a file in a directory this process can create and write/);
  t.notMatch(start.stderr, /\n\s+at /, 'no stack trace');
});
