// The Python client as a user gets it: its wheel built from clients/python, installed into a fresh
// virtual environment with nothing but its dependencies, and the first Python block of
// docs/client-python.md run there against a real server; `mypy --strict` on the package and on
// every block of those docs.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { projectRoot } from '../src/contract/paths.js';
import { listen, startApi, temporaryDirectory } from './helpers/api.js';
import { conformingProxy } from './helpers/conforming-proxy.js';
import { contract, servedVersions } from './helpers/contract.js';
import { closedPort } from './helpers/receiver.js';
import {
  buildWheel,
  devPython,
  makeVenv,
  pythonBlocks,
  pythonClientDir,
  pythonDocs,
  runPython,
} from './helpers/python.js';

const blocks = pythonBlocks(pythonDocs());

t.test(
  'the wheel installs alone into a fresh venv and runs the docs example against a real server',
  { timeout: 300_000 },
  async (t) => {
    const dev = await devPython();
    const dir = temporaryDirectory(t);
    const wheel = await buildWheel(dev, dir);
    // Nothing but the wheel and what it depends on, from the package index.
    const python = await makeVenv(join(dir, 'venv'), [wheel]);
    const installed = await runPython(python, ['-m', 'pip', 'list', '--format=freeze'], { PYTHONPATH: '' });
    const names = installed.stdout.split('\n').map((line) => line.split('==')[0]?.toLowerCase() ?? '');
    t.ok(names.includes('petstore-client'), 'the client is installed');
    t.notOk(names.includes('mypy') || names.includes('pytest'), 'and no tool of the repository');

    const example = blocks[0] ?? '';
    t.ok(example.includes('PETSTORE_BASE_URL') && example.includes('PETSTORE_API_KEY'), 'the example reads both');
    writeFileSync(join(dir, 'example.py'), example);
    const api = await startApi(t);
    // Every answer checked against the contract on its way to the example, which is of `petstore`,
    // the newest version's client: it goes to that version's base URL.
    const proxy = await conformingProxy(t, `${(await listen(t, api)).origin}${servedVersions.contract.basePath}`);
    // PYTHONPATH empty: the installed wheel, not the repository's source.
    const ran = await runPython(python, [join(dir, 'example.py')], {
      PYTHONPATH: '',
      PETSTORE_BASE_URL: proxy.baseUrl,
      PETSTORE_API_KEY: api.key,
    });
    t.match(ran.stdout, /order \d+ completed; replayed: False/, 'the example ran to its end (exit 0)');
    t.same(proxy.failures, [], "every answer it saw is the contract's");
    const pets = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
    t.same(
      pets.json<{ name: string; status: string }[]>().map(({ name, status }) => ({ name, status })),
      [{ name: 'Rexy', status: 'sold' }],
      'renamed, ordered and sold',
    );
  },
);

/** What a type checker must refuse in a program using the client: each line marked `# refused`. */
const REFUSALS = `from petstore.v1 import PetPatch, Petstore, PetstoreError, can_move, is_petstore_error


def refusals(petstore: Petstore, error: PetstoreError[str]) -> None:
    if is_petstore_error(error, "get_order") and error.code == "not_fonud":  # refused: a misspelt code
        pass
    if is_petstore_error(error, "get_order") and error.code == "pet_on_order":  # refused: not one get_order answers
        pass
    page = petstore.list_pets(limit=10)
    petstore.update_pet(1, if_match=page.etag, body=PetPatch(name="x"))  # refused: an ETag that may be absent
    created = petstore.create_pet(body=PetPatch(name="x"))  # refused: not a new pet
    can_move("available", "completed")  # refused: an order's status beside an animal's
    etag: str = created.etag
    print(etag)
`;

// mypy's first run in a fresh cache takes most of a minute on a loaded machine: the limit is for a hang.
t.test('mypy --strict passes on the package and on every block of its docs', { timeout: 300_000 }, async (t) => {
  const dev = await devPython();
  // The same paths every run: mypy's cache replays a module's errors under the path it had then.
  const dir = join(projectRoot, 'dist', 'python', 'typecheck');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const files = blocks.map((block, index) => {
    const file = join(dir, `block_${index + 1}.py`);
    writeFileSync(file, block);
    return file;
  });
  const refusals = join(dir, 'refusals.py');
  writeFileSync(refusals, REFUSALS);
  t.ok(files.length >= 1, `${files.length} blocks`);
  const checked = await runPython(
    dev,
    [
      '-m',
      'mypy',
      '--strict',
      '--cache-dir',
      join(projectRoot, 'dist', 'python', 'mypy-cache'),
      join(pythonClientDir, 'src', 'petstore'),
      ...files,
      refusals,
    ],
    { MYPYPATH: join(pythonClientDir, 'src') },
    300_000,
  ).catch((error: unknown) => ({
    stdout: (error as { stdout?: string }).stdout ?? (error as Error).message,
    stderr: '',
  }));
  const errors = checked.stdout.split('\n').filter((line) => line.includes(': error: '));
  const refused = REFUSALS.split('\n').flatMap((line, index) => (line.includes('# refused') ? [index + 1] : []));
  t.same(
    errors.filter((line) => !/\brefusals\.py:\d+:/.test(line)),
    [],
    'no error in the package or the docs',
  );
  t.same(
    [...new Set(errors.map((line) => Number(/\brefusals\.py:(\d+):/.exec(line)?.[1])))],
    refused,
    `each refused line, and only those, is an error:\n${errors.join('\n')}`,
  );
});

t.test("a deprecated operation warns when called, with the contract's sunset and successor", async (t) => {
  const deprecated = contract.operations.filter(({ deprecation }) => deprecation !== undefined);
  t.ok(deprecated.length > 0, 'the contract deprecates an operation');
  const port = await closedPort();
  const names = deprecated.map(({ operationId }) => operationId.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
  const script = [
    'import json, warnings',
    'from petstore.v1 import Petstore, PetstoreNetworkError',
    `petstore = Petstore("http://127.0.0.1:${port}/v1", "psk_unused", attempts=1)`,
    'said = {}',
    `for name in ${JSON.stringify(names)}:`,
    '    with warnings.catch_warnings(record=True) as caught:',
    '        warnings.simplefilter("always")',
    '        try:',
    '            getattr(petstore, name)(1)',
    '        except PetstoreNetworkError:',
    '            pass',
    '    said[name] = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]',
    'print(json.dumps(said))',
  ].join('\n');
  const { stdout } = await runPython(await devPython(), ['-c', script]);
  const said = JSON.parse(stdout) as Record<string, string[]>;
  deprecated.forEach(({ deprecation }, index) => {
    const [warning = ''] = said[names[index] ?? ''] ?? [];
    t.match(warning, deprecation?.sunset.toISOString().slice(0, 10) ?? '', `${names[index]} warns with its sunset`);
    const successor = (deprecation?.successor ?? '').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    t.match(warning, successor, 'and its successor');
  });
});
