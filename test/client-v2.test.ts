// The v2 clients (`@petstore/client`, `petstore`: generated from openapi.yaml) against the real
// server under /v2 on the backend under test, every answer checked against v2's contract: paging as
// v2's contract says (its envelope's nextCursor once lists are envelopes, `Link: rel="next"` before),
// errors read as v2's contract says (a problem's `detail`, `type` and `title` once errors are problem
// details), the Idempotency-Key each create carries, and both versions' clients side by side on one
// server. The v1 clients' suites are the other test/client*.test.ts files, unchanged.
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { createClient, isPetstoreError, PetstoreError, type Retry } from '../clients/typescript/src/index.js';
import { operations } from '../clients/typescript/src/generated/v2/contract.js';
import * as v1 from '../clients/typescript/src/v1.js';
import { bind } from '../clients/typescript/src/version.js';
import { type ClientContract, describeClient } from '../scripts/contract/client-description.js';
import { clientFiles, pythonGeneratedDir } from '../scripts/contract/generate-client.js';
import { validateContract } from '../src/contract/document.js';
import { contractPath } from '../src/contract/paths.js';
import { conformingFetch, listen, startApi, type TapTest, temporaryDirectory } from './helpers/api.js';
import { conformingProxy } from './helpers/conforming-proxy.js';
import { servedVersions } from './helpers/contract.js';
import { losingFirstAnswer } from './helpers/lost-answer.js';
import { loopbackServer } from './helpers/receiver.js';
import { devPython, pythonClientDir, runPython } from './helpers/python.js';

/** The v2 base path, from openapi.yaml's `servers` (the newest version's contract). */
const V2 = servedVersions.contract.basePath;

/** Why a test of a v2 shape the contract does not have yet is skipped; false once openapi.yaml has it. */
const ENVELOPES =
  !('envelope' in operations.listPets) &&
  'openapi.yaml does not answer lists as {data, nextCursor} envelopes yet (issue 51 change 3, listEnvelopes, not on main)';
const PROBLEMS =
  !('problem' in operations.getOrder) &&
  'openapi.yaml does not answer errors as application/problem+json yet (issue 51 change 2, problemDetails, not on main)';

/** A server of the backend under test, a v2 client of it, and a v1 one, each sending through `conformingFetch`. */
async function served(t: TapTest) {
  const api = await startApi(t);
  const { origin, baseUrl } = await listen(t, api);
  const retries: Retry[] = [];
  const sent: Request[] = [];
  const options = { apiKey: api.key, fetch: conformingFetch, backoffMs: 1 };
  const clientAt = (url: string) =>
    createClient({
      ...options,
      baseUrl: url,
      onRetry: (retry) => void retries.push(retry),
      onRequest: (request) => void sent.push(request.clone()),
    });
  return {
    api,
    origin,
    client: clientAt(`${origin}${V2}`),
    clientAt,
    v1Client: v1.createClient({ ...options, baseUrl }),
    retries,
    sent,
  };
}

/** `count` animals made in storage, their ids in creation order. */
async function animals(t: TapTest, api: Awaited<ReturnType<typeof served>>['api'], count: number) {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) {
    const outcome = await api.storage.pets.create({ name: `Pet ${i}`, categoryId: 1, status: 'available' });
    if (outcome.outcome === 'created') ids.push(outcome.created.pet.id);
  }
  t.equal(ids.length, count);
  return ids;
}

t.test("each and page follow v2's paging, page after page, with the filters kept", async (t) => {
  const { api, client } = await served(t);
  const ids = await animals(t, api, 250);
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

  const filtered: number[] = [];
  for await (const pet of client.each('listPets', { query: { limit: 7, status: 'available', id: ids.slice(0, 20) } })) {
    filtered.push(pet.id);
  }
  t.same(filtered, ids.slice(0, 20), 'filters are kept from page to page');
});

t.test(
  'a v2 list is an envelope: its items in data, the next page in nextCursor, no Link',
  { skip: ENVELOPES },
  async (t) => {
    const { api, client } = await served(t);
    const ids = await animals(t, api, 3);
    const first = await client.listPets({ query: { limit: 2 } });
    const body = first.data as unknown as { data: { id: number }[]; nextCursor: string | null };
    t.same(
      body.data.map(({ id }) => id),
      ids.slice(0, 2),
      'the first page of two',
    );
    t.type(body.nextCursor, 'string', 'and the cursor of the next');
    t.equal(first.headers.get('link'), null, 'v2 sends no Link: rel="next"');
    const page = await client.page('listPets', { query: { limit: 2 } });
    t.equal(page.next, body.nextCursor, "page's next is the envelope's nextCursor");
    const last = await client.page('listPets', { query: { limit: 2, cursor: page.next ?? '' } });
    t.same(
      last.items.map(({ id }) => id),
      ids.slice(2),
    );
    t.equal(last.next, undefined, 'the last page, whose nextCursor is null, has none');
  },
);

t.test("a v2 error is typed by v2's codes, its words the answer's", async (t) => {
  const { client } = await served(t);
  const error = await client.getOrder({ path: { orderId: 424242 } }).catch((caught: unknown) => caught);
  t.ok(error instanceof PetstoreError);
  if (!isPetstoreError(error, 'getOrder')) return;
  t.same(
    { status: error.status, code: error.code, operationId: error.operationId },
    { status: 404, code: 'not_found', operationId: 'getOrder' },
  );
  t.match(error.message, /No order with id 424242/, "its message holds the answer's words");
  t.type(error.requestId, 'string');
});

t.test('a v2 error is problem details: detail its message, with type and title', { skip: PROBLEMS }, async (t) => {
  const { client } = await served(t);
  const error = await client.getOrder({ path: { orderId: 424242 } }).catch((caught: unknown) => caught);
  t.ok(isPetstoreError(error, 'getOrder'), 'a PetstoreError');
  if (!isPetstoreError(error, 'getOrder')) return;
  t.equal(error.type, 'https://petstore.example/problems/not_found');
  t.type(error.title, 'string');
  t.match(error.message, /^getOrder: 404 not_found: No order with id 424242/, 'the detail is its message');
});

t.test('a v2 create carries an Idempotency-Key of its own, reused by its retry and replayed', async (t) => {
  const { origin, clientAt, retries, sent, v1Client } = await served(t);
  const proxy = await losingFirstAnswer(t, Number(new URL(origin).port));
  const client = clientAt(`http://127.0.0.1:${proxy.port}${V2}`);
  const created = await client.createPet({ body: { name: 'Once', categoryId: 1 } });
  t.ok(proxy.lost(), 'the first answer was lost');
  t.equal(retries.length, 1, 'sent twice');
  const keys = sent.map((request) => request.headers.get('idempotency-key'));
  t.equal(keys.length, 2);
  t.match(keys[0], /^[0-9a-f-]{36}$/, 'the client made a key');
  t.equal(keys[1], keys[0], 'and sent the same one again');
  t.equal(created.status, 201);
  t.equal(created.replayed, true, 'the second answer replays the first create');
  const stored = await v1Client.listPets();
  t.same(
    stored.data.map(({ id, name }) => ({ id, name })),
    [{ id: created.data.id, name: 'Once' }],
    'one pet, not two',
  );
});

t.test('the v1 and the v2 clients side by side: one server, their own errors', async (t) => {
  const { client, v1Client } = await served(t);
  const created = await client.createPet({ body: { name: 'Both', categoryId: 1 } });
  const read = await v1Client.listPets({ query: { id: [created.data.id] } });
  t.same(
    read.data,
    [{ id: created.data.id, name: 'Both', categoryId: 1, status: 'available' }],
    'v1 reads what v2 made',
  );

  const v1Error = await v1Client.getOrder({ path: { orderId: 424242 } }).catch((caught: unknown) => caught);
  t.ok(v1.isPetstoreError(v1Error, 'getOrder'), "v1's error is v1's");
  t.notOk(isPetstoreError(v1Error), "and not v2's");
  t.notOk(v1Error instanceof PetstoreError);
  if (v1.isPetstoreError(v1Error, 'getOrder')) {
    t.equal(v1Error.code, 'not_found');
    t.equal(v1Error.type, undefined, 'a v1 error is no problem: it has no type');
    t.match(v1Error.message, /No order with id 424242/, 'its words are the Error body message');
  }
});

t.test('the Python v2 client (`petstore`): every page, the Idempotency-Key, errors as v2 says', async (t) => {
  const { api, origin } = await served(t);
  const ids = await animals(t, api, 5);
  // Every answer checked against v2's contract on its way to the client.
  const proxy = await conformingProxy(t, `${origin}${V2}`);
  const script = [
    'import json, os',
    'from petstore import NewPet, Petstore, is_petstore_error',
    'petstore = Petstore(os.environ["PETSTORE_BASE_URL"], os.environ["PETSTORE_API_KEY"], backoff=0.001)',
    'ids = [pet.id for pet in petstore.list_pets(limit=2)]',
    'pages = [len(page.items) for page in petstore.list_pets(limit=2).iter_pages()]',
    'created = petstore.create_pet(body=NewPet(name="Py", category_id=1))',
    'try:',
    '    petstore.get_order(424242)',
    'except Exception as error:',
    '    assert is_petstore_error(error, "get_order")',
    '    failed = {"status": error.status, "code": error.code, "message": error.message, "type": error.type}',
    'print(json.dumps({"ids": ids, "pages": pages, "created": created.status, "error": failed}))',
  ].join('\n');
  const { stdout } = await runPython(await devPython(), ['-c', script], {
    PETSTORE_BASE_URL: proxy.baseUrl,
    PETSTORE_API_KEY: api.key,
  });
  const outcome = JSON.parse(stdout) as {
    ids: number[];
    pages: number[];
    created: number;
    error: { status: number; code: string; message: string; type: string | null };
  };
  t.same(outcome.ids, ids, 'every animal, page after page');
  t.same(outcome.pages, [2, 2, 1]);
  t.equal(outcome.created, 201, 'the create carried its own Idempotency-Key');
  t.match(outcome.error, { status: 404, code: 'not_found', message: /No order with id 424242/ });
  t.equal(
    outcome.error.type,
    PROBLEMS === false ? 'https://petstore.example/problems/not_found' : null,
    "the error's type, when v2's errors are problem details",
  );
  t.same(proxy.failures, [], "every answer the Python client saw is v2's contract's");
});

/**
 * openapi.yaml with v2's list and error shapes as the spec writes them (issue 51: listPets answering
 * `{ data, nextCursor }`, getOrder's 404 `application/problem+json`), for what the generators and
 * the runtime make of them before the server answers so.
 */
async function specShapedContract(): Promise<ClientContract> {
  const loaded = await validateContract(contractPath);
  const document = structuredClone(loaded.document) as OpenAPIV3_1.Document & {
    components: { schemas: Record<string, unknown> };
    paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
  };
  document.components.schemas.PetPage = {
    type: 'object',
    required: ['data', 'nextCursor'],
    properties: {
      data: { type: 'array', items: { $ref: '#/components/schemas/Pet' } },
      nextCursor: { type: ['string', 'null'] },
    },
  };
  const listPets = document.paths['/pets']?.get?.responses['200'] as { content: Record<string, { schema: unknown }> };
  listPets.content = { 'application/json': { schema: { $ref: '#/components/schemas/PetPage' } } };
  const getOrder = document.paths['/store/orders/{orderId}']?.get?.responses ?? {};
  getOrder['404'] = { description: 'No such order.', content: { 'application/problem+json': { schema: {} } } };
  return { document, dereferenced: loaded.dereferenced };
}

t.test('the generators read an envelope and problem details from the contract, naming neither', async (t) => {
  const contract = await specShapedContract();
  const listPets = describeClient(contract, new Set()).operations.find(({ operationId }) => operationId === 'listPets');
  t.same(listPets?.entry.envelope, { items: 'data', next: 'nextCursor' }, 'its items and its next cursor');
  t.equal(listPets?.entry.cursor, 'cursor', 'and it pages');
  const generated = clientFiles('', contract);
  const python = (name: string) => [...generated].find(([file]) => file.endsWith(`/v2/${name}`))?.[1] ?? '';
  t.match(python('operations.py'), 'envelope_items="data",\n    envelope_next="nextCursor",');
  t.match(python('operations.py'), /name="get_order",\n(?: {4}.*\n)*? {4}problem=True,/);
  t.match(python('methods.py'), /\) -> Page\[Pet\]:/, "list_pets pages the envelope's items, Pets");
});

/**
 * A loopback server answering as the spec says v2 will: `/v2/pets` in pages of two of five animals,
 * each page an envelope whose nextCursor asks for the next; anything else a problem's 404. `seen`:
 * the path and query of each request.
 */
async function specShapedServer(t: TapTest): Promise<{ port: number; seen: string[] }> {
  const at = '2026-11-28T19:00:00.000Z';
  const pets = [1, 2, 3, 4, 5].map((id) => ({
    id,
    name: `Pet ${id}`,
    categoryId: 1,
    status: 'available',
    createdAt: at,
    updatedAt: at,
  }));
  const seen: string[] = [];
  const { port } = await loopbackServer(t, (request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    seen.push(`${url.pathname}${url.search}`);
    if (url.pathname === '/v2/pets') {
      const from = Number(url.searchParams.get('cursor') ?? 0);
      const nextCursor = from + 2 < pets.length ? String(from + 2) : null;
      response.setHeader('content-type', 'application/json');
      response.end(JSON.stringify({ data: pets.slice(from, from + 2), nextCursor }));
      return;
    }
    response.statusCode = 404;
    response.setHeader('content-type', 'application/problem+json');
    response.end(
      JSON.stringify({
        type: 'https://petstore.example/problems/not_found',
        title: 'Not found',
        status: 404,
        detail: 'No order with id 7',
        code: 'not_found',
      }),
    );
  });
  return { port, seen };
}

/** The requests `each` makes of specShapedServer for the animals whose status is available. */
const EACH_AVAILABLE = [
  '/v2/pets?status=available',
  '/v2/pets?status=available&cursor=2',
  '/v2/pets?status=available&cursor=4',
];

t.test('the runtime follows an envelope nextCursor and reads a problem, as the contract says', async (t) => {
  const described = describeClient(await specShapedContract(), new Set());
  const tables = {
    operations: Object.fromEntries(described.operations.map(({ operationId, entry }) => [operationId, entry])),
    errorCodes: Object.fromEntries(
      described.operations.map(({ operationId, errorCodesByStatus }) => [operationId, errorCodesByStatus]),
    ),
    eventSchemas: {},
    transitions: described.transitions,
  };
  const { port, seen } = await specShapedServer(t);
  const { createClient: looseClient, isPetstoreError: isLooseError } = bind(tables as never);
  const client = looseClient({ baseUrl: `http://127.0.0.1:${port}/v2`, apiKey: 'psk_x' }) as unknown as {
    each(id: string, input: object): AsyncGenerator<{ id: number }>;
    page(id: string, input: object): Promise<{ items: unknown[]; next: string | undefined }>;
    getOrder(input: object): Promise<unknown>;
  };
  const ids: number[] = [];
  for await (const pet of client.each('listPets', { query: { status: 'available' } })) ids.push(pet.id);
  t.same(ids, [1, 2, 3, 4, 5], 'every item, page after page');
  t.same(seen, EACH_AVAILABLE, 'each next page asked for by the last nextCursor, the filters kept');
  const last = await client.page('listPets', { query: { cursor: '4' } });
  t.equal(last.next, undefined, 'a null nextCursor is the last page');
  const error = await client.getOrder({ path: { orderId: 7 } }).catch((caught: unknown) => caught);
  t.ok(isLooseError(error));
  t.match(error, {
    status: 404,
    code: 'not_found',
    type: 'https://petstore.example/problems/not_found',
    title: 'Not found',
    message: 'getOrder: 404 not_found: No order with id 7',
  });
});

t.test(
  'the Python client generated from the spec-shaped contract pages by nextCursor and reads the problem',
  async (t) => {
    // The package as it is, with its v2 generated from the contract written as the spec says.
    const copy = temporaryDirectory(t);
    cpSync(join(pythonClientDir, 'src', 'petstore'), join(copy, 'petstore'), {
      recursive: true,
      filter: (source) => !source.includes('__pycache__'),
    });
    const prefix = `${pythonGeneratedDir}/`;
    for (const [file, text] of clientFiles('', await specShapedContract())) {
      if (file.startsWith(prefix)) writeFileSync(join(copy, 'petstore', '_generated', file.slice(prefix.length)), text);
    }
    const { port, seen } = await specShapedServer(t);
    const script = [
      'import json',
      'from petstore import Petstore, is_petstore_error',
      `petstore = Petstore("http://127.0.0.1:${port}/v2", "psk_x")`,
      'ids = [pet.id for pet in petstore.list_pets(status="available")]',
      'last = petstore.list_pets(cursor="4")',
      'try:',
      '    petstore.get_order(7)',
      'except Exception as error:',
      '    assert is_petstore_error(error, "get_order")',
      '    failed = {"status": error.status, "code": error.code, "message": error.message, "type": error.type, "title": error.title}',
      'print(json.dumps({"ids": ids, "last": [pet.id for pet in last.items], "next": last.next_cursor, "error": failed}))',
    ].join('\n');
    const { stdout } = await runPython(await devPython(), ['-c', script], { PYTHONPATH: copy });
    t.same(JSON.parse(stdout), {
      ids: [1, 2, 3, 4, 5],
      last: [5],
      next: null,
      error: {
        status: 404,
        code: 'not_found',
        message: 'No order with id 7',
        type: 'https://petstore.example/problems/not_found',
        title: 'Not found',
      },
    });
    t.same(seen.slice(0, 3), EACH_AVAILABLE, 'each next page asked for by the last nextCursor, the filters kept');
  },
);
