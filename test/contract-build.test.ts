import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import t from 'tap';
import { parseDocument } from 'yaml';
import { buildContract } from '../scripts/build-contract.js';
import { buildApp } from '../src/app.js';
import { loadContract, type OpenApiDocument, sha256, validateContract } from '../src/contract/document.js';
import { precompiledMetaSchemaFile, usePrecompiledMetaSchema } from '../src/contract/meta-schema.js';
import { contractPath, projectRoot } from '../src/contract/paths.js';
import { newestRelease } from '../src/versions/releases.js';
import { servedContracts } from '../src/versions/served.js';
import { openSqlite } from '../src/storage/sqlite/index.js';
import { temporaryDirectory, type Teardown } from './helpers/api.js';

// `npm run build` validates the contract once (scripts/build-contract.ts) so that a start need
// not; these tests hold it to giving the same answers as validating at start would.

/** A copy of openapi.yaml in a temporary folder, edited by `edit`. */
function editedContract(t: Teardown, edit: (text: string) => string): string {
  const file = join(temporaryDirectory(t), 'openapi.yaml');
  writeFileSync(file, edit(readFileSync(contractPath, 'utf8')));
  return file;
}

function setIn(text: string, path: string[], value: unknown): string {
  const document = parseDocument(text);
  document.setIn(path, value);
  return document.toString();
}

t.test('a start uses the copy the build validated, and only for the very same bytes', async (t) => {
  const built = await loadContract();
  t.equal(built.validatedAt, 'build', 'npm run build left a validated copy for openapi.yaml');
  t.equal(built.sha256, sha256(readFileSync(contractPath)));

  const edited = await loadContract(editedContract(t, (text) => `${text}\n# edited after the build\n`));
  t.equal(edited.validatedAt, 'start', 'other bytes are validated at start');
  t.not(edited.sha256, built.sha256);
  t.same(edited.document, built.document, 'the build kept the contract as written');
  t.same(edited.dereferenced, built.dereferenced, 'and dereferenced as swagger-parser does');
  t.same(edited.operations, built.operations);
});

t.test("each older version's served release is validated by the build too", async (t) => {
  const { olderContracts } = await servedContracts();
  t.ok(olderContracts.length > 0, 'v2 serves v1 beside it');
  for (const older of olderContracts) {
    t.equal(older.validatedAt, 'build', `${older.basePath}: npm run build left a validated copy of its release`);
    const release = newestRelease(projectRoot, Number(older.document.info.version.split('.')[0]));
    const atStart = await validateContract(join(projectRoot, release?.file ?? ''));
    t.same(older.dereferenced, atStart.dereferenced, `${older.basePath}: the same as validating it at start`);
  }
});

t.test('a contract edited after the build is still validated before it is served', async (t) => {
  const withoutResponses = editedContract(t, (text) => setIn(text, ['paths', '/pets', 'get', 'responses'], 'none'));
  await t.rejects(loadContract(withoutResponses), /responses/);
  await t.rejects(buildContract(withoutResponses), /is not a valid OpenAPI document: [^]*responses must be object/);

  // The OpenAPI meta-schema does not look inside Schema Objects; the JSON Schema check does.
  const badSchema = editedContract(t, (text) =>
    setIn(text, ['components', 'parameters', 'Limit', 'schema', 'minimum'], 'one'),
  );
  await t.rejects(
    loadContract(badSchema),
    /invalid JSON Schema: .*components\.parameters\.Limit\.schema schema\/minimum must be number/,
  );
  await t.rejects(buildContract(badSchema), /is not a valid OpenAPI document: invalid JSON Schema/);
});

/** Documents the OpenAPI 3.1 meta-schema accepts and rejects, for different reasons. */
function metaSchemaCases(document: OpenApiDocument): [string, unknown][] {
  const copy = () => structuredClone(document) as unknown as Record<string, unknown>;
  return [
    ['the contract', copy()],
    ['no info', { ...copy(), info: undefined }],
    ['no paths, webhooks or components', { openapi: '3.1.0', info: { title: 'x', version: '1' } }],
    ['a path not starting with /', { ...copy(), paths: { pets: {} } }],
    ['a number for a title', { ...copy(), info: { title: 5, version: '1' } }],
    ['an unknown top-level field', { ...copy(), servrs: [] }],
    ['a bad contact email', { ...copy(), info: { title: 'x', version: '1', contact: { email: 'not an email' } } }],
    ['a parameter in the body', { ...copy(), paths: { '/x': { get: { parameters: [{ name: 'a', in: 'body' }] } } } }],
  ];
}

async function verdicts(document: OpenApiDocument) {
  const results: Record<string, unknown> = {};
  for (const [name, candidate] of metaSchemaCases(document)) {
    results[name] = await new Validator().validate(structuredClone(candidate) as never);
  }
  return results;
}

t.test('the glue validates the contract with the precompiled meta-schema, with the same verdicts', async (t) => {
  const { dereferenced } = await loadContract();
  const compiledAtStart = await verdicts(dereferenced);
  t.equal(Object.values(compiledAtStart).filter((verdict) => (verdict as { valid: boolean }).valid).length, 1);

  const stale = join(temporaryDirectory(t), 'meta-schema.mjs');
  const code = readFileSync(precompiledMetaSchemaFile, 'utf8');
  writeFileSync(stale, code.replace(/schemaSha256 = "[0-9a-f]+"/, `schemaSha256 = "${'0'.repeat(64)}"`));
  t.equal(await usePrecompiledMetaSchema(stale), false, 'code compiled from another meta-schema file is not used');

  t.equal(await usePrecompiledMetaSchema(), true, 'the build compiled the installed meta-schema');
  t.same(await verdicts(dereferenced), compiledAtStart, 'precompiled: the same verdicts and errors');

  // The glue still refuses a contract the meta-schema rejects.
  const storage = openSqlite({ filename: join(temporaryDirectory(t), 'petstore.db') });
  t.teardown(() => storage.close());
  const contract = await loadContract();
  const broken = { ...contract, dereferenced: { ...contract.dereferenced, paths: { pets: {} } } as OpenApiDocument };
  await t.rejects(
    buildApp({ contract: broken, storage }).then((app) => app.ready()),
    /must contain a valid specification/,
  );
});
