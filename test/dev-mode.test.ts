import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { parseDocument } from 'yaml';
import { buildApp } from '../src/app.js';
import { issueKey } from '../src/auth/api-keys.js';
import { loadContract } from '../src/contract/document.js';
import { contractPath } from '../src/contract/paths.js';
import { openSqlite } from '../src/storage/sqlite/index.js';
import { temporaryDirectory, type Teardown } from './helpers/api.js';
import { servedVersions } from './helpers/contract.js';
import { NEW_OPERATION, withNewOperation } from './helpers/new-operation.js';

type ResponseObject = OpenAPIV3_1.ResponseObject;

/** Where openapi.yaml, the newest version that a team edits, is served. */
const NEWEST_BASE = servedVersions.contract.basePath;

// What PETSTORE_DEV=1 (npm run dev) adds, in-process: operations without a handler answered from
// the contract, and every response checked against it; and what production does instead.

async function serve(t: Teardown, edit: (text: string) => string, development: boolean) {
  const dir = temporaryDirectory(t);
  const file = join(dir, 'openapi.yaml');
  writeFileSync(file, edit(readFileSync(contractPath, 'utf8')));
  const contract = await loadContract(file);
  const storage = openSqlite({ filename: join(dir, 'pets.db') });
  const account = await storage.accounts.createAccount('tests');
  const { key } = await issueKey(storage.accounts, account.id);
  const logged: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(chunk.toString());
      done();
    },
  });
  t.teardown(() => storage.close());
  const app = await buildApp({ contract, storage, development, logger: { level: 'error', stream } });
  t.teardown(() => app.close());
  return { app, auth: { authorization: `Bearer ${key}` }, logged, contract };
}

t.test('production refuses an operation without a handler, naming it', async (t) => {
  await t.rejects(serve(t, withNewOperation, false), {
    message: new RegExp(`No handler for operation ${NEW_OPERATION.operationId}\\b`),
  });
});

t.test('development answers an operation without a handler from the contract', async (t) => {
  const { app, auth, logged } = await serve(t, withNewOperation, true);
  const { method, operationId, url } = NEW_OPERATION;
  const added = (headers: Record<string, string>) => app.inject({ method, url: url(1), headers });

  t.equal((await added({})).statusCode, 401, 'after authentication');
  const invalid = await app.inject({ method, url: url(0), headers: auth });
  t.equal(invalid.statusCode, 400, 'and request validation');

  const mocked = await added(auth);
  t.equal(mocked.statusCode, 204, 'the first success response');
  t.equal(mocked.headers['x-petstore-mock'], 'example');

  const notFound = await added({ ...auth, prefer: 'code=404' });
  t.equal(notFound.statusCode, 404, 'Prefer: code=404');
  t.same(notFound.json(), {
    type: 'https://petstore.example/problems/not_found',
    title: 'Not found',
    status: 404,
    detail: 'No pet with this id',
    code: 'not_found',
  });
  const named = await added({ ...auth, prefer: 'code=404, example=notFound' });
  t.same(named.json(), notFound.json(), 'Prefer: example=<name>');
  const unknown = await added({ ...auth, prefer: 'code=404; example=nope' });
  t.equal(unknown.statusCode, 400);
  t.match(unknown.json(), { detail: `example=nope: ${operationId} 404 documents only notFound` });
  const undocumented = await added({ ...auth, prefer: 'code=418' });
  t.equal(undocumented.statusCode, 400, 'a status the contract does not document is refused');

  t.same(
    logged.filter((line) => !line.includes('Prefer: code=418') && line.includes('does not conform')),
    [],
    'answers from the contract conform to it',
  );
});

/** The schema of an operation's success answer that documents no example. */
const PET_CARE = {
  type: 'object',
  description: 'How an animal is looked after.',
  required: ['petId', 'vaccinated', 'nextCheckup', 'feedings'],
  additionalProperties: false,
  properties: {
    petId: { type: 'integer', format: 'int64', minimum: 1 },
    vaccinated: { type: 'boolean' },
    nextCheckup: { type: 'string', format: 'date-time' },
    feedings: { type: 'array', minItems: 1, items: { type: 'string', enum: ['morning', 'evening'] } },
    status: { $ref: '#/components/schemas/PetStatus' },
  },
};

/** The contract with getPetCare added: its 200 has a schema and no example anywhere. */
const withPetCare = (text: string) => {
  const document = parseDocument(text);
  const response = (description: string) => ({ $ref: `#/components/responses/${description}` });
  document.setIn(
    ['paths', '/pets/{petId}/care'],
    document.createNode({
      get: {
        operationId: 'getPetCare',
        summary: 'How an animal is looked after',
        description: 'Feeding times, vaccination and the next check-up.',
        tags: ['pets'],
        parameters: [{ $ref: '#/components/parameters/PetId' }],
        responses: {
          '200': {
            description: "The animal's care.",
            headers: { 'X-Request-Id': { $ref: '#/components/headers/XRequestId' } },
            content: { 'application/json': { schema: PET_CARE } },
          },
          '401': response('Unauthorized'),
        },
      },
    }),
  );
  return document.toString();
};

t.test('development answers a success without an example with a value sampled from its schema', async (t) => {
  const { app, auth, logged, contract } = await serve(t, withPetCare, true);
  t.equal(
    (await app.inject({ method: 'GET', url: `${NEWEST_BASE}/pets/1/care` })).statusCode,
    401,
    'after authentication',
  );
  const answer = await app.inject({ method: 'GET', url: `${NEWEST_BASE}/pets/1/care`, headers: auth });
  t.equal(answer.statusCode, 200);
  t.equal(answer.headers['x-petstore-mock'], 'schema', 'marked as an example, generated from the schema');
  const success = contract.dereferenced.paths?.['/pets/{petId}/care']?.get?.responses['200'] as ResponseObject;
  const schema = success.content?.['application/json']?.schema ?? false;
  const validate = addFormats.default(new Ajv2020({ strict: false, allErrors: true })).compile(schema);
  const body: unknown = answer.json();
  t.ok(validate(body), `valid against its schema: ${JSON.stringify(validate.errors)}`);
  t.match(body, { petId: Number, vaccinated: Boolean, nextCheckup: String, feedings: [/^(morning|evening)$/] });
  t.same(
    logged.filter((line) => line.includes('does not conform')),
    [],
    'and the development response check agrees',
  );
});

/** The contract with Pet names limited to 2 characters: the real createPet answer breaks it. */
const shortPetNames = (text: string) => {
  const document = parseDocument(text);
  document.setIn(['components', 'schemas', 'Pet', 'properties', 'name', 'maxLength'], 2);
  return document.toString();
};

/** A create, with the Idempotency-Key v2 requires (a new one each time). */
const createRex = (app: FastifyInstance, headers: Record<string, string>) =>
  app.inject({
    method: 'POST',
    url: `${NEWEST_BASE}/pets`,
    headers: { ...headers, 'idempotency-key': randomUUID() },
    payload: { name: 'Rex', categoryId: 1 },
  });

t.test('development logs a response that breaks the contract, naming operation, status and schema path', async (t) => {
  const { app, auth, logged } = await serve(t, shortPetNames, true);
  const created = await createRex(app, auth);
  t.equal(created.statusCode, 201, 'the response is still sent');
  const [line, ...others] = logged.filter((entry) => entry.includes('does not conform'));
  t.equal(others.length, 0);
  const entry = JSON.parse(line ?? '{}') as { level?: number; operation?: string; status?: number; msg?: string };
  t.equal(entry.level, 50, 'as an error');
  t.equal(entry.operation, 'createPet');
  t.equal(entry.status, 201);
  t.match(
    entry.msg,
    /body\/name must NOT have more than 2 characters \(#\/paths\/~1pets\/post\/responses\/201\/content\/application~1json\/schema\/properties\/name\/maxLength\)/,
  );
});

t.test('production does not check responses', async (t) => {
  const { app, auth, logged } = await serve(t, shortPetNames, false);
  const created = await createRex(app, auth);
  t.equal(created.statusCode, 201);
  t.same(logged, []);
});
