import { copyFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import t from 'tap';
import { migrationsDir } from '../src/contract/paths.js';
import { migrate as migratePostgres } from '../src/storage/postgres/migrate.js';
import { migrate as migrateSqlite } from '../src/storage/sqlite/migrate.js';
import { startApi, type TestApi, temporaryDirectory } from './helpers/api.js';
import { backend, newDatabase, type Teardown } from './helpers/backend.js';

// v2's Pet (issue 51, change 4): createdAt and updatedAt, set by the service; v1's Pet keeps its
// four fields. Every response is checked against the contract of the version it came from.

interface StampedPet {
  id: number;
  name: string;
  createdAt: string;
  updatedAt: string;
}

/** A v2 list's answer (issue 51, change 3). */
interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

const RFC3339_UTC_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const V1_PET_FIELDS = ['categoryId', 'id', 'name', 'status'];

const patch = (api: TestApi, base: string, id: number, payload: object) =>
  api.request({
    method: 'PATCH',
    url: `${base}/pets/${id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload,
  });

const readV2 = async (api: TestApi, id: number) =>
  (await api.request({ method: 'GET', url: `/v2/pets?id=${id}`, headers: api.auth })).json<Page<StampedPet>>().data[0];

t.test('a v2 pet says when it was added and last changed; a v1 pet has its four fields', async (t) => {
  const api = await startApi(t);
  const before = new Date().toISOString();
  const created = await api.request({
    method: 'POST',
    url: '/v2/pets',
    headers: { ...api.auth, 'idempotency-key': 'stamped-1' },
    payload: { name: 'Rex', categoryId: 1 },
  });
  const after = new Date().toISOString();
  t.equal(created.statusCode, 201);
  const pet = created.json<StampedPet>();
  t.match(pet.createdAt, RFC3339_UTC_MS, 'RFC 3339, UTC, milliseconds');
  t.ok(pet.createdAt >= before && pet.createdAt <= after, 'set by the service, now');
  t.equal(pet.updatedAt, pet.createdAt, 'unchanged since it was added');
  t.same(await readV2(api, pet.id), pet, 'read back as it was answered');

  const throughV1 = await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
  t.same(Object.keys(throughV1.json<object>()).sort(), V1_PET_FIELDS, 'v1 reads it without the timestamps');
  const listedV1 = await api.request({ method: 'GET', url: `/v1/pets?id=${pet.id}`, headers: api.auth });
  t.same(Object.keys(listedV1.json<object[]>()[0] ?? {}).sort(), V1_PET_FIELDS, 'in a list too');
  const madeByV1 = await api.createPet({ name: 'Max', categoryId: 2 });
  t.same(Object.keys(madeByV1).sort(), V1_PET_FIELDS, "and v1's create answers v1's Pet");
  const stamped = await readV2(api, madeByV1.id);
  t.match(stamped?.createdAt, RFC3339_UTC_MS, 'a pet made through v1 has its timestamps in v2');
});

t.test('updatedAt moves forward on every change, whichever version or operation makes it', async (t) => {
  // A clock that stands still: changes within one millisecond must still order.
  const frozen = Date.parse('2026-11-28T12:00:00.000Z');
  const api = await startApi(t, { now: () => frozen });
  const created = await api.request({
    method: 'POST',
    url: '/v2/pets',
    headers: { ...api.auth, 'idempotency-key': 'stamped-2' },
    payload: { name: 'Rex', categoryId: 1 },
  });
  const pet = created.json<StampedPet>();
  t.equal(pet.createdAt, '2026-11-28T12:00:00.000Z', "the storage's clock");
  const seen = [pet.updatedAt];
  const renamed = await patch(api, '/v2', pet.id, { name: 'Rexa' });
  seen.push(renamed.json<StampedPet>().updatedAt);
  t.equal(renamed.json<StampedPet>().createdAt, pet.createdAt, 'createdAt never moves');
  t.equal((await patch(api, '/v1', pet.id, { name: 'Rexo' })).statusCode, 200);
  seen.push((await readV2(api, pet.id))?.updatedAt ?? '');
  const order = await api.request({
    method: 'POST',
    url: '/v2/store/orders',
    headers: { ...api.auth, 'idempotency-key': 'order-1' },
    payload: { petId: pet.id },
  });
  t.equal(order.statusCode, 201, 'an order reserves it');
  seen.push((await readV2(api, pet.id))?.updatedAt ?? '');
  t.same(
    seen,
    ['2026-11-28T12:00:00.000Z', '2026-11-28T12:00:00.001Z', '2026-11-28T12:00:00.002Z', '2026-11-28T12:00:00.003Z'],
    'a millisecond past the last change when the clock has not moved: a v2 change, a v1 change, an order',
  );
});

const MADE_AT = '2026-01-02T03:04:05.678Z';

/** A database migrated up to (not including) 013, the timestamps' migration. */
async function databaseBeforeTimestamps(t: Teardown): Promise<string> {
  const before = temporaryDirectory(t);
  const dir = migrationsDir(backend);
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.sql') && name < '013')) {
    copyFileSync(join(dir, file), join(before, file));
  }
  const url = await newDatabase(t);
  // Two pets: one never changed, one changed (version 2).
  const pets = `INSERT INTO pets (name, category_id, status, created_at)
      VALUES ('Old', 1, 'available', '${MADE_AT}'), ('Changed', 1, 'available', '${MADE_AT}');
    UPDATE pets SET name = 'Changed again', version = version + 1 WHERE name = 'Changed';`;
  if (backend === 'sqlite') {
    const db = new Database(url);
    migrateSqlite(db, before);
    db.exec(pets);
    db.close();
  } else {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    await migratePostgres(pool, before);
    await pool.query(pets);
    await pool.end();
  }
  return url;
}

t.test('pets made before the upgrade: when they were made, and the upgrade for a change not kept', async (t) => {
  const databaseUrl = await databaseBeforeTimestamps(t);
  const upgradedFrom = new Date(Date.now() - 1).toISOString();
  const api = await startApi(t, { databaseUrl });
  const listed = await api.request({ method: 'GET', url: '/v2/pets', headers: api.auth });
  const [old, changed] = listed.json<Page<StampedPet>>().data;
  t.match(old, { name: 'Old' });
  t.equal(old?.createdAt, MADE_AT, 'when it was made, as kept since the first migration');
  t.equal(old?.updatedAt, old?.createdAt, 'never changed: last updated when it was made');
  t.match(changed, { name: 'Changed again' });
  t.ok((changed?.updatedAt ?? '') >= upgradedFrom, 'changed before the upgrade: the time of the upgrade');
  t.equal(changed?.createdAt, MADE_AT);
});

t.test('a v2 create needs an Idempotency-Key; a v1 create without one still makes exactly one', async (t) => {
  const api = await startApi(t);
  const pet = { name: 'Keyless', categoryId: 1 };
  for (const [url, payload] of [
    ['/v2/pets', pet],
    ['/v2/store/orders', { petId: 1 }],
  ] as const) {
    const refused = await api.request({ method: 'POST', url, headers: api.auth, payload });
    t.equal(refused.statusCode, 400, `${url} without a key`);
    t.match(refused.body, /idempotency-key/i, 'the error names the header');
  }
  const listed = await api.request({ method: 'GET', url: '/v2/pets', headers: api.auth });
  t.same(listed.json<Page<unknown>>().data, [], 'and nothing was made');

  const made = await api.request({ method: 'POST', url: '/v1/pets', headers: api.auth, payload: pet });
  t.equal(made.statusCode, 201, 'v1 takes a create without a key');
  const again = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(again.json<unknown[]>().length, 1, 'exactly one pet');
});

t.test('a replay answers in the version of the request that replays it', async (t) => {
  const api = await startApi(t);
  const create = (base: string, key: string) =>
    api.request({
      method: 'POST',
      url: `${base}/pets`,
      headers: { ...api.auth, 'idempotency-key': key },
      payload: { name: 'Twice', categoryId: 1 },
    });
  const v2First = await create('/v2', 'cross-1');
  const v1Replay = await create('/v1', 'cross-1');
  t.equal(v1Replay.statusCode, 201);
  t.equal(v1Replay.headers['idempotent-replayed'], 'true', 'v1 replays what v2 made');
  const { id, name } = v2First.json<StampedPet>();
  t.same(v1Replay.json(), { id, name, categoryId: 1, status: 'available' }, "in v1's words");

  const v1First = await create('/v1', 'cross-2');
  const v2Replay = await create('/v2', 'cross-2');
  t.equal(v2Replay.headers['idempotent-replayed'], 'true', 'and v2 what v1 made');
  t.match(v2Replay.json(), { ...v1First.json<object>(), createdAt: RFC3339_UTC_MS }, "in v2's");
  const pets = await api.request({ method: 'GET', url: '/v2/pets', headers: api.auth });
  t.equal(pets.json<Page<unknown>>().data.length, 2, 'two creates, each made once');
});
