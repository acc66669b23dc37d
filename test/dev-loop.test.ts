import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import type { OpenAPIV3_1 } from 'openapi-types';
import t from 'tap';
import { parse } from 'yaml';
import { formatDrift } from '../scripts/contract-check/drift.js';
import { checkServedResponses, loadUnreachedResponses } from '../scripts/contract-check/responses.js';
import { freePort } from '../scripts/local-servers.js';
import { projectRoot } from '../src/contract/paths.js';
import { newestRelease } from '../src/versions/releases.js';
import { servedContracts } from '../src/versions/served.js';
import { contract as projectContract } from './helpers/contract.js';
import { NEW_OPERATION, NEW_OPERATION_NOT_FOUND, SHARED_RESPONSES, withNewOperation } from './helpers/new-operation.js';
import { copyProject } from './helpers/project-copy.js';

// The contract-first loop, end to end (docs/contract.md): in a copy of the project, `npm run dev`
// serves an operation the moment it is added to openapi.yaml, from its examples; `npm run build`
// refuses it until it has a handler; the handler, once written, is served; contract:check's
// responses check refuses it until a test sees its responses, then passes; an edited example is
// served; and the fast command CONTRIBUTING.md gives for after a contract change (contract:check
// included) passes as written. The copy
// shares node_modules and starts from this build's dist/ (test/helpers/project-copy.ts).

const { method, operationId } = NEW_OPERATION;

/** src/handlers/new-operation.ts, as a team would write it. */
const NEW_OPERATION_HANDLER = `import { ApiError } from '../domain/errors.js';
import type { HandlerModule } from './types.js';

/** Finds the pet and answers 204 (it changes nothing: the loop is what is tested). */
export const newOperationHandlers: HandlerModule = ({ storage: { pets } }) => ({
  async ${operationId}(request, reply) {
    if ((await pets.get(request.params.petId)) === undefined) {
      throw new ApiError(404, 'not_found', \`No pet with id \${request.params.petId} to act on\`);
    }
    reply.code(204);
    return undefined;
  },
});
`;

/** The test a team writes with the handler: every response the operation documents, seen and checked. */
const NEW_OPERATION_TEST = `import t from 'tap';
import { startApi } from './helpers/api.js';

t.test('${method} ${NEW_OPERATION.path}', async (t) => {
  const api = await startApi(t);
  const created = await api.storage.pets.create({ name: 'Rex', categoryId: 1, status: 'available' });
  const id = created.outcome === 'created' ? created.created.pet.id : 0;
  const send = (url: string, headers: Record<string, string> = api.auth) =>
    api.request({ method: '${method}', url, headers });
  t.equal((await send(\`${NEW_OPERATION.url('')}\${id}\`)).statusCode, 204);
  t.equal((await send('${NEW_OPERATION.url(999999)}')).statusCode, 404);
  t.equal((await send('${NEW_OPERATION.url('x')}')).statusCode, 400);
  t.equal((await send(\`${NEW_OPERATION.url('')}\${id}\`, {})).statusCode, 401);
});
`;

/**
 * contracts/unreached-responses.json for the copy: it runs only the test of the new operation, so
 * every response of the other operations is accepted as unreached (this project's own npm test sees
 * them), as are the responses every operation declares (every-operation.test sees them, in the fast
 * command run below), and contract:check holds the new operation's own responses to that test.
 */
function onlyNewOperationChecked(contractTexts: string[]): string {
  const paths = contractTexts.flatMap((text) =>
    Object.values((parse(text) as { paths: Record<string, Record<string, OperationObject>> }).paths),
  );
  const unique = (entries: { operationId: string | undefined; status: string; reason: string }[]) => [
    ...new Map(entries.map((entry) => [`${entry.operationId ?? ''} ${entry.status}`, entry])).values(),
  ];
  const exceptions = paths.flatMap((item) =>
    Object.values(item).flatMap(({ operationId: id, responses }) =>
      Object.keys(responses ?? {})
        .filter(
          (status) => id !== undefined && (id !== operationId || SHARED_RESPONSES.some((shared) => shared === status)),
        )
        .map((status) => ({
          operationId: id,
          status,
          reason:
            id === operationId
              ? 'every operation declares it, and test/every-operation.test.ts sees it from each'
              : "this copy runs only the test of the new operation; the project's own npm test sees the rest",
        })),
    ),
  );
  return JSON.stringify({ exceptions: unique(exceptions) }, null, 2);
}

type OperationObject = OpenAPIV3_1.OperationObject;

const execFileAsync = promisify(execFile);

/** Runs a command in the copy to completion; a failure is a result, not an exception. */
async function runIn(cwd: string, command: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
  return execFileAsync(command, args, { cwd, env, maxBuffer: 16 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: unknown) => error as { code: number; stdout: string; stderr: string },
  );
}

/** Polls `probe` until it returns a value, or fails after `seconds`. */
async function eventually<T>(what: string, seconds: number, probe: () => Promise<T | undefined>, log: () => string) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${seconds} s. npm run dev printed:\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// The loop's type checks (incremental, but the new operation's types reach most of the program), the
// build, contract:check itself and then the fast command (lint alone is a minute of CPU), on a
// shared 2-core machine.
t.setTimeout(600_000);

t.test('npm run dev serves a new operation from the contract, then its handler', async (t) => {
  const began = Date.now();
  const phase = (what: string) => t.comment(`${what}: ${((Date.now() - began) / 1000).toFixed(1)} s into the test`);
  const copy = copyProject(t);
  // As a clone is: the project committed, the changes below made on top of it.
  await runIn(copy, 'git', ['init', '--quiet']);
  await runIn(copy, 'git', ['add', '--all']);
  await runIn(copy, 'git', [
    '-c',
    'user.name=dev-loop',
    '-c',
    'user.email=dev-loop@localhost',
    'commit',
    '--quiet',
    '-m',
    'as cloned',
  ]);
  phase('copied');
  mkdirSync(join(copy, 'data'));
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;

  // `npm run dev` is `tsc …; node dist/scripts/dev.js`: the copy's dist/ is already compiled.
  const dev: ChildProcess = spawn(process.execPath, [join(copy, 'dist', 'scripts', 'dev.js')], {
    cwd: copy,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: join(copy, 'data', 'pets.db'),
      LOG_LEVEL: 'warn',
      // The default metrics port may be taken on the machine running the suite (another server).
      METRICS_PORT: 'off',
      // This machine also runs the rest of the suite: no shedding for event-loop lag it causes.
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  dev.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  dev.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const log = () => output;
  const stopDev = async () => {
    if (dev.exitCode !== null) return;
    const exited = new Promise((resolve) => dev.once('exit', resolve));
    dev.kill('SIGTERM');
    await exited;
  };
  t.teardown(stopDev);

  const key = await eventually('the development key', 60, async () => /^(psk_\S+)$/m.exec(output)?.[1], log);
  const auth = { authorization: `Bearer ${key}` };
  phase('serving');
  const newOperation = (headers: Record<string, string> = auth) =>
    fetch(`${origin}${NEW_OPERATION.url(1)}`, { method, headers });
  t.equal((await newOperation()).status, 405, `before the contract has it, ${method} is not allowed`);

  const contractFile = join(copy, 'openapi.yaml');
  const contract = readFileSync(contractFile, 'utf8');
  writeFileSync(contractFile, withNewOperation(contract));
  const added = Date.now();
  const mocked = await eventually(
    `${method} served from the contract`,
    45,
    async () => {
      const response = await newOperation();
      return response.status === 405 ? undefined : response;
    },
    log,
  );
  t.comment(`served from the contract ${Date.now() - added} ms after the edit`);
  t.equal(mocked.status, 204, 'the first success response');
  t.equal(mocked.headers.get('x-petstore-mock'), 'example', 'marked as coming from the contract');
  t.equal((await newOperation({})).status, 401, 'authentication comes first, as for any operation');
  t.equal(
    (await fetch(`${origin}${NEW_OPERATION.url('x')}`, { method, headers: auth })).status,
    400,
    'and request validation',
  );
  const notFound = await newOperation({ ...auth, prefer: 'code=404' });
  t.equal(notFound.status, 404, 'Prefer: code=404 chooses another documented response');
  t.same(await notFound.json(), NEW_OPERATION_NOT_FOUND, "its example, as v2's contract gives it");
  t.match(
    readFileSync(join(copy, 'generated', 'openapi.ts'), 'utf8'),
    new RegExp(operationId),
    'generated/ was regenerated',
  );
  t.match(
    readFileSync(join(copy, 'clients', 'typescript', 'src', 'generated', 'v2', 'contract.ts'), 'utf8'),
    new RegExp(`"${operationId}": \\{\\n    "method": "${method}"`),
    "and the client's: the operation is a method of the client, with no client code written",
  );

  await eventually(
    'the edited contract linted',
    45,
    async () => ((output.match(/openapi\.yaml lints clean/g) ?? []).length >= 2 ? true : undefined),
    log,
  );

  phase('linted');
  // redocly.yaml is watched too: a rule added there is applied at once, and so is its removal.
  const ruleset = join(copy, 'redocly.yaml');
  const rules = readFileSync(ruleset, 'utf8');
  const lints = (pattern: RegExp) => (output.match(pattern) ?? []).length;
  const problemsBefore = lints(/openapi\.yaml: \d+ lint problem/g);
  writeFileSync(
    ruleset,
    rules.replace(
      /^rules:\n/m,
      'rules:\n  rule/every-operation-says-x-owner:\n    subject: { type: Operation, property: x-owner }\n    assertions: { defined: true }\n    severity: error\n',
    ),
  );
  await eventually(
    'the new rule in redocly.yaml applied',
    45,
    async () => (lints(/openapi\.yaml: \d+ lint problem/g) > problemsBefore ? true : undefined),
    log,
  );
  t.match(output, /lint error rule\/every-operation-says-x-owner/, 'the rule added to redocly.yaml is applied');
  writeFileSync(ruleset, rules);
  await eventually(
    'the contract linted clean again once the rule was removed',
    45,
    async () => (lints(/openapi\.yaml lints clean/g) >= 3 ? true : undefined),
    log,
  );

  phase('ruleset applied and removed');
  // An edited example is served.
  writeFileSync(
    contractFile,
    readFileSync(contractFile, 'utf8').replace('detail: No pet with this id', 'detail: Nothing has this id'),
  );
  await eventually(
    'the edited example',
    45,
    async () => {
      const body = (await (await newOperation({ ...auth, prefer: 'code=404' })).json()) as { detail?: string };
      return body.detail === 'Nothing has this id' ? true : undefined;
    },
    log,
  );

  // The build refuses the operation without a handler, naming it. Once the loop has type-checked
  // the new types (its record, dist/.tsbuildinfo, is newer than them), as a team's build would
  // follow the loop: otherwise two full type checks of the copy share the cores.
  const typesAt = statSync(join(copy, 'generated', 'openapi.ts')).mtimeMs;
  await eventually(
    'the loop type-checked the new types',
    120,
    async () =>
      output.includes('the sources type-check') && statSync(join(copy, 'dist', '.tsbuildinfo')).mtimeMs >= typesAt
        ? true
        : undefined,
    log,
  );
  phase('the loop type-checked the new types');
  const build = await runIn(copy, 'npm', ['run', '-s', 'build']);
  t.not(build.code, 0, 'npm run build fails');
  t.match(build.stderr, `operation ${operationId} has no handler`, 'naming the operation');

  phase('built (refused)');
  // The handler, once written, answers instead of the contract.
  writeFileSync(join(copy, 'src', 'handlers', 'new-operation.ts'), NEW_OPERATION_HANDLER);
  const handlers = join(copy, 'src', 'handlers', 'index.ts');
  const modules = 'const MODULES: HandlerModule[] = [';
  const service = readFileSync(handlers, 'utf8');
  t.ok(service.includes(modules), 'src/handlers/index.ts lists the handler modules in MODULES');
  writeFileSync(
    handlers,
    `import { newOperationHandlers } from './new-operation.js';\n${service.replace(modules, `${modules}newOperationHandlers, `)}`,
  );
  const implemented = await eventually(
    'the handler served',
    60,
    async () => {
      const response = await newOperation();
      return response.headers.get('x-petstore-mock') === null ? response : undefined;
    },
    log,
  );
  t.equal(implemented.status, 404);
  t.match(await implemented.json(), { detail: 'No pet with id 1 to act on' });

  phase('handler served');
  // contract:check refuses the operation until a test sees its responses, naming them: its check
  // of the responses, here in this process (the command's failures are contract-check.test's).
  // Every served version's operations: v1's release has operations v2 has not (getPet).
  const v1Release = newestRelease(copy, 1);
  writeFileSync(
    join(copy, 'contracts', 'unreached-responses.json'),
    onlyNewOperationChecked([
      readFileSync(contractFile, 'utf8'),
      ...(v1Release === undefined ? [] : [readFileSync(join(copy, v1Release.file), 'utf8')]),
    ]),
  );
  const responseLog = join(copy, 'dist', 'responses.log');
  writeFileSync(responseLog, '');
  const served = await servedContracts(copy);
  const responsesCheck = (log: string) =>
    checkServedResponses([served.contract, ...served.olderContracts], log, loadUnreachedResponses(copy))
      .map(formatDrift)
      .join('\n');
  const uncovered = responsesCheck('');
  t.match(uncovered, `no test sees response 204 of ${operationId}`, 'naming the operation and the response');
  for (const { operationId: other } of projectContract.operations) {
    t.notMatch(uncovered, new RegExp(`\\b${other}\\b`), `and nothing else: not ${other}`);
  }
  // What the copy's test and check run with: its own response log, SQLite, no tap runner above it.
  const env = Object.fromEntries(
    Object.entries({ ...process.env, PETSTORE_RESPONSE_LOG: responseLog }).filter(
      ([name]) => !name.startsWith('TAP') && name !== 'PETSTORE_TEST_BACKEND',
    ),
  );

  // The team's test of the operation, compiled by the loop, run, and then its responses are seen.
  writeFileSync(join(copy, 'test', 'new-operation.test.ts'), NEW_OPERATION_TEST);
  const compiledTest = join(copy, 'dist', 'test', 'new-operation.test.js');
  await eventually(
    'the new test compiled by the loop',
    60,
    async () => (existsSync(compiledTest) ? true : undefined),
    log,
  );
  phase('test compiled');

  const tested = await runIn(copy, process.execPath, [compiledTest], env);
  t.equal(tested.code, 0, `the test of ${operationId} passes`, { output: tested.stdout + tested.stderr });
  phase('tested');
  t.equal(responsesCheck(readFileSync(responseLog, 'utf8')), '', 'once the test sees every response, none is left');
  // The addition carries the next version (withNewOperation): the changelog lists it as Unreleased.
  // (contract:check's other checks run in the fast command below.)
  const changelog = await runIn(copy, process.execPath, [join(copy, 'dist', 'scripts', 'changelog.js')], env);
  t.equal(changelog.code, 0, 'npm run changelog writes the Unreleased section', { output: changelog.stderr });
  t.match(readFileSync(join(copy, 'contracts', 'CHANGELOG.md'), 'utf8'), `## Unreleased: v`);

  phase('the responses check passed');
  await stopDev();
  t.notMatch(output, /does not conform to the contract/, 'every response the loop served conformed');

  // The command CONTRIBUTING.md and docs/contract.md give for after a contract change, run as
  // written with the new operation's own test added as they say, in the copy as a clone would have
  // it, the changes added to git's index: the build, those files on both backends, lint and
  // format:check of the changed files, and contract:check, all passing.
  await runIn(copy, 'git', ['add', '--all']);
  const commands = new Map<string, string[]>();
  for (const doc of ['CONTRIBUTING.md', 'docs/contract.md']) {
    const text = readFileSync(join(projectRoot, doc), 'utf8');
    const found = [...text.matchAll(/^npm test -- (test\/\S+(?: test\/\S+)*)$/gm)].map((match) => match[1] ?? '');
    t.ok(found.length > 0, `${doc} gives the fast command after a contract change`);
    for (const files of found) commands.set(files, [...(commands.get(files) ?? []), doc]);
  }
  for (const [files, docs] of commands) {
    const named = [...files.split(' '), 'test/new-operation.test.ts'];
    const fast = await runIn(copy, 'npm', ['test', '--', ...named], env);
    const said = `${docs.join(', ')}: npm test -- ${files}`;
    t.equal(fast.code, 0, `${said}: passes after the contract change`, { output: fast.stdout + fast.stderr });
    for (const file of named)
      t.match(
        fast.stdout,
        new RegExp(`^\\[npm test\\] ok .* ${basename(file, '.ts')}\\.js on SQLite`, 'm'),
        `${said}: it runs ${file}`,
      );
    for (const stage of ['lint', 'format:check', 'contract:check'])
      t.match(fast.stdout, new RegExp(`^\\[npm test\\] {3}ok +${stage} `, 'm'), `${said}: with ${stage}, which passes`);
    t.match(fast.stdout, /ok .* lint \(\d+ files changed since the last commit\)/, `${said}: lint reads the changes`);
  }
  phase('the fast command passed');
});
