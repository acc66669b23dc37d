import t from 'tap';
import { startReceiver } from './helpers/receiver.js';
import type { TapTest, TestApi } from './helpers/api.js';
import { eventually, start, subscribed } from './helpers/webhooks.js';

// v2's lists answer {data, nextCursor} (issue 51, change 3), v1's the same items as bare arrays
// with `Link: rel="next"` (src/versions/changes/list-envelopes.ts), with one cursor format: a page
// begun in one version goes on in the other. Every response is checked against the contract of
// the version that answered it (api.request).

interface Item {
  id: number;
}

interface Envelope {
  data: Item[];
  nextCursor: string | null;
}

/** A GET through `api.request` that must answer 200. */
async function get(t: TapTest, api: TestApi, url: string) {
  const response = await api.request({ method: 'GET', url, headers: api.auth });
  t.equal(response.statusCode, 200, `GET ${url}`);
  return response;
}

const ids = (items: Item[]) => items.map(({ id }) => id);

/** The URL of `path` with `query`, written as v1's Link writes it (URLSearchParams). */
const urlOf = (path: string, query: Record<string, string>) => {
  const search = new URLSearchParams(query).toString();
  return search === '' ? path : `${path}?${search}`;
};

/** Every page of a v2 list, following nextCursor from the first until it is null. */
async function pagesOfV2(t: TapTest, api: TestApi, path: string, query: Record<string, string>) {
  const pages: Envelope[] = [];
  let cursor: string | null | undefined;
  while (cursor !== null) {
    const page = await get(t, api, urlOf(`/v2${path}`, cursor === undefined ? query : { ...query, cursor }));
    t.equal(page.headers.link, undefined, 'v2 sends no Link');
    const envelope = page.json<Envelope>();
    pages.push(envelope);
    cursor = envelope.nextCursor;
    if (pages.length > 100) throw new Error(`${path}: no end to its pages`);
  }
  return pages;
}

/** Every page of the same list through v1, following `Link: rel="next"`; each page's cursor as its Link gives it. */
async function pagesOfV1(t: TapTest, api: TestApi, path: string, query: Record<string, string>) {
  const pages: { items: Item[]; cursor: string | null }[] = [];
  let url: string | undefined = urlOf(`/v1${path}`, query);
  while (url !== undefined) {
    const page = await get(t, api, url);
    const link = page.headers.link as string | undefined;
    url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
    if (link !== undefined && url === undefined) t.fail(`a Link v1 does not write: ${link}`);
    pages.push({
      items: page.json<Item[]>(),
      cursor: url === undefined ? null : new URL(url, 'http://x').searchParams.get('cursor'),
    });
    if (pages.length > 100) throw new Error(`${path}: no end to its pages`);
  }
  return pages;
}

/**
 * Pages `path` with `query` through both versions: v2's pages hold `expected` exactly once each, in
 * order, in pages of `limit`, the last one's nextCursor null; v1's hold the same items, with the
 * same cursors in its Links, each Link the list's path and query with the cursor added.
 */
async function pagesAlike(t: TapTest, api: TestApi, path: string, query: Record<string, string>, expected: number[]) {
  const limit = Number(query.limit ?? 20);
  const v2 = await pagesOfV2(t, api, path, query);
  t.same(ids(v2.flatMap(({ data }) => data)), expected, `${path} ${JSON.stringify(query)}: every item once, in order`);
  t.equal(v2.length, Math.max(1, Math.ceil(expected.length / limit)), 'in full pages but the last');
  t.ok(
    v2.every(({ data }) => data.length <= limit),
    'none longer than limit',
  );
  const v1 = await pagesOfV1(t, api, path, query);
  t.same(
    v1.map(({ items }) => ids(items)),
    v2.map(({ data }) => ids(data)),
    'v1 pages the same items',
  );
  t.same(
    v1.map(({ cursor }) => cursor),
    v2.map(({ nextCursor }) => nextCursor),
    "v1's Link carries v2's nextCursor",
  );
  const [first] = v2;
  if (first?.nextCursor != null) {
    const firstOfV1 = await get(t, api, urlOf(`/v1${path}`, query));
    const next = new URLSearchParams({ limit: String(limit) });
    for (const [name, value] of Object.entries(query)) if (name !== 'limit') next.set(name, value);
    next.set('cursor', first.nextCursor);
    t.equal(firstOfV1.headers.link, `</v1${path}?${next.toString()}>; rel="next"`, 'the Link v1 has always written');
  }
  return v2;
}

t.test('every paged v2 list pages by nextCursor to the end; v1 pages the same by Link', async (t) => {
  const api = await start(t);
  const statuses = ['available', 'pending', 'sold'] as const;
  const pets = [];
  for (let i = 0; i < 11; i += 1) {
    pets.push(await api.createPet({ name: `pet ${i}`, categoryId: 1, status: statuses[i % 3] ?? 'available' }));
  }
  const all = ids(pets);
  await pagesAlike(t, api, '/pets', { limit: '3' }, all);
  await pagesAlike(t, api, '/pets', { limit: '11' }, all);
  await pagesAlike(t, api, '/pets', {}, all);
  await pagesAlike(
    t,
    api,
    '/pets',
    { limit: '2', status: 'sold' },
    ids(pets.filter(({ status }) => status === 'sold')),
  );
  await pagesAlike(
    t,
    api,
    '/pets',
    { limit: '1', status: 'pending' },
    ids(pets.filter(({ status }) => status === 'pending')),
  );
  const some = all.slice(2, 9).filter((id) => id % 2 === 0);
  await pagesAlike(t, api, '/pets', { limit: '2', id: some.join(',') }, some);
  await pagesAlike(
    t,
    api,
    '/pets',
    { limit: '2', status: 'available', id: some.join(',') },
    ids(pets.filter(({ id, status }) => some.includes(id) && status === 'available')),
  );
  await pagesAlike(t, api, '/pets', { status: 'available', id: '9007199254740991' }, []);

  const orders = [];
  for (const pet of pets.filter(({ status }) => status === 'available')) {
    const placed = await api.request({
      method: 'POST',
      url: '/v1/store/orders',
      headers: api.auth,
      payload: { petId: pet.id },
    });
    t.equal(placed.statusCode, 201);
    orders.push(placed.json<Item & { status: string }>());
  }
  const [cancelled] = orders;
  const cancel = await api.request({
    method: 'PATCH',
    url: `/v1/store/orders/${cancelled?.id}`,
    headers: { ...api.auth, 'content-type': 'application/merge-patch+json' },
    payload: JSON.stringify({ status: 'cancelled' }),
  });
  t.equal(cancel.statusCode, 200);
  await pagesAlike(t, api, '/store/orders', { limit: '2' }, ids(orders));
  await pagesAlike(t, api, '/store/orders', { limit: '1', status: 'placed' }, ids(orders.slice(1)));

  // `?id=` of one pet is the read of one pet: its envelope and its ETag.
  const [one] = pets;
  const read = await get(t, api, `/v2/pets?id=${one?.id}`);
  t.match(read.json(), { data: [{ id: one?.id, name: one?.name }], nextCursor: null });
  t.match(read.headers.etag, /^"\d+"$/, 'with its ETag');
  const readThroughV1 = await get(t, api, `/v1/pets?id=${one?.id}`);
  t.same(readThroughV1.json(), [one], 'v1 reads it as an array');
  t.equal(readThroughV1.headers.etag, read.headers.etag, 'with the same ETag');
  const getPet = await get(t, api, `/v1/pets/${one?.id}`);
  t.same(getPet.json(), one, "v1's getPet, answered by listPets, still answers the pet");
  t.equal(getPet.headers.etag, read.headers.etag);
});

t.test(
  "a cursor one version gave pages on in the other; one for another list or a forged one is v2's 400",
  async (t) => {
    const api = await start(t);
    for (let i = 0; i < 6; i += 1)
      await api.createPet({ name: `pet ${i}`, categoryId: 1, status: i % 2 === 0 ? 'sold' : 'available' });
    const whole = ids((await get(t, api, '/v2/pets')).json<Envelope>().data);

    const firstOfV2 = (await get(t, api, '/v2/pets?limit=2')).json<Envelope>();
    const cursor = firstOfV2.nextCursor ?? '';
    const onV1 = await get(t, api, `/v1/pets?limit=3&cursor=${cursor}`);
    t.same(ids(onV1.json<Item[]>()), whole.slice(2, 5), "v2's cursor pages on in v1 (limit may change)");
    const v1Link = /cursor=([^>&]+)>/.exec(String(onV1.headers.link))?.[1] ?? '';
    const onV2 = (await get(t, api, `/v2/pets?limit=3&cursor=${v1Link}`)).json<Envelope>();
    t.same(ids(onV2.data), whole.slice(5), "and v1's in v2, to the end");
    t.equal(onV2.nextCursor, null);

    const sold = (await get(t, api, '/v1/pets?status=sold&limit=1')).headers.link;
    const soldCursor = /cursor=([^>&]+)>/.exec(String(sold))?.[1] ?? '';
    t.equal(
      sold,
      `</v1/pets?limit=1&status=sold&cursor=${soldCursor}>; rel="next"`,
      "v1's Link in v1's order, as asked or not",
    );
    t.same(
      ids((await get(t, api, `/v2/pets?status=sold&limit=5&cursor=${soldCursor}`)).json<Envelope>().data),
      whole.filter((_, index) => index % 2 === 0).slice(1),
      'with its filters',
    );

    const forged = Buffer.from('v2:3.AAAAAAAA').toString('base64url');
    for (const [what, url] of [
      ['with other filters', `/v2/pets?status=available&cursor=${soldCursor}`],
      ['without its filters', `/v2/pets?cursor=${soldCursor}`],
      ['for another list', `/v2/store/orders?cursor=${cursor}`],
      ['forged', `/v2/pets?cursor=${forged}`],
      ['malformed', '/v2/pets?cursor=not!a!cursor'],
      ['empty', '/v2/pets?cursor='],
    ] as const) {
      for (const version of ['/v2', '/v1']) {
        const target = url.replace(/^\/v2/, version);
        const refused = await api.request({ method: 'GET', url: target, headers: api.auth });
        t.equal(refused.statusCode, 400, `${version}: a cursor ${what} is a 400`);
        t.match(refused.body, /cursor/, 'naming the cursor');
      }
    }
  },
);

t.test("v2's webhook lists are envelopes of one page; v1's the same items as arrays", async (t) => {
  const api = await start(t);
  const receiver = await startReceiver(t);
  const endpoints = [];
  for (let i = 0; i < 3; i += 1) endpoints.push(await subscribed(api, `${receiver.url}/${i}`, ['pet.created']));
  const listed = (await get(t, api, '/v2/webhooks')).json<Envelope>();
  t.same(ids(listed.data), ids(endpoints), 'every endpoint, in id order');
  t.equal(listed.nextCursor, null, 'on one page');
  t.same(ids((await get(t, api, '/v1/webhooks')).json<Item[]>()), ids(endpoints), 'v1: the same, as an array');

  const [endpoint] = endpoints;
  for (let i = 0; i < 3; i += 1) {
    const test = await api.request({ method: 'POST', url: `/v1/webhooks/${endpoint?.id}/test`, headers: api.auth });
    t.equal(test.statusCode, 202);
  }
  const deliveries = `/webhooks/${endpoint?.id}/deliveries`;
  await eventually(
    'three attempts recorded',
    async () => (await get(t, api, `/v1${deliveries}`)).json<unknown[]>().length === 3,
  );
  const v2 = (await get(t, api, `/v2${deliveries}`)).json<{ data: unknown[]; nextCursor: string | null }>();
  t.equal(v2.data.length, 3);
  t.equal(v2.nextCursor, null);
  t.same(v2.data, (await get(t, api, `/v1${deliveries}`)).json(), 'v1: the same attempts, as an array');
  const latest = (await get(t, api, `/v2${deliveries}?limit=1`)).json<{ data: unknown[]; nextCursor: string | null }>();
  t.same(latest, { data: v2.data.slice(0, 1), nextCursor: null }, 'the most recent, as many as limit');
  const unknown = await api.request({ method: 'GET', url: '/v2/webhooks/999999/deliveries', headers: api.auth });
  t.equal(unknown.statusCode, 404, "an unknown endpoint's is a 404, not an empty page");
});
