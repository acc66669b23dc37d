// The TypeScript client as a user gets it: `npm pack` of clients/typescript installed into an empty
// project with its own dependencies alone (offline, from the npm cache the repository's install
// filled), type-checked there at the strictest settings, and the first TypeScript block of
// docs/client.md, compiled there, run against a real server.
import { execFile, spawn } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { projectRoot } from '../src/contract/paths.js';
import { listen, startApi, temporaryDirectory } from './helpers/api.js';
import { servedVersions } from './helpers/contract.js';
import { closedPort } from './helpers/receiver.js';

const run = promisify(execFile);
const clientDir = join(projectRoot, 'clients', 'typescript');
const tsc = join(projectRoot, 'node_modules', 'typescript', 'bin', 'tsc');

interface LockEntry {
  version: string;
  integrity: string;
  dependencies?: Record<string, string>;
}
const rootLock = (
  JSON.parse(readFileSync(join(projectRoot, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockEntry>;
  }
).packages;

/** Where Node finds `name` from the package installed at `from` in the repository's node_modules. */
function installedAt(from: string, name: string): string {
  for (let dir = from; ; dir = dir.slice(0, Math.max(0, dir.lastIndexOf('/node_modules/')))) {
    const path = `${dir === '' ? '' : `${dir}/`}node_modules/${name}`;
    if (path in rootLock) return path;
    if (dir === '') throw new Error(`${name} (needed by ${from || 'the client'}) is not installed`);
  }
}

/**
 * A lockfile for a project depending on the packed client and `@types/node`: the versions the
 * repository installed, so that `npm ci --offline` finds each in the npm cache by its integrity.
 */
function lockfile(tarball: string, client: { version: string; dependencies: Record<string, string> }) {
  const dependencies = {
    '@petstore/client': `file:${tarball}`,
    '@types/node': rootLock['node_modules/@types/node']?.version ?? '',
  };
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tarball)).digest('base64')}`;
  const packages: Record<string, object> = {
    '': { name: 'consumer', dependencies },
    'node_modules/@petstore/client': { ...client, resolved: `file:${tarball}`, integrity },
  };
  const pending = [...Object.keys(client.dependencies), '@types/node'].map((name) => installedAt('', name));
  for (let path = pending.pop(); path !== undefined; path = pending.pop()) {
    const entry = rootLock[path];
    if (path in packages || entry === undefined) continue;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const file = `${name.split('/').pop() ?? name}-${entry.version}.tgz`;
    const { version, integrity, dependencies = {} } = entry;
    packages[path] = { version, resolved: `https://registry.npmjs.org/${name}/-/${file}`, integrity, dependencies };
    pending.push(...Object.keys(dependencies).map((dependency) => installedAt(path, dependency)));
  }
  return { dependencies, lock: { name: 'consumer', lockfileVersion: 3, requires: true, packages } };
}

/** The ```ts blocks of docs/client.md: the first is the whole program; one is a webhook receiver. */
const docs = readFileSync(join(projectRoot, 'docs', 'client.md'), 'utf8');
const blocks = [...docs.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, block]) => block ?? '');
const example = blocks[0] ?? '';
const receiverBlock = blocks.find((block) => block.includes('unwrap(')) ?? '';
/** What the other blocks take as given: a client, and an animal's id. */
const PREAMBLE = `declare const petstore: import('@petstore/client').PetstoreClient;\ndeclare const petId: number;\n`;

/** What the types promise a user, and what they refuse: each `@ts-expect-error` must meet an error. */
const TYPING = `
import { canMove, createClient, isPetstoreError, unwrap, type ReportedCode, type ErrorCodes } from '@petstore/client/v1';

// The codes of each status, from the contract's x-error-codes.
export const conflict: ErrorCodes['placeOrder'][409] = 'pet_not_available';
// @ts-expect-error -- a misspelt code is not one of the status's codes
export const misspelt: ErrorCodes['placeOrder'][409] = 'pet_not_availabel';

const petstore = createClient({ baseUrl: 'http://127.0.0.1:1/v1', apiKey: 'psk_x' });
export async function typed(error: unknown, body: string, headers: Record<string, string>): Promise<void> {
  const page = await petstore.page('listPets', { query: { id: [1, 2], status: 'sold' } });
  const first: number | undefined = page.items[0]?.id;
  const next: string | undefined = page.next;
  // @ts-expect-error -- ids are numbers, sent as the contract's style says
  await petstore.listPets({ query: { id: '1,2' } });
  // @ts-expect-error -- a merge patch of a pet has no such field
  await petstore.updatePet({ path: { petId: 1 }, body: { nickname: 'x' } });
  // @ts-expect-error -- a pet's path parameter is required
  await petstore.getPet({});
  const created = await petstore.createPet({ body: { name: 'Rex', categoryId: 1 } });
  const etag: string = created.etag;
  if (isPetstoreError(error, 'placeOrder')) {
    const code: ReportedCode<'placeOrder'> = error.code;
    const status: number = error.status;
    void [code, status];
  }
  const event = unwrap(body, headers, ['whsec_x']);
  if (event.type === 'webhook.test') {
    const webhookId: number = event.data.webhookId;
    // @ts-expect-error -- a test event carries no animal
    void event.data.name;
    void webhookId;
  }
  // @ts-expect-error -- an order's status is not an animal's
  canMove('available', 'completed');
  void [first, next, etag, canMove('placed', 'completed')];
}
`;

t.test('the packed client installs alone, type-checks strict, and runs the docs example', async (t) => {
  t.ok(example.includes('PETSTORE_BASE_URL') && example.includes('PETSTORE_API_KEY'), 'the example reads both');
  const glue = example.split('\n').filter((line) => line.trim() !== '' && !line.trim().startsWith('//'));
  t.ok(glue.length <= 20, `the example is ${glue.length} lines of code (at most 20)`);
  t.match(docs, `${glue.length} lines of code`, 'and the docs say so');

  const project = temporaryDirectory(t);
  const packed = await run('npm', ['pack', '--json', '--pack-destination', project], { cwd: clientDir });
  const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
  const client = JSON.parse(readFileSync(join(clientDir, 'package.json'), 'utf8')) as {
    version: string;
    dependencies: Record<string, string>;
  };
  const { dependencies, lock } = lockfile(join(project, filename), client);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', dependencies }));
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify(lock));
  await run('npm', ['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: project });

  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2023',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        types: ['node'],
        outDir: 'out',
      },
      include: ['*.ts'],
    }),
  );
  writeFileSync(join(project, 'example.ts'), example);
  blocks.slice(1).forEach((block, index) => {
    const name = block === receiverBlock ? 'receiver.ts' : `block-${index + 1}.ts`;
    writeFileSync(join(project, name), block === receiverBlock ? block : `${PREAMBLE}${block}\nexport {};\n`);
  });
  writeFileSync(join(project, 'typing.ts'), TYPING);
  const compiled = await run(process.execPath, [tsc, '-p', project]).catch((error: unknown) => error);
  t.notOk(
    compiled instanceof Error,
    `type-checks in the empty project: ${String((compiled as { stdout?: string }).stdout)}`,
  );

  const api = await startApi(t);
  // The docs' example is of `@petstore/client`, the newest version's client: it is given that version's base URL.
  const { origin } = await listen(t, api);
  const ran = await run(process.execPath, [join(project, 'out', 'example.js')], {
    env: {
      ...process.env,
      PETSTORE_BASE_URL: `${origin}${servedVersions.contract.basePath}`,
      PETSTORE_API_KEY: api.key,
    },
  });
  t.match(ran.stdout, /order \d+ completed; replayed: false/, 'the example ran to its end (exit 0)');
  const pets = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.same(
    pets.json<{ name: string; status: string }[]>().map(({ name, status }) => ({ name, status })),
    [{ name: 'Rexy', status: 'sold' }],
    'renamed, ordered and sold',
  );

  // The docs' receiver, sent a signed event whose one multi-byte character arrives split across two chunks.
  const port = await closedPort();
  const secret = `whsec_${Buffer.alloc(24, 3).toString('base64')}`;
  const receiver = spawn(process.execPath, [join(project, 'out', 'receiver.js')], {
    env: { ...process.env, PORT: String(port), WEBHOOK_SECRET: secret },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => void receiver.kill());
  receiver.stdout.resume();
  // An event as a v2 endpoint gets it (the receiver is of `@petstore/client`, v2's): the animal with its timestamps.
  const at = new Date().toISOString();
  const body = Buffer.from(
    JSON.stringify({
      type: 'pet.created',
      timestamp: at,
      data: { id: 7, name: 'Zo\u00eb', categoryId: 1, status: 'available', createdAt: at, updatedAt: at },
    }),
  );
  t.equal(await deliveredInTwoChunks(port, secret, body), 204, 'the docs receiver verified it');
});

/**
 * Posts `body`, signed with `secret` as Standard Webhooks says, to 127.0.0.1:`port` in two writes,
 * split inside its first multi-byte character, once the port answers; resolves to the status.
 */
async function deliveredInTwoChunks(port: number, secret: string, body: Buffer): Promise<number> {
  const id = 'evt_split';
  const timestamp = String(Math.floor(Date.now() / 1000));
  const mac = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
    .update(`${id}.${timestamp}.`)
    .update(body)
    .digest('base64');
  const cut = body.findIndex((byte) => byte >= 0x80) + 1;
  for (;;) {
    try {
      return await new Promise<number>((resolve, reject) => {
        const request = httpRequest(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'content-length': body.length,
              'webhook-id': id,
              'webhook-timestamp': timestamp,
              'webhook-signature': `v1,${mac}`,
            },
          },
          (response) => {
            response.resume();
            resolve(response.statusCode ?? 0);
          },
        );
        request.on('error', reject);
        request.flushHeaders();
        request.write(body.subarray(0, cut), () => setTimeout(() => request.end(body.subarray(cut)), 50));
      });
    } catch (error) {
      if ((error as { code?: string }).code !== 'ECONNREFUSED') throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
