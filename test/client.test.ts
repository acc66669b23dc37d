// The TypeScript client (clients/typescript) against the real server on a real socket, every answer
// checked against the contract: paging, parameter styles, ETags and the 412 flow, typed errors,
// retries of a create whose answer was lost, and no answer at all.
import { createServer } from 'node:net';
import t from 'tap';
import {
  canMove,
  type ClientOptions,
  createClient,
  isKnownCode,
  isPetstoreError,
  PetstoreError,
  PetstoreNetworkError,
  type ReportedCode,
  type Retry,
  type Status,
  transitions,
} from '../clients/typescript/src/v1.js';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { clientFiles } from '../scripts/contract/generate-client.js';
import { validateContract } from '../src/contract/document.js';
import { contractPath } from '../src/contract/paths.js';
import { conformingFetch, listen, startApi, type TapTest, temporaryDirectory } from './helpers/api.js';
import { contract } from './helpers/contract.js';
import { closing, listening, losingFirstAnswer } from './helpers/lost-answer.js';
import { NEW_OPERATION, withNewOperation } from './helpers/new-operation.js';

/** A server of the backend under test, and clients of it sending through `conformingFetch`. */
async function served(t: TapTest, options: Partial<ClientOptions> = {}) {
  const api = await startApi(t);
  const { origin, baseUrl } = await listen(t, api);
  const retries: Retry[] = [];
  const clientAt = (url: string) =>
    createClient({
      baseUrl: url,
      apiKey: api.key,
      fetch: conformingFetch,
      backoffMs: 1,
      onRetry: (retry) => void retries.push(retry),
      ...options,
    });
  return { api, client: clientAt(baseUrl), clientAt, retries, port: Number(new URL(origin).port) };
}

t.test('each yields every item of a list, following Link: rel="next"; page gives the next cursor', async (t) => {
  const { api, client } = await served(t);
  const ids: number[] = [];
  for (let i = 0; i < 250; i++) {
    const outcome = await api.storage.pets.create({ name: `Pet ${i}`, categoryId: 1 + (i % 3), status: 'available' });
    if (outcome.outcome === 'created') ids.push(outcome.created.pet.id);
  }
  t.equal(ids.length, 250);
  const seen: number[] = [];
  for await (const pet of client.each('listPets', { query: { limit: 100 } })) seen.push(pet.id);
  t.same(seen, ids, 'all 250, each once, in id order');

  const first = await client.page('listPets', { query: { limit: 100 } });
  t.equal(first.items.length, 100);
  t.type(first.next, 'string', 'the first of three pages has a next cursor');
  const second = await client.page('listPets', { query: { limit: 100, cursor: first.next ?? '' } });
  t.equal(second.items[0]?.id, ids[100]);
  const third = await client.page('listPets', { query: { limit: 100, cursor: second.next ?? '' } });
  t.equal(third.items.length, 50);
  t.equal(third.next, undefined, 'the last page has none');

  const sold: number[] = [];
  for await (const pet of client.each('listPets', { query: { limit: 7, status: 'available', id: ids.slice(0, 20) } })) {
    sold.push(pet.id);
  }
  t.same(sold, ids.slice(0, 20), 'filters are kept from page to page; ids are sent as the contract says (id=1,2)');

  const webhooks = await client.listWebhooks();
  t.same(webhooks.data, [], 'a list that does not page is one call (each and page do not take it)');
});

t.test('create, rename with If-Match, and the 412 flow', async (t) => {
  const { client } = await served(t);
  const created = await client.createPet({ body: { name: 'Rex', categoryId: 1 } });
  t.equal(created.status, 201);
  t.equal(created.replayed, false);
  t.match(created.etag, /^"\d+"$/, 'a create carries the ETag');
  t.type(created.requestId, 'string');
  const petId = created.data.id;

  // Sent as application/merge-patch+json, as the contract says: anything else is a 415.
  const renamed = await client.updatePet({
    path: { petId },
    header: { 'If-Match': created.etag },
    body: { name: 'Rexy' },
  });
  t.equal(renamed.data.name, 'Rexy');
  t.not(renamed.etag, created.etag, 'the change gives a new ETag');

  const stale = await client
    .updatePet({ path: { petId }, header: { 'If-Match': created.etag }, body: { name: 'Stale' } })
    .catch((error: unknown) => error);
  t.ok(isPetstoreError(stale, 'updatePet'));
  if (isPetstoreError(stale, 'updatePet')) {
    t.equal(stale.status, 412);
    t.equal(stale.code, 'precondition_failed');
    t.type(stale.requestId, 'string');
    t.equal(stale.etag, renamed.etag, 'a 412 carries the current ETag');
  }

  // Read, change, write: someone else renames it between this read and this write, once.
  let reads = 0;
  let interfered = false;
  const modified = await client.modify(
    async () => {
      reads++;
      // The non-deprecated read of one animal answers its ETag.
      return client.listPets({ query: { id: [petId] } });
    },
    async (current) => {
      if (!interfered) {
        interfered = true;
        await client.updatePet({ path: { petId }, body: { categoryId: 2 } });
      }
      return client.updatePet({
        path: { petId },
        header: { 'If-Match': current.etag },
        body: { name: `${current.data[0]?.name ?? ''}!` },
      });
    },
  );
  t.equal(reads, 2, 'the write found it changed (412), so it was read again');
  t.same(modified.data, { id: petId, name: 'Rexy!', categoryId: 2, status: 'available' });
});

t.test('an error carries status, code, message and request id; the code is typed per operation', async (t) => {
  const { client } = await served(t);
  const error = await client.getOrder({ path: { orderId: 424242 } }).catch((caught: unknown) => caught);
  t.ok(error instanceof PetstoreError);
  if (!isPetstoreError(error, 'getOrder')) return;
  const code: ReportedCode<'getOrder'> = error.code;
  t.same(
    { status: error.status, code, operationId: error.operationId },
    { status: 404, code: 'not_found', operationId: 'getOrder' },
  );
  t.match(error.message, /No order with id 424242/);
  t.type(error.requestId, 'string');

  const conflict = await client
    .updateOrder({ path: { orderId: 424242 }, body: { status: 'completed' } })
    .catch((caught: unknown) => caught);
  t.ok(isPetstoreError(conflict, 'updateOrder') && conflict.status === 404, 'a PATCH is not retried on a 4xx');
});

t.test('a code the contract does not list is reported apart, as unknown, with the code as sent', async (t) => {
  const error = new PetstoreError('getOrder', 404, 'order_archived', 'archived', undefined, undefined, undefined);
  t.equal(error.code, 'unknown');
  t.equal(error.rawCode, 'order_archived');
  t.notOk(isKnownCode(error));
  const known = new PetstoreError('getOrder', 404, 'not_found', 'gone', undefined, undefined, undefined);
  t.ok(isKnownCode(known) && known.code === 'not_found');
});

t.test('a precondition left undefined is refused before anything is sent', async (t) => {
  const sent: string[] = [];
  const { client } = await served(t, {
    onRequest: (request) => void sent.push(`${request.method} ${new URL(request.url).pathname}`),
  });
  const created = await client.createPet({ body: { name: 'Rex', categoryId: 1 } });
  const page = await client.listPets({ query: { limit: 10 } });
  t.equal(page.etag, undefined, 'a page of several animals has no ETag');
  sent.length = 0;
  const refused = await client
    .updatePet({
      path: { petId: created.data.id },
      header: { 'If-Match': page.etag as string },
      body: { name: 'Stale' },
    })
    .catch((error: unknown) => error);
  t.ok(refused instanceof TypeError, 'a TypeError');
  t.match((refused as Error).message, /If-Match is undefined/);
  t.same(sent, [], 'nothing was sent');
  const read = await client.listPets({ query: { id: [created.data.id] } });
  t.equal(read.data[0]?.name, 'Rex', 'the animal is unchanged');
  t.type(read.etag, 'string', 'a page of one animal carries its ETag');
});

t.test('request and response hooks see every attempt, and the request hook may change it', async (t) => {
  const seen: string[] = [];
  const { client } = await served(t, {
    onRequest: (request, { operationId, attempt }) => {
      seen.push(`request ${operationId} ${attempt}`);
      const headers = new Headers(request.headers);
      headers.set('x-request-id', 'traced-1');
      return new Request(request, { headers });
    },
    onResponse: async (response, { operationId, attempt, request }) => {
      seen.push(`response ${operationId} ${attempt} ${response.status} ${request.headers.get('x-request-id')}`);
      t.equal((await response.clone().json()) instanceof Array, true, 'the hook can read a clone');
    },
  });
  const listed = await client.listPets();
  t.equal(listed.requestId, 'traced-1', 'the header the hook set was sent');
  t.same(listed.data, [], 'and the client still read the body');
  t.same(seen, ['request listPets 1', 'response listPets 1 200 traced-1']);
});

t.test('a create whose first answer is lost is sent again with its Idempotency-Key, and replayed', async (t) => {
  const { client: direct, clientAt, retries, port } = await served(t);
  const proxy = await losingFirstAnswer(t, port);
  const client = clientAt(`http://127.0.0.1:${proxy.port}${contract.basePath}`);
  const created = await client.createPet({ body: { name: 'Once', categoryId: 1 } });
  t.ok(proxy.lost(), 'the first answer was lost');
  t.equal(retries.length, 1, 'sent twice');
  t.ok(retries[0]?.failure instanceof PetstoreNetworkError, 'the first attempt got no answer');
  t.equal(created.status, 201);
  t.equal(created.replayed, true, 'the second answer replays the first create');
  const stored = await direct.listPets();
  t.same(
    stored.data.map(({ id, name }) => ({ id, name })),
    [{ id: created.data.id, name: 'Once' }],
    'one pet, not two',
  );
});

t.test('no answer is a PetstoreNetworkError, retried only where the contract makes it safe', async (t) => {
  // A port that was just listened on and closed: nothing answers there.
  const closed = createServer();
  const port = await listening(closed);
  await new Promise((resolve) => closed.close(resolve));
  const retries: Retry[] = [];
  const client = createClient({
    baseUrl: `http://127.0.0.1:${port}/v1`,
    apiKey: 'psk_unused',
    attempts: 3,
    backoffMs: 1,
    onRetry: (retry) => void retries.push(retry),
  });
  const read = await client.listPets().catch((error: unknown) => error);
  t.ok(read instanceof PetstoreNetworkError, 'a read gets a network error');
  t.notOk(read instanceof PetstoreError, 'not an API error');
  t.equal(retries.length, 2, 'a read is tried `attempts` times');

  retries.length = 0;
  const change = await client.updatePet({ path: { petId: 1 }, body: { name: 'x' } }).catch((error: unknown) => error);
  t.ok(change instanceof PetstoreNetworkError);
  t.equal(retries.length, 0, 'a PATCH without an Idempotency-Key is not sent again');

  // A server that takes the connection and never answers: each attempt ends at its timeout.
  const silent = createServer((socket) => t.teardown(() => socket.destroy()));
  closing(t, silent);
  const silentPort = await listening(silent);
  retries.length = 0;
  const timedOut = await createClient({
    baseUrl: `http://127.0.0.1:${silentPort}/v1`,
    apiKey: 'psk_unused',
    attempts: 2,
    backoffMs: 1,
    timeoutMs: 50,
    onRetry: (retry) => void retries.push(retry),
  })
    .listOrders()
    .catch((error: unknown) => error);
  t.ok(timedOut instanceof PetstoreNetworkError, 'an attempt past its timeout had no answer');
  t.match((timedOut as Error).message, /timeout|aborted/i);
  t.equal(retries.length, 1, 'and a read is tried again');

  const aborted = new AbortController();
  aborted.abort(new Error('stopped by the caller'));
  const stopped = await client.listPets(undefined, { signal: aborted.signal }).catch((error: unknown) => error);
  t.match(stopped, { message: 'stopped by the caller' }, "the caller's abort ends the call, unretried");
});

t.test("canMove answers from the contract's x-transitions", async (t) => {
  const schemas = contract.dereferenced.components?.schemas ?? {};
  const machines = Object.values(schemas).flatMap((schema) => {
    const moves = (schema as { 'x-transitions'?: Record<string, string[]> })['x-transitions'];
    return moves === undefined ? [] : [moves];
  });
  t.same(Object.values(transitions), machines, 'the client holds every x-transitions of the contract');
  for (const moves of machines) {
    for (const from of Object.keys(moves)) {
      for (const to of Object.keys(moves)) {
        t.equal(canMove(from as Status, to as never), moves[from]?.includes(to) === true, `${from} -> ${to}`);
      }
    }
  }
  t.equal(canMove('available', 'sold'), true);
  t.equal(canMove('sold', 'available'), false);
  t.equal(canMove('placed', 'cancelled'), true);
});

t.test('an operation added to the contract is in both clients generated from it, with no client code', async (t) => {
  const edited = join(temporaryDirectory(t), 'openapi.yaml');
  writeFileSync(edited, withNewOperation(readFileSync(contractPath, 'utf8')));
  const generated = clientFiles('', await validateContract(edited));
  const table = [...generated].find(([file]) => file.endsWith('contract.ts'))?.[1] ?? '';
  const { operationId, method, path } = NEW_OPERATION;
  t.match(
    table,
    `"${operationId}": {\n    "method": "${method}",\n    "path": "${path}",`,
    'its TypeScript method is made from this table entry, as every other is',
  );
  const python = [...generated].find(([file]) => /_generated\/v\d+\/methods\.py$/.test(file))?.[1] ?? '';
  const name = operationId.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
  t.equal(python.split(` def ${name}(\n`).length - 1, 2, `a Python method ${name}, on the sync and the async client`);
  const operations = [...generated].find(([file]) => /_generated\/v\d+\/operations\.py$/.test(file))?.[1] ?? '';
  t.match(operations, `name="${name}",\n    method="${method}",\n    path="${path}",`, 'from its entry');
});
