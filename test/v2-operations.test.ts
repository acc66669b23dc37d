import t from 'tap';
import { startApi, type TestApi } from './helpers/api.js';
import { CLIENT_METHODS, servedVersions } from './helpers/contract.js';
import { FAST } from './helpers/webhooks.js';

// The answers of v2's operations that are their own (a conflict, a failed precondition, a reused
// key, a path's other method), asked through /v2 as v1's suites ask them through /v1. Every
// response is checked against v2's contract, and seen by contract:check's responses check.

const v2 = servedVersions.contract;
const BASE = v2.basePath;

interface Problem {
  code: string;
  status: number;
  detail: string;
}

function requests(api: TestApi) {
  const send = (method: string, path: string, payload?: object, headers: Record<string, string> = {}) =>
    api.request({
      method,
      url: `${BASE}${path}`,
      headers: {
        ...api.auth,
        ...(payload === undefined
          ? {}
          : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
        ...headers,
      },
      ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
    });
  const create = (path: string, payload: object, key: string) =>
    send('POST', path, payload, { 'idempotency-key': key });
  return { send, create };
}

t.test('each v2 path answers a method it does not take with 405 and Allow', async (t) => {
  const api = await startApi(t);
  const paths = new Map<string, string[]>();
  for (const { path, method } of v2.operations) paths.set(path, [...(paths.get(path) ?? []), method]);
  for (const [path, methods] of paths) {
    const other = CLIENT_METHODS.find((method) => method !== 'HEAD' && !methods.includes(method)) ?? 'PUT';
    const answer = await api.request({
      method: other,
      url: `${BASE}${path.replace(/\{[^}]+\}/g, '1')}`,
      headers: api.auth,
    });
    t.equal(answer.statusCode, 405, `${other} ${path}`);
    t.same(String(answer.headers.allow).split(', ').sort(), [...methods].sort(), 'Allow names the methods it takes');
    t.match(answer.json<Problem>(), { code: 'method_not_allowed', status: 405 });
  }
});

t.test('pets and orders through v2: conflicts, preconditions, reused keys, what is not there', async (t) => {
  const api = await startApi(t);
  const { send, create } = requests(api);
  const pet = (await create('/pets', { name: 'Rex', categoryId: 1 }, 'pet-1')).json<{ id: number }>();
  const reused = await create('/pets', { name: 'Max', categoryId: 1 }, 'pet-1');
  t.equal(reused.statusCode, 422, 'a key reused with another body');
  t.match(reused.json<Problem>(), { code: 'idempotency_key_reused' });

  t.equal((await send('PATCH', '/pets/999999', { name: 'Nobody' })).statusCode, 404, 'no such pet to change');
  const stale = await send('PATCH', `/pets/${pet.id}`, { name: 'Rexa' }, { 'if-match': '"v999"' });
  t.equal(stale.statusCode, 412, 'a change on a version not current');
  t.equal((await send('DELETE', `/pets/${pet.id}`, undefined, { 'if-match': '"v999"' })).statusCode, 412);

  const order = await create('/store/orders', { petId: pet.id }, 'order-1');
  t.equal(order.statusCode, 201);
  const { id: orderId } = order.json<{ id: number }>();
  t.equal((await send('GET', `/store/orders/${orderId}`)).statusCode, 200, 'the order, read');
  const second = await create('/store/orders', { petId: pet.id }, 'order-2');
  t.equal(second.statusCode, 409, 'a pet already on order');
  t.match(second.json<Problem>(), { code: 'pet_not_available' });
  const reusedOrder = await create('/store/orders', { petId: pet.id + 1 }, 'order-1');
  t.equal(reusedOrder.statusCode, 422, "an order's key reused with another body");
  const onOrder = await send('PATCH', `/pets/${pet.id}`, { status: 'available' });
  t.equal(onOrder.statusCode, 409, 'a pet on order keeps the status the order gave it');
  t.equal((await send('DELETE', `/pets/${pet.id}`)).statusCode, 409, 'nor is it removed');

  t.equal((await send('PATCH', `/store/orders/${orderId}`, { status: 'cancelled' })).statusCode, 200);
  const again = await send('PATCH', `/store/orders/${orderId}`, { status: 'completed' });
  t.equal(again.statusCode, 409, 'a cancelled order is final');
  t.equal((await send('PATCH', '/store/orders/999999', { status: 'completed' })).statusCode, 404);
});

t.test('a replayed v2 create whose pet was removed, claimed before answers were kept, is a 404', async (t) => {
  const { probeDatabase } = await import('./helpers/backend.js');
  const api = await startApi(t);
  const { send, create } = requests(api);
  const probe = await probeDatabase(t, api.databaseUrl, { writable: true });
  const made = (await create('/pets', { name: 'Tom', categoryId: 1 }, 'old-1')).json<{ id: number }>();
  // As a server before the response column left its claims.
  await probe.query('UPDATE idempotency_keys SET response = NULL');
  await send('DELETE', `/pets/${made.id}`);
  const gone = await create('/pets', { name: 'Tom', categoryId: 1 }, 'old-1');
  t.equal(gone.statusCode, 404);
  t.match(gone.json<Problem>(), { code: 'not_found' });
});

t.test('webhooks through v2: test, rotate, disable, remove, and the limit', async (t) => {
  const api = await startApi(t, { webhooks: { ...FAST, maxEndpoints: 2 } });
  const { send } = requests(api);
  const url = 'http://127.0.0.1:9/hook';
  const made = await send('POST', '/webhooks', { url, events: ['pet.created'] });
  t.equal(made.statusCode, 201);
  const { id } = made.json<{ id: number }>();
  t.equal((await send('POST', `/webhooks/${id}/test`)).statusCode, 202, 'a test event is queued');
  t.equal((await send('POST', `/webhooks/${id}/secret`)).statusCode, 200, 'a new secret');
  t.equal((await send('PATCH', `/webhooks/${id}`, { enabled: false })).statusCode, 200);
  const disabled = await send('POST', `/webhooks/${id}/test`);
  t.equal(disabled.statusCode, 409, 'no test event to a disabled endpoint');
  t.match(disabled.json<Problem>(), { code: 'webhook_disabled' });
  t.equal((await send('PATCH', '/webhooks/999999', { enabled: true })).statusCode, 404);
  t.equal((await send('POST', '/webhooks', { url, events: ['pet.updated'] })).statusCode, 201);
  const over = await send('POST', '/webhooks', { url, events: ['pet.deleted'] });
  t.equal(over.statusCode, 409, 'past the endpoints an account may have');
  t.match(over.json<Problem>(), { code: 'webhook_limit_reached' });
  t.equal((await send('DELETE', `/webhooks/${id}`)).statusCode, 204, 'removed');
});
