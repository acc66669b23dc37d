import t from 'tap';
import type { Pet, Storage } from '../src/storage/types.js';
import { listen, startApi } from './helpers/api.js';

t.test('createPet returns 201, the Pet with status defaulted, and its Location', async (t) => {
  const api = await startApi(t);
  const response = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: api.auth,
    payload: { name: 'Rex', categoryId: 7 },
  });
  t.equal(response.statusCode, 201);
  const pet = response.json<Pet>();
  t.same(pet, { id: pet.id, name: 'Rex', categoryId: 7, status: 'available' });
  t.ok(pet.id >= 1);
  t.equal(response.headers.location, `/v1/pets/${pet.id}`);

  const fetched = await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
  t.same(fetched.json(), pet, 'the Location names the stored pet');
});

t.test('createPet keeps an explicit status and stores unicode names exactly as sent', async (t) => {
  const api = await startApi(t);
  for (const name of ['Zoë 🐈‍⬛', '  padded  ', 'שלום', 'a'.repeat(100), '🐶'.repeat(100)]) {
    const pet = await api.createPet({ name, categoryId: 9007199254740991, status: 'sold' });
    t.equal(pet.name, name);
    t.equal(pet.categoryId, 9007199254740991, 'the largest categoryId is exact');
    t.equal(pet.status, 'sold');
    const again = await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
    t.equal(again.json<Pet>().name, name);
  }
});

t.test('listPets pages through everything in id order, following Link headers', async (t) => {
  const api = await startApi(t);
  const statuses = ['available', 'pending', 'sold'] as const;
  const created: Pet[] = [];
  for (let i = 0; i < 25; i += 1) {
    created.push(
      await api.createPet({ name: `pet ${i}`, categoryId: 1 + (i % 3), status: statuses[i % 3] ?? 'available' }),
    );
  }

  const first = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(first.json<Pet[]>().length, 20, 'the default page size is 20');

  const seen: Pet[] = [];
  let url: string | undefined = '/v1/pets?limit=7';
  let pages = 0;
  while (url !== undefined) {
    const page = await api.request({ method: 'GET', url, headers: api.auth });
    t.equal(page.statusCode, 200);
    seen.push(...page.json<Pet[]>());
    pages += 1;
    const link = page.headers.link as string | undefined;
    url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
    if (link !== undefined) t.ok(url, `Link is well formed: ${link}`);
  }
  t.equal(pages, 4, '25 pets in pages of 7');
  t.same(seen, created, 'every pet exactly once, in creation order');

  const sold: Pet[] = [];
  url = '/v1/pets?status=sold&limit=3';
  while (url !== undefined) {
    const page = await api.request({ method: 'GET', url, headers: api.auth });
    sold.push(...page.json<Pet[]>());
    const link = page.headers.link as string | undefined;
    if (link !== undefined) t.match(link, /status=sold/, 'the next page keeps the filter');
    url = link === undefined ? undefined : /^<([^>]+)>/.exec(link)?.[1];
  }
  t.same(
    sold,
    created.filter((pet) => pet.status === 'sold'),
  );
});

t.test('the last page has no Link, even when it is exactly full', async (t) => {
  const api = await startApi(t);
  for (let i = 0; i < 4; i += 1) await api.createPet({ name: `p${i}`, categoryId: 1 });
  const full = await api.request({ method: 'GET', url: '/v1/pets?limit=4', headers: api.auth });
  t.equal(full.json<Pet[]>().length, 4);
  t.equal(full.headers.link, undefined);
  const empty = await api.request({ method: 'GET', url: '/v1/pets?status=pending', headers: api.auth });
  t.same(empty.json(), []);
  t.equal(empty.headers.link, undefined);
});

t.test('getPet returns the pet with the deprecation headers; 404 for an unknown id', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'Tom', categoryId: 2, status: 'pending' });
  const found = await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
  t.equal(found.statusCode, 200);
  t.same(found.json(), pet);
  t.equal(found.headers.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT');
  t.match(found.headers.deprecation, /^@\d+$/);
  t.equal(found.headers.link, '</v1/pets>; rel="successor-version"');

  const missing = await api.request({ method: 'GET', url: `/v1/pets/${pet.id + 1000}`, headers: api.auth });
  t.equal(missing.statusCode, 404);
  t.same(missing.json(), { code: 'not_found', message: `No pet with id ${pet.id + 1000}`, status: 404 });
  t.equal(missing.headers.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT', 'errors of getPet carry the headers too');
});

t.test('parallel creates each get their own id and all are stored', async (t) => {
  const api = await startApi(t);
  const { client } = await listen(t, api);
  const results = await Promise.all(
    Array.from({ length: 50 }, (_, i) => client.POST('/pets', { body: { name: `racer ${i}`, categoryId: 1 } })),
  );
  const ids = results.map(({ data, response }) => {
    t.equal(response.status, 201);
    return data?.id ?? 0;
  });
  t.equal(new Set(ids).size, 50, 'fifty distinct ids');
  const listed = await client.GET('/pets', { params: { query: { limit: 100 } } });
  t.same(
    listed.data?.map((pet) => pet.id).sort((a, b) => a - b),
    [...ids].sort((a, b) => a - b),
  );
});

t.test('the typed client works over a real socket for all three operations', async (t) => {
  const api = await startApi(t);
  const { client } = await listen(t, api);
  const created = await client.POST('/pets', { body: { name: 'Socket', categoryId: 3, status: 'pending' } });
  t.equal(created.response.status, 201);
  const id = created.data?.id ?? 0;
  const one = await client.GET('/pets/{petId}', { params: { path: { petId: id } } });
  t.same(one.data, { id, name: 'Socket', categoryId: 3, status: 'pending' });
  const page = await client.GET('/pets', { params: { query: { status: 'pending', limit: 5 } } });
  t.same(page.data, [one.data]);
});

t.test('ids are never reused after a restart', async (t) => {
  const first = await startApi(t);
  const before = await first.createPet({ name: 'first', categoryId: 1 });
  await first.app.close();
  await first.storage.close();
  const second = await startApi(t, { databaseUrl: first.databaseUrl });
  const listed = await second.request({ method: 'GET', url: '/v1/pets', headers: second.auth });
  t.same(listed.json(), [before], 'the data survives the restart');
  const after = await second.createPet({ name: 'second', categoryId: 1 });
  t.ok(after.id > before.id);
});

t.test("responses carry the contract's fields only, whatever else the storage returns", async (t) => {
  // A backend whose rows carry more than the contract (a PostgreSQL view, a column added later).
  const withInternals = <T extends object>(pet: T) => ({ ...pet, ownerEmail: 'a@example.com', deletedAt: null });
  const api = await startApi(t, {
    storageSeenByServer: (storage): Storage => ({
      ...storage,
      pets: {
        ...storage.pets,
        get: async (id) => {
          const found = await storage.pets.get(id);
          return found && { ...found, pet: withInternals(found.pet) };
        },
        list: async (query) => {
          const page = await storage.pets.list(query);
          return { ...page, items: page.items.map((found) => ({ ...found, pet: withInternals(found.pet) })) };
        },
        create: async (pet, claim) => {
          const outcome = await storage.pets.create(pet, claim);
          return outcome.outcome === 'created'
            ? { ...outcome, created: { ...outcome.created, pet: withInternals(outcome.created.pet) } }
            : outcome;
        },
      },
    }),
  });
  const fields = ['categoryId', 'id', 'name', 'status'];
  const created = await api.createPet({ name: 'Rex', categoryId: 1 });
  t.strictSame(Object.keys(created).sort(), fields, 'createPet');
  const fetched = await api.request({ method: 'GET', url: `/v1/pets/${created.id}`, headers: api.auth });
  t.strictSame(Object.keys(fetched.json<Pet>()).sort(), fields, 'getPet');
  const listed = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.strictSame(
    listed.json<Pet[]>().map((pet) => Object.keys(pet).sort()),
    [fields],
    'listPets',
  );
});
