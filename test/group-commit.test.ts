import { AsyncLocalStorage } from 'node:async_hooks';
import Database from 'better-sqlite3';
import t from 'tap';
import type { Pet } from '../src/storage/types.js';
import { forgetCached, TableCache } from '../src/storage/sqlite/table-cache.js';
import { backend, newDatabase, openDatabase } from './helpers/backend.js';
import { startReceiver } from './helpers/receiver.js';
import { eventually, start, subscribed, verified } from './helpers/webhooks.js';

// On SQLite the writes that reach the storage in one turn commit together (group commit); on
// PostgreSQL each is its own transaction. Either way, each write is answered as if it were alone.

t.test('writes sent together are each answered as if alone, and a refused one writes nothing', async (t) => {
  const receiver = await startReceiver(t);
  const api = await start(t);
  const hook = await subscribed(api, receiver.url, ['pet.created', 'pet.updated', 'pet.deleted']);
  const kept = await api.createPet({ name: 'kept', categoryId: 1 });
  const create = (name: string) =>
    api.request({ method: 'POST', url: '/v1/pets', headers: api.auth, payload: { name, categoryId: 2 } });

  const answers = await Promise.all([
    create('first'),
    api.request({
      method: 'PATCH',
      url: `/v1/pets/${kept.id}`,
      headers: { ...api.auth, 'content-type': 'application/merge-patch+json', 'if-match': '"stale"' },
      payload: JSON.stringify({ name: 'lost' }),
    }),
    create('second'),
    api.request({ method: 'DELETE', url: '/v1/pets/999999999', headers: api.auth }),
    create('third'),
  ]);
  t.same(
    answers.map((answer) => answer.statusCode),
    [201, 412, 201, 404, 201],
  );
  const made = [answers[0], answers[2], answers[4]].map((answer) => answer.json<Pet>());
  t.same(
    made.map((pet) => pet.name),
    ['first', 'second', 'third'],
  );
  if (backend === 'sqlite') {
    // A batch with a refused write is run again a write at a time, in the order the writes came.
    const ids = made.map((pet) => pet.id);
    t.same(
      ids,
      [...ids].sort((a, b) => a - b),
      'ids in the order the creates were sent',
    );
  }
  for (const pet of made) {
    const read = await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
    t.same(read.json(), pet, `pet ${pet.name} is stored as its 201 said`);
  }
  t.same(
    (await api.request({ method: 'GET', url: `/v1/pets/${kept.id}`, headers: api.auth })).json(),
    kept,
    'the refused change left its pet as it was',
  );

  // One event per change made, none for the refused ones.
  await receiver.waitFor(4);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const events = receiver.received.map((received) => verified(hook.secret, received));
  t.same(events.map((event) => [event.type, (event.data as Pet).name]).sort(), [
    ['pet.created', 'first'],
    ['pet.created', 'kept'],
    ['pet.created', 'second'],
    ['pet.created', 'third'],
  ]);
});

t.test('many creates in one turn: every one acknowledged is stored, with its event', async (t) => {
  const receiver = await startReceiver(t);
  const api = await start(t);
  const hook = await subscribed(api, receiver.url, ['pet.created']);
  const answers = await Promise.all(
    Array.from({ length: 200 }, (_, index) =>
      api.request({
        method: 'POST',
        url: '/v1/pets',
        headers: api.auth,
        payload: { name: `pet ${index}`, categoryId: 3 },
      }),
    ),
  );
  t.same(new Set(answers.map((answer) => answer.statusCode)), new Set([201]));
  const pets = answers.map((answer) => answer.json<Pet>());
  t.equal(new Set(pets.map((pet) => pet.id)).size, 200, 'each its own id');

  const reopened = await openDatabase(api.databaseUrl);
  t.teardown(() => reopened.close());
  const stored = await reopened.pets.list({ limit: 1000 });
  t.same(
    stored.items.map((pet) => pet.pet.id).sort((a, b) => a - b),
    pets.map((pet) => pet.id).sort((a, b) => a - b),
    'another connection finds every pet',
  );
  await eventually('an event for every pet', async () => receiver.received.length >= 200);
  const named = receiver.received.map((received) => (verified(hook.secret, received).data as Pet).id);
  t.same(
    [...new Set(named)].sort((a, b) => a - b),
    pets.map((pet) => pet.id).sort((a, b) => a - b),
  );
});

t.test(
  "with tracing, each event stores the trace context of the write that made it, even in one turn's batch",
  async (t) => {
    // The trace of the request in flight, as OpenTelemetry's context manager keeps it (AsyncLocalStorage).
    const requestTrace = new AsyncLocalStorage<string>();
    const storage = await openDatabase(await newDatabase(t), { traceParent: () => requestTrace.getStore() });
    t.teardown(() => storage.close());
    const { id: accountId } = await storage.accounts.createAccount('traced');
    await storage.webhooks.create(accountId, { url: 'http://127.0.0.1:9/', events: ['pet.created'] }, 'whsec_AAAA', 20);
    const traceOf = (n: number) => `00-${String(n).padStart(32, '0')}-${'1'.repeat(16)}-01`;
    const names = Array.from({ length: 8 }, (_, n) => `traced-${n}`);
    // Started in one turn: on SQLite they commit together, the batch run from the first one's context.
    await Promise.all(
      names.map((name, n) =>
        requestTrace.run(traceOf(n), () => storage.pets.create({ name, categoryId: 1, status: 'available' })),
      ),
    );
    await storage.pets.create({ name: 'untraced', categoryId: 1, status: 'available' });
    const claimed = await storage.deliveries.claim(20, 60_000, { perEndpoint: 20, perAccount: 20 });
    const traceByName = new Map(
      claimed.map((delivery) => {
        const { name } = (JSON.parse(delivery.body) as { data: Pet }).data;
        return [name, delivery.traceParent];
      }),
    );
    t.same(
      names.map((name) => traceByName.get(name)),
      names.map((_, n) => traceOf(n)),
      "each event, its own request's trace",
    );
    t.equal(traceByName.get('untraced'), undefined, 'none for a write outside any trace');
  },
);

t.test('SQLite: a storage write refused by its rule fails alone; the others of its turn commit', async (t) => {
  if (backend !== 'sqlite') return;
  const storage = await openDatabase(await newDatabase(t));
  t.teardown(() => storage.close());
  const first = await storage.pets.create({ name: 'a', categoryId: 1, status: 'available' });
  if (first.outcome !== 'created') throw new Error(`created nothing: ${first.outcome}`);
  const { pet } = first.created;
  const refusal = new Error('refused by its rule');
  const outcomes = await Promise.allSettled([
    storage.pets.create({ name: 'b', categoryId: 1, status: 'available' }),
    storage.pets.update(pet.id, () => {
      throw refusal;
    }),
    storage.pets.update(pet.id, () => ({ status: 'pending' })),
  ]);
  t.same(
    outcomes.map((outcome) => outcome.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  t.equal(outcomes[1].status === 'rejected' && outcomes[1].reason, refusal, 'the write is refused with its own error');
  t.equal((await storage.pets.get(pet.id))?.pet.status, 'pending');
  t.equal((await storage.pets.list({ limit: 10 })).items.length, 2);
});

t.test('SQLite: caches forget what a transaction rolled back whole had changed', async (t) => {
  if (backend !== 'sqlite') return;
  const db = new Database(await newDatabase(t));
  t.teardown(() => db.close());
  db.exec('CREATE TABLE things (name TEXT)');
  const cache = new TableCache<string, number>(db, 'things', ['INSERT']);
  const count = () => db.prepare<[], number>('SELECT count(*) FROM things').pluck().get() ?? 0;
  t.equal(cache.get('count', count), 0);

  db.exec('BEGIN');
  db.exec("INSERT INTO things VALUES ('rolled back')");
  t.equal(cache.get('count', count), 1, 'read inside the transaction, after its change');
  db.exec('ROLLBACK');
  t.equal(cache.get('count', count), 1, 'the trigger saw the change, not its undoing');
  forgetCached(db);
  t.equal(cache.get('count', count), 0, 'forgotten, it is read again');
});
