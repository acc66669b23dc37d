import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { type Document, parseDocument, type YAMLSeq } from 'yaml';
import { checkBreaking, describePointer, newestRelease } from '../scripts/contract-check/breaking.js';
import { checkChangelog, renderChangelog } from '../scripts/contract-check/changelog.js';
import { type Drift, formatDrift } from '../scripts/contract-check/drift.js';
import { checkErrorCodes } from '../scripts/contract-check/error-codes.js';
import { checkGenerated, firstDifference } from '../scripts/contract-check/generated.js';
import { checkHandlers, handlerNames } from '../scripts/contract-check/handlers.js';
import { checkLint } from '../scripts/contract-check/lint.js';
import { checkRelease } from '../scripts/contract-check/release.js';
import { checkResponses, loadUnreachedResponses, RESPONSES_NOT_CHECKED } from '../scripts/contract-check/responses.js';
import { contractCheck } from '../scripts/contract-check/index.js';
import { checkServed } from '../scripts/contract-check/served.js';
import { checkVersionChanges } from '../scripts/contract-check/versions.js';
import { operationObject, run } from '../scripts/contract-check/tools.js';
import { type Contract, loadContract } from '../src/contract/document.js';
import { projectRoot } from '../src/contract/paths.js';
import { getPetRemoved } from '../src/versions/changes/get-pet-removed.js';
import { API_VERSIONS } from '../src/versions/index.js';
import { contractPaths } from './helpers/contract.js';
import { NEW_OPERATION } from './helpers/new-operation.js';
import { copyContract, copyProject } from './helpers/project-copy.js';

// Each drift is planted in a copy of the project, as built, or of its contract alone where the check
// reads nothing else (test/helpers/project-copy.ts). The real
// `npm run contract:check` runs once, on a drift; the others go through the checks in this process.

/** Edits the copy's openapi.yaml and returns the contract as loaded from it. */
async function plant(root: string, edit: (document: Document) => void): Promise<Contract> {
  const file = join(root, 'openapi.yaml');
  const document = parseDocument(readFileSync(file, 'utf8'));
  edit(document);
  writeFileSync(file, document.toString());
  return loadContract(file);
}

const report = (drifts: Drift[]) => drifts.map(formatDrift).join('\n');

/**
 * The real command, without the response log `npm test` gives it: its script, as `npm run
 * contract:check` runs it once the copy is compiled (the copy is as built; the type check and
 * build before it in package.json are the build's own, tested by every `npm test`).
 */
function contractCheckCommand(root: string) {
  const env = { ...process.env };
  delete env.PETSTORE_RESPONSE_LOG;
  return run(process.execPath, [join(root, 'dist', 'scripts', 'contract-check.js')], root, env);
}

const committed = await loadContract(join(projectRoot, 'openapi.yaml'));
/**
 * The release a change is checked against: the newest of the contract's major version. While the
 * newest major version is unreleased, the copies where a change must break a release are made as
 * they will be once it ships (`asReleased`).
 */
const newest = `v${committed.document.info.version}`;
const unreleased = newestRelease(projectRoot, Number(committed.document.info.version.split('.')[0])) === undefined;

let releasedChangelog: Promise<string> | undefined;

/** The copy as it is once openapi.yaml's version is released: that release, and its changelog. */
async function asReleased(root: string): Promise<string> {
  if (!unreleased) return root;
  copyFileSync(join(root, 'openapi.yaml'), join(root, 'contracts', `${newest}.yaml`));
  // Every copy starts from the same contracts: their changelog is rendered once.
  releasedChangelog ??= renderChangelog(root).then(({ text }) => text);
  writeFileSync(join(root, 'contracts', 'CHANGELOG.md'), await releasedChangelog);
  return root;
}

// Redocly run a few dozen times and the checks in this process take about 50 s of CPU; on a shared
// 2-core machine at load average 25-30 that was 254 s of wall time, past the 240 s this was.
t.setTimeout(420_000);

t.test('contract:check passes an untouched copy and names each drift with its fix', async (t) => {
  const root = await asReleased(copyProject(t));
  const clean = await contractCheck(root);
  t.same(
    clean.flatMap(({ drifts }) => drifts),
    [],
    'no drift',
  );
  t.match(
    clean.map(({ check }) => check).join(', '),
    /^valid, handlers, lint, generated, breaking, release, [a-z, ]*served$/,
    'every check ran',
  );

  // A hand-edited generated file, through the check in this process.
  const generated = join(root, 'generated', 'openapi.ts');
  const original = readFileSync(generated, 'utf8');
  writeFileSync(generated, original.replace('export interface paths {', 'export interface paths { // tidied by hand'));
  const handEdited = report(await checkGenerated(root, await loadContract(join(root, 'openapi.yaml'))));
  t.match(
    handEdited,
    /contract:check: generated\/openapi\.ts is not what openapi\.yaml generates.*\(generated\/openapi\.ts:\d+\)\n {4}- export interface paths \{ \/\/ tidied by hand\n {4}\+ export interface paths \{\n {2}run: npm run generate(\n|$)/,
    'a hand-edited generated file fails',
  );
  t.equal(handEdited.match(/^contract:check: /gm)?.length, 1, 'naming that file alone');

  // The command itself, once, on a contract edited without npm run generate: how it fails. (npm
  // test's contract:check stage and the dev-loop test run it where it passes.)
  writeFileSync(generated, original);
  await plant(root, (document) => {
    document.setIn(['components', 'schemas', 'NewPet', 'properties', 'nickname'], {
      type: 'string',
      description: 'Optional.',
    });
  });
  const command = await contractCheckCommand(root);
  t.equal(command.code, 1, 'a contract edited without npm run generate fails');
  const stale = command.stderr;
  t.match(stale, /\+ +nickname\?: string;[\s\S]*run: npm run generate/, 'naming what generated/ lacks');
  t.match(
    stale,
    /clients\/typescript\/src\/generated\/v2\/openapi\.ts is not what openapi\.yaml generates/,
    'nor the TypeScript client',
  );
  t.match(
    stale,
    /clients\/python\/src\/petstore\/_generated\/v2\/models\.py is not what openapi\.yaml generates[\s\S]*\+ +nickname: str \| None = None/,
    'nor the Python client',
  );
  t.match(
    stale,
    /openapi\.yaml names version \d+\.\d+\.\d+, released as contracts\/v[\d.]+\.yaml, but is not that release/,
  );
  t.notMatch(stale, /breaking change/, 'an optional request field is not a breaking change');
  // generated/, the TypeScript and the Python client's, and the release it is not.
  t.match(stale, /^contract:check: 4 drifts between code and contract$/m, 'and nothing else');
  t.ok(stale.split('\n').includes(RESPONSES_NOT_CHECKED), 'saying it did not check the responses tests saw');
});

/** Adds an operation the contract does not have, without a handler. */
function addNewOperation(document: Document): void {
  document.setIn(['paths', NEW_OPERATION.path, NEW_OPERATION.method.toLowerCase()], {
    operationId: NEW_OPERATION.operationId,
    parameters: [{ $ref: '#/components/parameters/PetId' }],
    responses: { '204': { description: 'Done.' } },
  });
}

t.test('an operation without a handler, and a handler without an operation', async (t) => {
  const contract = await plant(copyContract(t), addNewOperation);
  t.same(checkHandlers(committed), [], 'today every operation has its handler');
  const { operationId, method, path } = NEW_OPERATION;
  t.match(
    report(checkHandlers(contract)),
    `contract:check: operation ${operationId} has no handler (openapi.yaml: ${method} ${path})\n  fix: implement ${operationId} in src/handlers/`,
  );
  t.match(
    report(checkHandlers(committed, [...handlerNames(committed), 'archivePet'])),
    /handler archivePet answers no operation of the contract/,
  );
});

const breakingChanges: { name: string; edit: (document: Document) => void; expected: RegExp }[] = [
  {
    name: 'an optional request field made required',
    edit: (document) => (document.getIn(['components', 'schemas', 'NewPet', 'required']) as YAMLSeq).add('status'),
    expected:
      /Properties of `NewPet` became required: `status`\. \[required-properties-added\] \(POST \/pets requestBody\/content\/application\/json\/schema, openapi\.yaml:\d+:\d+\)/,
  },
  {
    name: 'an enum value removed',
    edit: (document) => document.deleteIn(['components', 'schemas', 'PetStatus', 'enum', 2]),
    expected: /Enum of `PetStatus` lost values: 'sold'\. \[enum-values-removed\] \(GET \/pets parameters\/1\/schema/,
  },
  {
    name: "a response field's type changed",
    edit: (document) => document.setIn(['components', 'schemas', 'Pet', 'properties', 'categoryId', 'type'], 'string'),
    expected:
      /Type of `categoryId` widened from 'integer' to 'string'\. \[schema-type-changed\] \(GET \/pets responses\/200\/content\/application\/json\/schema\/properties\/data\/items\/properties\/categoryId/,
  },
  {
    name: 'an operation made public',
    edit: (document) => document.setIn(['paths', '/pets', 'get', 'security'], document.createNode([])),
    expected: /authentication changed from apiKey to none \(GET \/pets\)/,
  },
];

for (const { name, edit, expected } of breakingChanges) {
  t.test(`breaking: ${name}`, async (t) => {
    const root = await asReleased(copyContract(t));
    const drifts = await checkBreaking(root, await plant(root, edit));
    t.match(report(drifts), expected);
    t.match(report(drifts), `contract:check: breaking change against ${newest} (contracts/${newest}.yaml): `);
    t.match(report(drifts), /fix: undo the change, or release it as a new major version/);
  });
}

t.test('additive changes are not breaking; a new major version has no release to break', async (t) => {
  const root = await asReleased(copyContract(t));
  const additive = await plant(root, (document) => {
    document.setIn(['components', 'schemas', 'NewPet', 'properties', 'nickname'], { type: 'string' });
    document.setIn(['components', 'schemas', 'Pet', 'properties', 'nickname'], { type: 'string' });
    addNewOperation(document);
  });
  t.same(await checkBreaking(root, additive), []);
  const nextMajor = await plant(root, (document) => {
    document.setIn(['info', 'version'], `${Number(newest.slice(1).split('.')[0]) + 1}.0.0`);
    document.deleteIn(['paths', '/pets/{petId}']);
  });
  t.same(await checkBreaking(root, nextMajor), []);
});

t.test('release: a contract naming a released version is that release; changes carry the next version', async (t) => {
  const root = await asReleased(copyContract(t));
  const released = committed.document.info.version;
  const [major, minor, patch] = released.split('.').map(Number) as [number, number, number];
  const version = (text: string) => (document: Document) => document.setIn(['info', 'version'], text);
  t.same(await checkRelease(root, committed), [], `openapi.yaml is contracts/v${released}.yaml`);
  t.same(await checkChangelog(root), [], 'and the changelog has nothing unreleased');

  const nickname = (document: Document) =>
    document.setIn(['components', 'schemas', 'NewPet', 'properties', 'nickname'], { type: 'string' });
  t.match(
    report(await checkRelease(root, await plant(root, nickname))),
    `contract:check: openapi.yaml names version ${released}, released as contracts/v${released}.yaml, but is not that release (openapi.yaml at /components/schemas/NewPet/properties/nickname)\n  fix: changes after a release carry the next version`,
    'an operation or field added under the released version fails, naming the first difference',
  );
  const nextPatch = `${major}.${minor}.${patch + 1}`;
  const nextMinor = `${major}.${minor + 1}.0`;
  t.match(
    report(await checkRelease(root, await plant(root, version(nextPatch)))),
    `openapi.yaml names version ${nextPatch}, a patch step from v${released}, but its changes need a minor step (openapi.yaml info.version)\n  fix: set info.version to ${nextMinor}`,
    'an addition is a minor step',
  );
  t.match(
    report(await checkRelease(root, await plant(root, version(`${major}.${minor + 2}.0`)))),
    `which does not follow the newest release below it, v${released} (openapi.yaml info.version)\n  fix: set info.version to one of ${nextPatch}, ${nextMinor}, ${major + 1}.0.0`,
    'a version skipped fails',
  );
  const next = await plant(root, version(nextMinor));
  t.same(await checkRelease(root, next), [], 'the next minor version passes');
  t.match(
    report(await checkChangelog(root)),
    /contracts\/CHANGELOG\.md is not what the released contracts make.*\n {2}run: npm run changelog/,
    'until the changelog lists the change',
  );
  const { text } = await renderChangelog(root);
  t.match(
    text,
    `## Unreleased: v${nextMinor}, against v${released}\n\nIn openapi.yaml, not released yet: \`contracts/v${nextMinor}.yaml\` is written when it ships.\n\n0 major, 1 minor, 1 patch.\n\n- **minor** \`POST /pets requestBody/content/application/json/schema/properties/nickname\`: added\n`,
    'under an Unreleased heading, above the releases',
  );
  t.ok(text.indexOf('## Unreleased') < text.indexOf(`## v${released}, against`));
  writeFileSync(join(root, 'contracts', 'CHANGELOG.md'), text);
  t.same(await checkChangelog(root), [], 'written by npm run changelog, it passes');

  const reworded = await plant(root, (document) => {
    document.deleteIn(['components', 'schemas', 'NewPet', 'properties', 'nickname']);
    document.setIn(['info', 'summary'], 'Animals, listed.');
    version(nextPatch)(document);
  });
  t.same(await checkRelease(root, reworded), [], 'words changed alone are a patch step');
});

t.test('versions: every breaking difference between major versions is covered by a version change', async (t) => {
  const root = copyContract(t);
  t.same(await checkVersionChanges(root), [], 'the committed versions and their changes agree with the contracts');
  const [v1, v2] = API_VERSIONS;
  if (v1 === undefined || v2 === undefined) throw new Error('src/versions/index.ts declares no v2');
  // v2 as committed, and listPets opened to anyone: a breaking difference no change covers.
  const opened = await plant(root, (document) =>
    document.setIn(['paths', '/pets', 'get', 'security'], document.createNode([])),
  );
  t.same(await checkRelease(root, opened), [], 'a breaking change is a major step');
  t.match(
    report(await checkVersionChanges(root, [v1])),
    'contract:check: openapi.yaml is version 2, but src/versions/index.ts declares versions 1 (src/versions/index.ts)',
    'a new major version is declared with its changes',
  );
  const v1Release = `v${(newestRelease(projectRoot, 1)?.version ?? []).join('.')}`;
  const withoutGetPetRemoved = v2.changes.filter((change) => change !== getPetRemoved);
  const uncovered = report(await checkVersionChanges(root, [v1, { major: 2, changes: withoutGetPetRemoved }]));
  t.match(
    uncovered,
    `contract:check: v1 (contracts/${v1Release}.yaml) → v2 (openapi.yaml): Operation \`GET /pets/{petId}\` was removed. [operation-removed] is covered by no version change (GET /pets/{petId}, contracts/${v1Release}.yaml:`,
    'a breaking difference no change covers fails, naming it',
  );
  t.match(uncovered, /authentication changed from apiKey to none is covered by no version change \(GET \/pets\)/);
  t.match(uncovered, /fix: declare a version change that covers it \(src\/versions\/changes\//);

  const partly = report(await checkVersionChanges(root, [v1, v2]));
  t.notMatch(partly, /GET \/pets\/\{petId\}/, 'a declared change covers its difference');
  t.match(partly, /authentication changed from apiKey to none is covered by no version change/, 'and no other');
  t.equal(partly.match(/^contract:check: /gm)?.length, 1);

  const stray = { description: 'Kennels need a note.', covers: [{ at: 'POST /kennels' }] };
  t.match(
    report(await checkVersionChanges(root, [v1, { major: 2, changes: [...v2.changes, stray] }])),
    /the version change "Kennels need a note" covers POST \/kennels, which does not differ \(src\/versions\/index\.ts\)/,
    'a change that covers no difference fails too',
  );

  const { text } = await renderChangelog(root, [v1, { major: 2, changes: [getPetRemoved] }]);
  t.match(
    text,
    `## Unreleased: v2.0.0, against ${v1Release}\n\nIn openapi.yaml, not released yet: \`contracts/v2.0.0.yaml\` is written when it ships.\n\nIts version changes (v1 is still served, answered through them: docs/versions.md):\n\n- ${getPetRemoved.description}\n`,
    "the changelog lists the new major version's changes in their own words",
  );
});

t.test('lint: the committed ruleset fails a contract that breaks it', async (t) => {
  const root = copyContract(t);
  t.same(await checkLint(root), [], 'openapi.yaml has no lint error or warning');
  await plant(root, (document) => document.setIn(['paths', '/pets', 'get', 'operationId'], 'list_pets'));
  t.match(
    report(await checkLint(root)),
    /^contract:check: lint error rule\/operation-id-camel-case: operationIds are camelCase .*\(openapi\.yaml:\d+:\d+ #\/paths\/~1pets\/get\/operationId\)/m,
  );
});

t.test("Redocly's kept reports stand only for the same inputs: an edited ruleset is applied at once", async (t) => {
  const root = copyContract(t);
  t.same(await checkLint(root), [], 'openapi.yaml lints clean');
  t.same(await checkLint(root), [], 'and again, from the report kept of the first run');
  const ruleset = join(root, 'redocly.yaml');
  writeFileSync(
    ruleset,
    readFileSync(ruleset, 'utf8').replace(
      /^rules:\n/m,
      'rules:\n  rule/every-operation-says-x-owner:\n    subject: { type: Operation, property: x-owner }\n    assertions: { defined: true }\n    severity: error\n',
    ),
  );
  t.match(report(await checkLint(root)), /lint error rule\/every-operation-says-x-owner/, 'a rule added is applied');
});

t.test('served: a server publishing another contract than the committed one', async (t) => {
  const root = copyContract(t);
  t.same(await checkServed(root, committed), []);
  await plant(root, (document) => document.setIn(['info', 'title'], 'Pet Shop'));
  t.match(
    report(await checkServed(root, committed)),
    `GET ${committed.basePath}/openapi.json is not the committed openapi.yaml (${committed.basePath}/openapi.json at /info/title)`,
  );
});

t.test('every documented response is seen by a test or listed, with a reason, as unreached', async (t) => {
  const lines = committed.operations.flatMap((operation) =>
    Object.keys(operationObject(committed, operation)?.responses ?? {})
      .filter((status) => status !== '405')
      .map((status) => ({ line: `${operation.method} ${operation.path} ${status}`, ...operation, status })),
  );
  const log = (...omit: string[]) =>
    [
      ...lines.filter(({ line }) => !omit.includes(line)).map(({ line }) => line),
      ...contractPaths.map(({ template, otherMethod }) => `${otherMethod} ${template} 405`),
    ].join('\n');
  t.same(checkResponses(committed, log(), []), [], 'a 405 on any method of a path reaches each operation of it');

  t.match(
    report(checkResponses(committed, log('DELETE /pets/{petId} 404'), [])),
    /^contract:check: no test sees response 404 of deletePet \(openapi\.yaml: DELETE \/pets\/\{petId\} responses\/404\)\n {2}fix: add a test that gets it, or list it with the reason in contracts\/unreached-responses\.json$/,
  );
  const excepted = { operationId: 'deletePet', status: '404', reason: 'because' };
  t.same(checkResponses(committed, log('DELETE /pets/{petId} 404'), [excepted]), []);
  t.match(
    report(checkResponses(committed, log(), [excepted])),
    /response 404 of deletePet is listed as unreached, but a test sees it/,
  );
  t.match(
    report(checkResponses(committed, log(), [{ ...excepted, status: '418' }])),
    /response 418 of deletePet is listed as unreached, but the contract does not document it/,
  );
  t.match(
    report(checkResponses(committed, undefined, [])),
    /no record of the responses the tests saw.*\n {2}run: npm test/,
  );

  const listedCodes = ['PATCH /pets/{petId} 409 invalid_transition', 'PUT /pets 405 method_not_allowed'];
  t.same(checkResponses(committed, [log(), ...listedCodes].join('\n'), []), [], 'codes x-error-codes lists pass');
  t.match(
    report(checkResponses(committed, `${log()}\nPATCH /pets/{petId} 409 pet_not_available`, [])),
    /^contract:check: PATCH \/pets\/\{petId\} answered 409 with code pet_not_available, which its x-error-codes do not list for 409 \(openapi\.yaml: PATCH \/pets\/\{petId\} x-error-codes\)\n {2}fix: add pet_not_available to x-error-codes '409' if the server may answer it so, or correct the server$/,
    'a code the server answered that the operation does not list fails',
  );
  t.match(
    report(checkResponses(committed, `${log()}\nPUT /pets 405 not_found\nGET /pets 400 teapot`, [])),
    /PUT \/pets answered 405 with code not_found[\s\S]*GET \/pets answered 400 with code teapot/,
    "so does one on a method the path does not declare, and one that is not ErrorCode's",
  );

  // Each line names the version that answered (test/helpers/contract.ts): a version's responses
  // are held to its own contract, and another version's do not reach it.
  const versioned = (basePath: string, text: string) =>
    text
      .split('\n')
      .map((line) => `${basePath} ${line}`)
      .join('\n');
  t.same(checkResponses(committed, versioned(committed.basePath, log()), []), [], "this version's own lines reach it");
  t.match(
    report(checkResponses(committed, versioned('/v9', log()), [])),
    /no test sees response 200 of listPets/,
    "another version's lines do not",
  );
  t.match(
    report(checkResponses(committed, `${log()}\n/v9 PATCH /pets/{petId} 409 pet_not_available`, [])),
    /^$/,
    'nor do its codes, which its own contract lists',
  );

  for (const entry of loadUnreachedResponses(projectRoot)) {
    t.ok(
      lines.some(({ operationId, status }) => operationId === entry.operationId && status === entry.status),
      `${entry.operationId} ${entry.status} is documented`,
    );
  }
});

t.test('x-error-codes: every error status of every operation names codes, each a value of ErrorCode', async (t) => {
  t.same(checkErrorCodes(committed), [], 'the committed contract names them all');
  const contract = await plant(copyContract(t), (document) => {
    const codes = (path: string, method: string) => ['paths', path, method, 'x-error-codes'];
    document.deleteIn(codes('/pets', 'get'));
    document.deleteIn([...codes('/pets/{petId}', 'patch'), '412']);
    document.setIn([...codes('/pets/{petId}', 'patch'), '409'], document.createNode(['pet_lost']));
    document.setIn([...codes('/pets/{petId}', 'delete'), '418'], document.createNode(['not_found']));
  });
  const found = report(checkErrorCodes(contract));
  t.match(found, /operation listPets does not name its error codes \(openapi\.yaml: GET \/pets x-error-codes\)/);
  t.match(found, /operation updatePet declares response 412 but names no code for it/);
  t.match(found, /operation updatePet names pet_lost for 409, which is not a value of ErrorCode/);
  t.match(found, /operation deletePet names codes for 418, an error response it does not declare/);
  t.equal(checkErrorCodes(contract).length, 4, 'and nothing else');
});

t.test('the helpers name places the way a person reads them', async (t) => {
  t.same(firstDifference('a\nb\nc\nd\ne\nf', 'a\nB\nc\nd\ne\nf'), { line: 2, lines: ['- b', '+ B'] });
  t.same(firstDifference('a\nb\nc\nd\ne', 'a\nx\ny\nb\nc\nd\ne'), { line: 2, lines: ['+ x', '+ y'] });
  t.same(describePointer('#/paths/~1pets~1{petId}/get/responses/200'), 'GET /pets/{petId} responses/200');
  t.same(describePointer('#/components/schemas/Pet'), '#/components/schemas/Pet');
});
