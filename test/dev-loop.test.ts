import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { freePort } from '../scripts/local-servers.js';
import { projectRoot } from '../src/paths.js';
import { temporaryDirectory } from './helpers/api.js';
import { withDeletePet } from './helpers/new-operation.js';

// The contract-first loop, end to end (docs/contract.md): in a copy of the project, `npm run dev`
// serves an operation the moment it is added to openapi.yaml, from its examples; `npm run build`
// refuses it until it has a handler; the handler, once written, is served; an edited example is
// served. The copy shares node_modules and starts from this build's dist/.

/** What the project is made of: everything but node_modules, data and test output. */
const PROJECT_ENTRIES = [
  'dist',
  'generated',
  'contracts',
  'scripts',
  'src',
  'test',
  'openapi.yaml',
  'redocly.yaml',
  'package.json',
  'tsconfig.json',
];

const DELETE_PET_HANDLER = `
import { ApiError } from '../errors.js';

export function deletePetHandler(): Required<ServiceHandlers>['deletePet'] {
  return async () => {
    throw new ApiError(404, 'not_found', 'deletePet is implemented, and finds nothing');
  };
}
`;

const execFileAsync = promisify(execFile);

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

// Three type checks (dev's, the build's, and the handler's recompile) on a shared 2-core machine.
t.setTimeout(240_000);

t.test('npm run dev serves a new operation from the contract, then its handler', async (t) => {
  const copy = temporaryDirectory(t);
  for (const entry of PROJECT_ENTRIES) cpSync(join(projectRoot, entry), join(copy, entry), { recursive: true });
  symlinkSync(join(projectRoot, 'node_modules'), join(copy, 'node_modules'), 'dir');
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
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  dev.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  dev.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const log = () => output;
  t.teardown(async () => {
    if (dev.exitCode !== null) return;
    const exited = new Promise((resolve) => dev.once('exit', resolve));
    dev.kill('SIGTERM');
    await exited;
  });

  const key = await eventually('the development key', 30, async () => /^(psk_\S+)$/m.exec(output)?.[1], log);
  const auth = { authorization: `Bearer ${key}` };
  const deletePet = (headers: Record<string, string> = auth) =>
    fetch(`${origin}/v1/pets/1`, { method: 'DELETE', headers });
  t.equal((await deletePet()).status, 405, 'before the contract has it, DELETE is not allowed');

  const contractFile = join(copy, 'openapi.yaml');
  const contract = readFileSync(contractFile, 'utf8');
  writeFileSync(contractFile, withDeletePet(contract));
  const added = Date.now();
  const mocked = await eventually(
    'DELETE served from the contract',
    45,
    async () => {
      const response = await deletePet();
      return response.status === 405 ? undefined : response;
    },
    log,
  );
  t.comment(`served from the contract ${Date.now() - added} ms after the edit`);
  t.equal(mocked.status, 204, 'the first success response');
  t.equal(mocked.headers.get('x-petstore-mock'), 'example', 'marked as coming from the contract');
  t.equal((await deletePet({})).status, 401, 'authentication comes first, as for any operation');
  t.equal(
    (await fetch(`${origin}/v1/pets/x`, { method: 'DELETE', headers: auth })).status,
    400,
    'and request validation',
  );
  const notFound = await deletePet({ ...auth, prefer: 'code=404' });
  t.equal(notFound.status, 404, 'Prefer: code=404 chooses another documented response');
  t.same(await notFound.json(), { code: 'not_found', message: 'No pet with this id', status: 404 });
  t.match(readFileSync(join(copy, 'generated', 'openapi.ts'), 'utf8'), /deletePet/, 'generated/ was regenerated');

  await eventually(
    'the edited contract linted',
    45,
    async () => ((output.match(/openapi\.yaml lints clean/g) ?? []).length >= 2 ? true : undefined),
    log,
  );

  // An edited example is served.
  writeFileSync(
    contractFile,
    readFileSync(contractFile, 'utf8').replace('message: No pet with this id', 'message: Nothing has this id'),
  );
  await eventually(
    'the edited example',
    45,
    async () => {
      const body = (await (await deletePet({ ...auth, prefer: 'code=404' })).json()) as { message?: string };
      return body.message === 'Nothing has this id' ? true : undefined;
    },
    log,
  );

  // The build refuses the operation without a handler, naming it.
  const build = await execFileAsync('npm', ['run', '-s', 'build'], { cwd: copy }).then(
    () => ({ code: 0, stderr: '' }),
    (error: unknown) => error as { code: number; stderr: string },
  );
  t.not(build.code, 0, 'npm run build fails');
  t.match(build.stderr, /operation deletePet has no handler/, 'naming the operation');

  // The handler, once written, answers instead of the contract.
  const handlers = join(copy, 'src', 'handlers', 'index.ts');
  writeFileSync(
    handlers,
    readFileSync(handlers, 'utf8').replace(
      '{ ...petHandlers(storage.pets, basePath) }',
      '{ ...petHandlers(storage.pets, basePath), deletePet: deletePetHandler() }',
    ) + DELETE_PET_HANDLER,
  );
  const implemented = await eventually(
    'the handler served',
    60,
    async () => {
      const response = await deletePet();
      return response.headers.get('x-petstore-mock') === null ? response : undefined;
    },
    log,
  );
  t.equal(implemented.status, 404);
  t.match(await implemented.json(), { message: 'deletePet is implemented, and finds nothing' });

  t.notMatch(output, /does not conform to the contract/, 'every response the loop served conformed');
});
