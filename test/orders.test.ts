import t from 'tap';
import type { ErrorBody } from '../src/domain/errors.js';
import type { Order, Pet } from '../src/storage/types.js';
import { listen, startApi, type TestApi } from './helpers/api.js';

function place(api: TestApi, petId: unknown, headers: Record<string, string> = {}) {
  return api.request({
    method: 'POST',
    url: '/v1/store/orders',
    headers: { ...api.auth, ...headers },
    payload: { petId },
  });
}

function settle(api: TestApi, orderId: number, status: string) {
  return api.request({
    method: 'PATCH',
    url: `/v1/store/orders/${orderId}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: JSON.stringify({ status }),
  });
}

async function petOf(api: TestApi, id: number): Promise<Pet | undefined> {
  const listed = await api.request({ method: 'GET', url: `/v1/pets?id=${id}`, headers: api.auth });
  return listed.json<Pet[]>()[0];
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

t.test('a sale end to end: placing reserves the pet, completing sells it', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  const placed = await place(api, pet.id);
  t.equal(placed.statusCode, 201);
  const order = placed.json<Order>();
  t.match(order, { petId: pet.id, status: 'placed', placedAt: ISO, updatedAt: ISO });
  t.equal(placed.headers.location, `/v1/store/orders/${order.id}`);
  t.equal((await petOf(api, pet.id))?.status, 'pending', 'the pet is reserved in the same transaction');

  const fetched = await api.request({ method: 'GET', url: `/v1/store/orders/${order.id}`, headers: api.auth });
  t.same(fetched.json(), order);

  const onOrder = await api.request({
    method: 'PATCH',
    url: `/v1/pets/${pet.id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: JSON.stringify({ status: 'available' }),
  });
  t.equal(onOrder.statusCode, 409, 'while the order is placed, only the order moves the pet');
  t.equal(onOrder.json<ErrorBody>().code, 'pet_on_order');
  const deleteOnOrder = await api.request({ method: 'DELETE', url: `/v1/pets/${pet.id}`, headers: api.auth });
  t.equal(deleteOnOrder.statusCode, 409, 'nor can the pet be removed');
  t.equal(deleteOnOrder.json<ErrorBody>().code, 'pet_on_order');

  const completed = await settle(api, order.id, 'completed');
  t.equal(completed.statusCode, 200);
  t.match(completed.json(), { id: order.id, status: 'completed', placedAt: order.placedAt });
  t.equal((await petOf(api, pet.id))?.status, 'sold', 'the pet is sold');
  t.equal((await settle(api, order.id, 'completed')).statusCode, 200, 'completing again changes nothing');
  const reopened = await settle(api, order.id, 'cancelled');
  t.equal(reopened.statusCode, 409, 'a completed order is final');
  t.same(reopened.json(), {
    code: 'invalid_transition',
    message: `Order ${order.id} cannot move from completed to cancelled`,
    status: 409,
  });
  const again = await place(api, pet.id);
  t.equal(again.statusCode, 409, 'a sold pet cannot be ordered');
  t.same(again.json(), { code: 'pet_not_available', message: `Pet ${pet.id} is sold, not available`, status: 409 });
  t.equal(
    (await api.request({ method: 'DELETE', url: `/v1/pets/${pet.id}`, headers: api.auth })).statusCode,
    204,
    'a sold pet with a final order can be removed',
  );
  const afterRemoval = await api.request({ method: 'GET', url: `/v1/store/orders/${order.id}`, headers: api.auth });
  t.equal(afterRemoval.json<Order>().petId, pet.id, 'its order keeps its id');
});

t.test('cancelling makes the pet available again, to be ordered anew', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'Tom', categoryId: 2 });
  const first = (await place(api, pet.id)).json<Order>();
  const cancelled = await settle(api, first.id, 'cancelled');
  t.equal(cancelled.json<Order>().status, 'cancelled');
  t.equal((await petOf(api, pet.id))?.status, 'available');
  t.equal((await settle(api, first.id, 'completed')).statusCode, 409, 'a cancelled order is final');
  t.equal((await petOf(api, pet.id))?.status, 'available', 'and the refusal moved nothing');
  t.equal((await place(api, pet.id)).statusCode, 201, 'the pet can be ordered again');
});

t.test('orders refuse what they cannot do, with Error bodies, and change nothing', async (t) => {
  const api = await startApi(t);
  const pending = await api.createPet({ name: 'Kit', categoryId: 1, status: 'pending' });
  const missing = await place(api, 999999);
  t.equal(missing.statusCode, 409, 'a pet that does not exist');
  t.equal(missing.json<ErrorBody>().code, 'pet_not_available');
  t.equal((await place(api, pending.id)).statusCode, 409, 'a pet that is not available');
  for (const body of ['x', null, 0, 1.5]) t.equal((await place(api, body)).statusCode, 400, `petId ${String(body)}`);
  const orderNotFound = await api.request({ method: 'GET', url: '/v1/store/orders/999', headers: api.auth });
  t.same(orderNotFound.json(), { code: 'not_found', message: 'No order with id 999', status: 404 });
  t.equal((await settle(api, 999, 'completed')).statusCode, 404);
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  const order = (await place(api, pet.id)).json<Order>();
  for (const status of ['placed', 'lost'])
    t.equal((await settle(api, order.id, status)).statusCode, 400, `status ${status}`);
  const listed = await api.request({ method: 'GET', url: '/v1/store/orders', headers: api.auth });
  t.same(listed.json(), [order], 'one order, still placed');
});

t.test('listOrders pages with Link and filters by status, like listPets', async (t) => {
  const api = await startApi(t);
  const orders: Order[] = [];
  for (let i = 0; i < 5; i += 1) {
    const pet = await api.createPet({ name: `p${i}`, categoryId: 1 });
    orders.push((await place(api, pet.id)).json<Order>());
  }
  const done = (await settle(api, orders[1]?.id ?? 0, 'completed')).json<Order>();
  const seen: Order[] = [];
  let url: string | undefined = '/v1/store/orders?limit=2';
  while (url !== undefined) {
    const page = await api.request({ method: 'GET', url, headers: api.auth });
    seen.push(...page.json<Order[]>());
    url = /<([^>]+)>; rel="next"/.exec(String(page.headers.link ?? ''))?.[1];
  }
  t.same(
    seen.map(({ id }) => id),
    orders.map(({ id }) => id),
    'every order once, in id order',
  );
  const completed = await api.request({ method: 'GET', url: '/v1/store/orders?status=completed', headers: api.auth });
  t.same(completed.json(), [done]);
  const bad = await api.request({ method: 'GET', url: '/v1/store/orders?status=sold', headers: api.auth });
  t.equal(bad.statusCode, 400, 'an order status that does not exist');
});

t.test('two orders for the same pet at once: one 201, one 409; Idempotency-Key retries place one order', async (t) => {
  const api = await startApi(t);
  const { client } = await listen(t, api);
  for (let round = 0; round < 5; round += 1) {
    const pet = await api.createPet({ name: `race ${round}`, categoryId: 1 });
    const answers = await Promise.all([0, 1].map(() => client.POST('/store/orders', { body: { petId: pet.id } })));
    t.same(answers.map(({ response }) => response.status).sort(), [201, 409], `round ${round}`);
  }
  const pet = await api.createPet({ name: 'retried', categoryId: 1 });
  const retries = await Promise.all(
    Array.from({ length: 5 }, () =>
      client.POST('/store/orders', {
        body: { petId: pet.id },
        params: { header: { 'Idempotency-Key': 'checkout-1' } },
      }),
    ),
  );
  t.same(new Set(retries.map(({ data }) => data?.id)).size, 1, 'every retry answers the same order');
  t.ok(retries.every(({ response }) => response.status === 201));
  const reused = await place(api, pet.id + 1000, { 'idempotency-key': 'checkout-1' });
  t.equal(reused.statusCode, 422, 'the key with another pet is a 422');
  const listed = await api.request({
    method: 'GET',
    url: '/v1/store/orders?status=placed&limit=100',
    headers: api.auth,
  });
  t.equal(listed.json<Order[]>().filter((order) => order.petId === pet.id).length, 1, 'one order for the pet');
});
