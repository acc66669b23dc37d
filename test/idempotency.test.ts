import t from 'tap';
import { issueKey } from '../src/auth/api-keys.js';
import type { ErrorBody } from '../src/domain/errors.js';
import type { Order, Pet } from '../src/storage/types.js';
import { listen, startApi, type TestApi } from './helpers/api.js';
import { probeDatabase } from './helpers/backend.js';

function create(api: TestApi, body: unknown, idempotencyKey: string, authorization = api.auth.authorization) {
  return api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: { authorization, 'idempotency-key': idempotencyKey },
    payload: body as object,
  });
}

async function count(api: TestApi): Promise<number> {
  const listed = await api.request({ method: 'GET', url: '/v1/pets?limit=100', headers: api.auth });
  return listed.json<Pet[]>().length;
}

t.test('a retry with the same Idempotency-Key and body replays the original 201', async (t) => {
  const api = await startApi(t);
  const first = await create(api, { name: 'Rex', categoryId: 1 }, 'order-1');
  t.equal(first.statusCode, 201);
  t.equal(first.headers['idempotent-replayed'], undefined);
  const retry = await create(api, { categoryId: 1, name: 'Rex', status: 'available' }, 'order-1');
  t.equal(retry.statusCode, 201, 'the same pet however the JSON is spelled');
  t.same(retry.json(), first.json(), 'the same pet, same id');
  t.equal(retry.headers.location, first.headers.location);
  t.equal(retry.headers['idempotent-replayed'], 'true');
  t.equal(await count(api), 1, 'nothing was created twice');
  const other = await create(api, { name: 'Rex', categoryId: 1 }, 'order-2');
  t.not(other.json<Pet>().id, first.json<Pet>().id, 'another key creates another pet');
});

t.test('a retry after the pet changed replays the first 201 as it was: body, Location and ETag', async (t) => {
  const api = await startApi(t);
  const first = await create(api, { name: 'Rex', categoryId: 1 }, 'import-1');
  const pet = first.json<Pet>();
  const changed = await api.request({
    method: 'PATCH',
    url: `/v1/pets/${pet.id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: { name: 'Rexy', status: 'sold' },
  });
  t.equal(changed.statusCode, 200);
  const retry = await create(api, { name: 'Rex', categoryId: 1 }, 'import-1');
  t.equal(retry.statusCode, 201);
  t.same(retry.json(), pet, 'the pet as the first answer showed it, not as it is now');
  t.equal(retry.headers.etag, first.headers.etag, 'the ETag it had then');
  t.equal(retry.headers.location, first.headers.location);
  t.equal(retry.headers['idempotent-replayed'], 'true');
  const now = await api.request({ method: 'GET', url: `/v1/pets?id=${pet.id}`, headers: api.auth });
  t.same(now.json(), [{ ...pet, name: 'Rexy', status: 'sold' }], 'the pet itself is as changed');
  t.equal(await count(api), 1);
});

t.test('a retry of an order after it completed replays the placed order', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  const place = () =>
    api.request({
      method: 'POST',
      url: '/v1/store/orders',
      headers: { ...api.auth, 'idempotency-key': 'checkout-9' },
      payload: { petId: pet.id },
    });
  const first = await place();
  const order = first.json<Order>();
  const completed = await api.request({
    method: 'PATCH',
    url: `/v1/store/orders/${order.id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: { status: 'completed' },
  });
  t.equal(completed.json<Order>().status, 'completed');
  const retry = await place();
  t.equal(retry.statusCode, 201);
  t.same(retry.json(), order, 'placed, as first answered');
  t.equal(retry.headers.location, first.headers.location);
  t.equal(retry.headers['idempotent-replayed'], 'true');
});

t.test('a claim made before first answers were kept replays what it made as it is now, or a 404', async (t) => {
  const api = await startApi(t);
  const probe = await probeDatabase(t, api.databaseUrl, { writable: true });
  const kept = (await create(api, { name: 'Rex', categoryId: 1 }, 'old-1')).json<Pet>();
  const removed = (await create(api, { name: 'Tom', categoryId: 1 }, 'old-2')).json<Pet>();
  // As a server before the response column left its claims.
  await probe.query('UPDATE idempotency_keys SET response = NULL');
  await api.request({
    method: 'PATCH',
    url: `/v1/pets/${kept.id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: { name: 'Rexy' },
  });
  await api.request({ method: 'DELETE', url: `/v1/pets/${removed.id}`, headers: api.auth });
  const current = await create(api, { name: 'Rex', categoryId: 1 }, 'old-1');
  t.equal(current.statusCode, 201);
  t.same(current.json(), { ...kept, name: 'Rexy' }, 'the pet as it is now');
  const gone = await create(api, { name: 'Tom', categoryId: 1 }, 'old-2');
  t.equal(gone.statusCode, 404);
  t.equal(gone.json<ErrorBody>().code, 'not_found');
  t.equal(await count(api), 1, 'nothing was created again');
});

t.test('the same key with a different body is a 422 and creates nothing', async (t) => {
  const api = await startApi(t);
  await create(api, { name: 'Rex', categoryId: 1 }, 'k');
  const reused = await create(api, { name: 'Rex', categoryId: 2 }, 'k');
  t.equal(reused.statusCode, 422);
  t.equal(reused.json<ErrorBody>().code, 'idempotency_key_reused');
  t.equal(await count(api), 1);
});

t.test('racing retries create exactly one pet', async (t) => {
  const api = await startApi(t);
  const { client } = await listen(t, api);
  const results = await Promise.all(
    Array.from({ length: 20 }, () =>
      client.POST('/pets', {
        body: { name: 'Racer', categoryId: 3 },
        params: { header: { 'Idempotency-Key': 'race' } },
      }),
    ),
  );
  const ids = new Set(results.map(({ data, response }) => (response.status === 201 ? data?.id : -1)));
  t.same([...ids].length, 1, 'every racer got the same pet');
  t.equal(await count(api), 1);
});

t.test('keys are scoped to the API key that sent them', async (t) => {
  const api = await startApi(t);
  const account = await api.storage.accounts.createAccount('other');
  const { key } = await issueKey(api.storage.accounts, account.id);
  const mine = await create(api, { name: 'Rex', categoryId: 1 }, 'shared');
  const theirs = await create(api, { name: 'Rex', categoryId: 5 }, 'shared', `Bearer ${key}`);
  t.equal(theirs.statusCode, 201, 'no 422: the other API key has its own keys');
  t.not(theirs.json<Pet>().id, mine.json<Pet>().id);
});

t.test('keys expire after 24 hours', async (t) => {
  let now = Date.UTC(2026, 10, 22);
  const api = await startApi(t, { now: () => now });
  const first = await create(api, { name: 'Rex', categoryId: 1 }, 'daily');
  now += 24 * 60 * 60 * 1000 - 1000;
  t.equal(
    (await create(api, { name: 'Rex', categoryId: 1 }, 'daily')).json<Pet>().id,
    first.json<Pet>().id,
    'still remembered just before 24 h',
  );
  now += 2000;
  const later = await create(api, { name: 'Other', categoryId: 2 }, 'daily');
  t.equal(later.statusCode, 201, 'after 24 h the key is free again, even with another body');
  t.not(later.json<Pet>().id, first.json<Pet>().id);
});

t.test('an invalid Idempotency-Key is a 400', async (t) => {
  const api = await startApi(t);
  for (const key of ['', 'x'.repeat(256), 'has space']) {
    const response = await create(api, { name: 'Rex', categoryId: 1 }, key);
    t.equal(response.statusCode, 400, JSON.stringify(key));
    t.match(response.json<ErrorBody>().message, /^headers\/idempotency-key /);
  }
  t.equal(await count(api), 0);
});
