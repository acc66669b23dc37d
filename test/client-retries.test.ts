// The TypeScript client waits out a real 429 and a real 503 (the database locked by another process
// on SQLite, stopped on PostgreSQL), honouring Retry-After, and the create it retries is made once.
import Database from 'better-sqlite3';
import t from 'tap';
import { createClient, PetstoreError, type Retry } from '../clients/typescript/src/index.js';
import { conformingFetch, listen, startApi } from './helpers/api.js';
import { backend } from './helpers/backend.js';
import { sharedPostgres } from './helpers/postgres.js';

t.test('a 429 is waited out for as long as Retry-After says, then the call succeeds', async (t) => {
  const retries: Retry[] = [];
  const api = await startApi(t, { rateLimit: { perMinute: 1, authFailuresPerMinute: 0 } });
  const client = createClient({
    baseUrl: (await listen(t, api)).baseUrl,
    apiKey: api.key,
    fetch: conformingFetch,
    onRetry: (retry) => void retries.push(retry),
  });
  t.equal((await client.listPets()).status, 200, 'the one request of this minute');
  // The window is a minute, so this waits up to one.
  const created = await client.createPet({ body: { name: 'Patient', categoryId: 1 } });
  t.equal(created.status, 201);
  t.equal(retries.length, 1);
  const [retry] = retries;
  t.ok(retry?.failure instanceof PetstoreError && retry.failure.status === 429, 'after a 429');
  if (retry?.failure instanceof PetstoreError) {
    t.equal(retry.failure.code, 'rate_limited');
    t.equal(retry.delayMs, (retry.failure.retryAfter ?? 0) * 1000, 'waiting what Retry-After says');
    t.ok((retry.failure.retryAfter ?? 0) > 0);
  }
});

/** What makes the database unable to serve for a while, and what ends it. */
async function outage(databaseUrl: string): Promise<{ begin: () => Promise<void>; end: () => Promise<void> }> {
  if (backend === 'sqlite') {
    // Another process holding SQLite's write lock: the server's writes are 503s until it lets go.
    const other = new Database(databaseUrl);
    return {
      begin: async () => void other.exec('BEGIN IMMEDIATE'),
      end: async () => {
        other.exec('ROLLBACK');
        other.close();
      },
    };
  }
  const server = await sharedPostgres();
  return { begin: () => server.stop(), end: () => server.start() };
}

t.test('a 503 while the database cannot serve is waited out; the create is made once', async (t) => {
  const retries: Retry[] = [];
  const api = await startApi(t);
  const database = await outage(api.databaseUrl);
  const client = createClient({
    baseUrl: (await listen(t, api)).baseUrl,
    apiKey: api.key,
    fetch: conformingFetch,
    onRetry: async (retry) => {
      retries.push(retry);
      // The database comes back once the client has seen the 503, before it retries.
      if (retries.length === 1) await database.end();
    },
  });
  await database.begin();
  const created = await client.createPet({ body: { name: 'Resilient', categoryId: 1 } });
  t.equal(created.status, 201);
  const [retry] = retries;
  t.ok(retry?.failure instanceof PetstoreError && retry.failure.status === 503, 'after a 503');
  if (retry?.failure instanceof PetstoreError) {
    t.equal(retry.failure.code, 'service_unavailable');
    t.equal(retry.delayMs, (retry.failure.retryAfter ?? 0) * 1000, 'waiting what Retry-After says');
  }
  const listed = await client.listPets();
  t.same(
    listed.data.map(({ name }) => name),
    ['Resilient'],
    'one pet, not two',
  );
});
