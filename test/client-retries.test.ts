// The TypeScript client waits out a real 429 and a real 503 (the database locked by another process
// on SQLite, stopped on PostgreSQL), honouring Retry-After, and the create it retries is made once.
import t from 'tap';
import { createClient, PetstoreError, type Retry } from '../clients/typescript/src/v1.js';
import { conformingFetch, listen, startApi, type TapTest, type TestApi } from './helpers/api.js';
import { outage } from './helpers/outage.js';

/** A client of `api` recording each retry; `beforeFirstRetry` runs once, before the first. */
async function recordingClient(t: TapTest, api: TestApi, beforeFirstRetry?: () => Promise<void>) {
  const retries: Retry[] = [];
  const client = createClient({
    baseUrl: (await listen(t, api)).baseUrl,
    apiKey: api.key,
    fetch: conformingFetch,
    onRetry: async (retry) => {
      retries.push(retry);
      if (retries.length === 1) await beforeFirstRetry?.();
    },
  });
  return { client, retries };
}

/** The call was retried once, after an Error answer of `status` and `code`, waiting what its Retry-After said. */
function waitedOut(t: TapTest, retries: Retry[], status: number, code: string): void {
  t.equal(retries.length, 1, 'retried once');
  const [retry] = retries;
  t.ok(retry?.failure instanceof PetstoreError && retry.failure.status === status, `after a ${status}`);
  if (!(retry?.failure instanceof PetstoreError)) return;
  t.equal(retry.failure.code, code);
  t.ok((retry.failure.retryAfter ?? 0) > 0, 'which said how long to wait');
  t.equal(retry.delayMs, (retry.failure.retryAfter ?? 0) * 1000, 'waiting what Retry-After says');
}

t.test('a 429 is waited out for as long as Retry-After says, then the call succeeds', async (t) => {
  const api = await startApi(t, { rateLimit: { perMinute: 1, authFailuresPerMinute: 0 } });
  const { client, retries } = await recordingClient(t, api);
  t.equal((await client.listPets()).status, 200, 'the one request of this minute');
  // 58 s later, as the limit's clock (Date.now, in this process) sees it: Retry-After says 2.
  const realNow = Date.now;
  Date.now = () => realNow() + 58_000;
  t.teardown(() => {
    Date.now = realNow;
  });
  const created = await client.createPet({ body: { name: 'Patient', categoryId: 1 } });
  t.equal(created.status, 201);
  waitedOut(t, retries, 429, 'rate_limited');
});

t.test('a 503 while the database cannot serve is waited out; the create is made once', async (t) => {
  const database = await outage(t);
  const api = await startApi(t, { databaseUrl: database.databaseUrl });
  // The database comes back once the client has seen the 503, before it retries.
  const { client, retries } = await recordingClient(t, api, database.end);
  await database.begin();
  const created = await client.createPet({ body: { name: 'Resilient', categoryId: 1 } });
  t.equal(created.status, 201);
  waitedOut(t, retries, 503, 'service_unavailable');
  const listed = await client.listPets();
  t.same(
    listed.data.map(({ name }) => name),
    ['Resilient'],
    'one pet, not two',
  );
});
