import t from 'tap';
import type { ErrorBody } from '../src/domain/errors.js';
import type { Pet, PetStatus } from '../src/storage/types.js';
import { listen, startApi, type TestApi } from './helpers/api.js';
import { contract } from './helpers/contract.js';

const mergePatch = 'application/merge-patch+json';

function patch(api: TestApi, id: number, body: unknown, headers: Record<string, string> = {}) {
  return api.request({
    method: 'PATCH',
    url: `/v1/pets/${id}`,
    headers: { ...api.auth, 'content-type': mergePatch, ...headers },
    payload: JSON.stringify(body),
  });
}

function remove(api: TestApi, id: number, headers: Record<string, string> = {}) {
  return api.request({ method: 'DELETE', url: `/v1/pets/${id}`, headers: { ...api.auth, ...headers } });
}

/** Rex, created through the API, and the ETag createPet answered. */
async function createRex(api: TestApi): Promise<{ pet: Pet; etag: string }> {
  const created = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: api.auth,
    payload: { name: 'Rex', categoryId: 1 },
  });
  return { pet: created.json<Pet>(), etag: String(created.headers.etag) };
}

async function list(api: TestApi, query = ''): Promise<Pet[]> {
  const listed = await api.request({ method: 'GET', url: `/v1/pets?limit=100${query}`, headers: api.auth });
  t.equal(listed.statusCode, 200);
  return listed.json<Pet[]>();
}

/** The contract's transitions, as the tests read them: every pair of statuses, allowed or not. */
const transitions = (
  contract.dereferenced.components?.schemas?.PetStatus as { 'x-transitions': Record<PetStatus, PetStatus[]> }
)['x-transitions'];
const statuses = Object.keys(transitions) as PetStatus[];

t.test('updatePet changes the fields sent, keeps the others, and answers the pet with a new ETag', async (t) => {
  const api = await startApi(t);
  const { pet, etag } = await createRex(api);
  t.match(etag, /^"\d+"$/, 'createPet answers a strong ETag');

  const renamed = await patch(api, pet.id, { name: 'Rexy' });
  t.equal(renamed.statusCode, 200);
  t.same(renamed.json(), { ...pet, name: 'Rexy' });
  t.not(renamed.headers.etag, etag, 'a change changes the ETag');
  const fetched = await api.request({ method: 'GET', url: `/v1/pets/${pet.id}`, headers: api.auth });
  t.same(fetched.json(), { ...pet, name: 'Rexy' }, 'the change is stored');
  t.equal(fetched.headers.etag, renamed.headers.etag, 'getPet answers the same ETag');

  const both = await patch(api, pet.id, { categoryId: 7, status: 'pending' });
  t.same(both.json(), { id: pet.id, name: 'Rexy', categoryId: 7, status: 'pending' });

  const same = await patch(api, pet.id, { name: 'Rexy', status: 'pending' });
  t.equal(same.statusCode, 200, 'setting what the pet already has is a 200');
  t.equal(same.headers.etag, both.headers.etag, 'and changes nothing, not even the ETag');
});

t.test('a patch is as strict as a new pet: nothing is changed by a 400 or a 415', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  for (const [body, why] of [
    [{}, 'an empty patch'],
    [{ name: null }, 'null'],
    [{ nickname: 'R' }, 'an unknown field'],
    [{ categoryId: '2' }, 'a wrong type'],
    [{ status: 'lost' }, 'a status that does not exist'],
    [{ name: '' }, 'an empty name'],
    [[{ op: 'replace', path: '/name', value: 'X' }], 'a JSON Patch, not a merge patch'],
  ] as const) {
    const refused = await patch(api, pet.id, body);
    t.equal(refused.statusCode, 400, why);
    t.equal(refused.json<ErrorBody>().code, 'invalid_request', why);
  }
  const plainJson = await api.request({
    method: 'PATCH',
    url: `/v1/pets/${pet.id}`,
    headers: { ...api.auth, 'content-type': 'application/json' },
    payload: { name: 'X' },
  });
  t.equal(plainJson.statusCode, 415);
  t.equal(plainJson.json<ErrorBody>().message, `Content-Type must be ${mergePatch}`, 'the 415 names the media type');
  const createAsPatch = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: { ...api.auth, 'content-type': mergePatch },
    payload: JSON.stringify({ name: 'X', categoryId: 1 }),
  });
  t.equal(createAsPatch.statusCode, 415, 'createPet takes application/json only');
  t.same(await list(api), [pet], 'nothing changed');
});

t.test('status moves exactly as the contract declares; others are 409 invalid_transition naming both', async (t) => {
  const api = await startApi(t);
  for (const from of statuses) {
    for (const to of statuses) {
      if (from === to) continue;
      const pet = await api.createPet({ name: `${from} to ${to}`, categoryId: 1, status: from });
      const moved = await patch(api, pet.id, { status: to });
      if (transitions[from].includes(to)) {
        t.equal(moved.statusCode, 200, `${from} -> ${to} is allowed`);
        t.equal(moved.json<Pet>().status, to);
      } else {
        t.equal(moved.statusCode, 409, `${from} -> ${to} is refused`);
        t.same(moved.json(), {
          code: 'invalid_transition',
          message: `Pet ${pet.id} cannot move from ${from} to ${to}`,
          status: 409,
        });
        const [stored] = await list(api, `&id=${pet.id}`);
        t.equal(stored?.status, from, 'and the pet keeps its status');
      }
    }
  }
  const sold = await api.createPet({ name: 'Sold', categoryId: 1, status: 'sold' });
  const renamed = await patch(api, sold.id, { name: 'Still sold', status: 'sold' });
  t.equal(renamed.statusCode, 200, 'a sold pet can still be renamed: its status is not moved');
});

t.test('If-Match: a change applies only to the pet as last seen, else 412 and nothing changes', async (t) => {
  const api = await startApi(t);
  const { pet, etag } = await createRex(api);
  const first = await patch(api, pet.id, { name: 'A' }, { 'if-match': etag });
  t.equal(first.statusCode, 200, 'the current ETag matches');
  const stale = await patch(api, pet.id, { name: 'B' }, { 'if-match': etag });
  t.equal(stale.statusCode, 412);
  t.same(stale.json(), {
    code: 'precondition_failed',
    message: `Pet ${pet.id} has changed: its ETag is now ${String(first.headers.etag)}`,
    status: 412,
  });
  t.equal(stale.headers.etag, first.headers.etag, 'the 412 carries the current ETag as a header');
  t.equal(
    (await patch(api, pet.id, { name: 'C' }, { 'if-match': `W/${String(first.headers.etag)}` })).statusCode,
    412,
    'a weak tag never matches',
  );
  t.equal(
    (await patch(api, pet.id, { name: 'D' }, { 'if-match': `"0", ${String(first.headers.etag)}` })).statusCode,
    200,
    'any tag of a list',
  );
  const any = await patch(api, pet.id, { name: 'E' }, { 'if-match': '*' });
  t.equal(any.statusCode, 200, '* matches any pet');
  const malformed = await patch(api, pet.id, { name: 'F' }, { 'if-match': 'abc' });
  t.equal(malformed.statusCode, 412, 'an If-Match that is not entity tags matches nothing');
  t.equal(malformed.headers.etag, any.headers.etag, 'and says which one would');
  const staleDelete = await remove(api, pet.id, { 'if-match': etag });
  t.equal(staleDelete.statusCode, 412, 'deletePet honours If-Match too');
  t.equal(staleDelete.headers.etag, any.headers.etag, 'its 412 carries the current ETag too');
  t.same(
    (await list(api)).map(({ name }) => name),
    ['E'],
    'only the matching changes applied',
  );
});

t.test('GET /pets?id= reads one pet with its ETag, the one If-Match takes; no other list has one', async (t) => {
  const api = await startApi(t);
  const { pet, etag } = await createRex(api);
  const read = (query: string) =>
    api.request({ method: 'GET', url: `/v1/pets?${query}`, headers: api.auth }).then((response) => {
      t.equal(response.statusCode, 200, query);
      return { pets: response.json<Pet[]>(), etag: response.headers.etag };
    });
  t.same(await read(`id=${pet.id}`), { pets: [pet], etag }, "one id: the pet and createPet's ETag");
  t.equal((await read('limit=10')).etag, undefined, 'a list of every pet has none, even of one pet');

  // Read, modify, write: the listed ETag is the pet's, so a change made since is a 412.
  const seen = await read(`id=${pet.id}`);
  const renamed = await patch(api, pet.id, { name: 'Rexy' }, { 'if-match': String(seen.etag) });
  t.equal(renamed.statusCode, 200, 'the ETag read from the list matches');
  t.same(await read(`id=${pet.id}`), { pets: [renamed.json<Pet>()], etag: renamed.headers.etag }, 'and follows it');
  t.equal((await patch(api, pet.id, { name: 'Rex' }, { 'if-match': String(seen.etag) })).statusCode, 412);

  const other = await api.createPet({ name: 'Tom', categoryId: 2 });
  t.equal((await read(`id=${pet.id},${other.id}`)).etag, undefined, 'two ids: no one version');
  t.equal((await read(`id=${other.id},${other.id}`)).etag, String((await read(`id=${other.id}`)).etag), 'one id twice');
  t.same(await read(`id=${pet.id}&status=sold`), { pets: [], etag: undefined }, 'filtered out: nothing to tag');
  t.same(await read('id=999999'), { pets: [], etag: undefined }, 'no such pet: nothing to tag');
});

t.test('ten clerks patching with the same ETag at once: one 200, nine 412s', async (t) => {
  const api = await startApi(t);
  const { client } = await listen(t, api);
  const {
    pet: { id },
    etag,
  } = await createRex(api);
  const answers = await Promise.all(
    Array.from({ length: 10 }, (_, clerk) =>
      client.PATCH('/pets/{petId}', {
        params: { path: { petId: id }, header: { 'If-Match': etag } },
        body: { name: `clerk ${clerk}` },
        headers: { 'content-type': mergePatch },
      }),
    ),
  );
  const statusCodes = answers.map(({ response }) => response.status).sort();
  t.same(statusCodes, [200, ...Array<number>(9).fill(412)]);
  const winner = answers.find(({ response }) => response.status === 200)?.data;
  t.same(await list(api), [winner], 'the stored pet is the one change that applied');
});

t.test(
  'racing moves to available and to sold from pending end in a serial outcome, never sold -> available',
  async (t) => {
    const api = await startApi(t);
    const { client } = await listen(t, api);
    for (let round = 0; round < 5; round += 1) {
      const pet = await api.createPet({ name: `race ${round}`, categoryId: 1, status: 'pending' });
      const [toAvailable, toSold] = await Promise.all(
        (['available', 'sold'] as const).map((status) =>
          client.PATCH('/pets/{petId}', {
            params: { path: { petId: pet.id } },
            body: { status },
            headers: { 'content-type': mergePatch },
          }),
        ),
      );
      const [stored] = await list(api, `&id=${pet.id}`);
      const outcome = `${String(toAvailable?.response.status)}/${String(toSold?.response.status)} ${String(stored?.status)}`;
      // available then sold: both apply, sold. sold then available: the second is refused, sold.
      t.ok(['200/200 sold', '409/200 sold'].includes(outcome), `a serial outcome: ${outcome}`);
    }
  },
);

t.test('deletePet: 204, then 404; the pet leaves every list and its id is never reused', async (t) => {
  const api = await startApi(t);
  const first = await api.createPet({ name: 'Rex', categoryId: 1 });
  const last = await api.createPet({ name: 'Tom', categoryId: 1, status: 'sold' });
  const removed = await remove(api, last.id);
  t.equal(removed.statusCode, 204);
  t.equal(removed.body, '', 'a 204 has no body');
  const again = await remove(api, last.id);
  t.equal(again.statusCode, 404, 'the second time is a 404');
  t.same(again.json(), { code: 'not_found', message: `No pet with id ${last.id}`, status: 404 });
  t.equal((await api.request({ method: 'GET', url: `/v1/pets/${last.id}`, headers: api.auth })).statusCode, 404);
  t.equal((await patch(api, last.id, { name: 'X' })).statusCode, 404, 'a removed pet cannot be changed');
  t.same(await list(api), [first], 'gone from the list');
  t.same(await list(api, '&status=sold'), [], 'and from the filtered list');
  const next = await api.createPet({ name: 'Kit', categoryId: 1 });
  t.ok(next.id > last.id, `the highest id is not reused (${next.id} after ${last.id})`);
});

t.test('a pet created with an Idempotency-Key can be removed; a retry then is a 404, not a second pet', async (t) => {
  const api = await startApi(t);
  const create = () =>
    api.request({
      method: 'POST',
      url: '/v1/pets',
      headers: { ...api.auth, 'idempotency-key': 'import-7' },
      payload: { name: 'Rex', categoryId: 1 },
    });
  const pet = (await create()).json<Pet>();
  t.equal((await remove(api, pet.id)).statusCode, 204, 'the idempotency claim does not block the delete');
  const retry = await create();
  t.equal(retry.statusCode, 404);
  t.same(await list(api), [], 'the retry created nothing');
});

t.test('listPets ?id= fetches given pets, with status, paged, in id order', async (t) => {
  const api = await startApi(t);
  const pets = [];
  for (let i = 0; i < 5; i += 1)
    pets.push(await api.createPet({ name: `p${i}`, categoryId: 1, status: i % 2 === 0 ? 'available' : 'sold' }));
  const [a, b, c, d] = pets.map(({ id }) => id) as [number, number, number, number];
  t.same(await list(api, `&id=${d},${a},${b},999999`), [pets[0], pets[1], pets[3]], 'those that exist, in id order');
  t.same(await list(api, `&id=${a},${b},${c}&status=sold`), [pets[1]], 'combined with status');
  const page = await api.request({ method: 'GET', url: `/v1/pets?limit=1&id=${a},${c}`, headers: api.auth });
  t.same(page.json(), [pets[0]]);
  const next = /<([^>]+)>; rel="next"/.exec(String(page.headers.link))?.[1] ?? '';
  t.match(next, `id=${a}%2C${c}`, 'the next link keeps the ids');
  t.same((await api.request({ method: 'GET', url: next, headers: api.auth })).json(), [pets[2]]);
  const tooMany = Array.from({ length: 101 }, (_, i) => i + 1).join(',');
  for (const [query, why] of [
    [`id=${tooMany}`, 'more than 100 ids'],
    ['id=1,,2', 'an empty item'],
    ['id=1,x', 'an item that is not a number'],
    ['id=01', 'a non-canonical integer'],
    ['id=0', 'an id below 1'],
    ['id=', 'nothing'],
    ['id=1&id=2', 'the parameter twice'],
  ] as [string, string][]) {
    const refused = await api.request({ method: 'GET', url: `/v1/pets?${query}`, headers: api.auth });
    t.equal(refused.statusCode, 400, why);
  }
});
