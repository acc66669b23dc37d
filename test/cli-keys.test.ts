import t from 'tap';
import { conformingFetch } from './helpers/api.js';
import { newDatabase } from './helpers/backend.js';
import { runCli, startServerProcess } from './helpers/process.js';

t.test('keys with scopes and an expiry; rotation keeps the old key for its grace period', async (t) => {
  const env = { DATABASE_URL: await newDatabase(t) };
  t.equal((await runCli(['accounts', 'create', 'shop'], env)).code, 0);
  const lastLine = (output: string) => output.trimEnd().split('\n').at(-1) ?? '';
  const reader = await runCli(
    ['keys', 'create', 'shop', '--scopes', 'pets:read,orders:read', '--expires-in', '3d'],
    env,
  );
  t.equal(reader.code, 0, reader.stderr);
  t.match(reader.stdout, /scopes pets:read,orders:read, expires 20\d\d-/);
  const server = await startServerProcess(t, env);
  const call = (key: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
    conformingFetch(
      new Request(`${server.baseUrl}/pets`, { ...init, headers: { authorization: `Bearer ${key}`, ...init.headers } }),
    );
  const readerKey = lastLine(reader.stdout);
  const read = await call(readerKey);
  t.equal(read.status, 200, 'the key reads');
  t.ok(read.headers.get('api-key-expires'), 'and is told it expires within a week');
  const create = {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"name":"Rex","categoryId":1}',
  };
  t.equal((await call(readerKey, create)).status, 403, 'but cannot write');

  const rotated = await runCli(['keys', 'rotate', '1', '--grace', '2s'], env);
  t.equal(rotated.code, 0, rotated.stderr);
  t.match(rotated.stdout, /to replace key 1, which works until/);
  const newKey = lastLine(rotated.stdout);
  t.not(newKey, readerKey);
  t.equal((await call(newKey)).status, 200, 'the new key works at once');
  t.equal((await call(newKey, create)).status, 403, 'with the same scopes');
  t.equal((await call(readerKey)).status, 200, 'and the old one through its grace period');
  await new Promise((resolve) => setTimeout(resolve, 2100));
  const after = await call(readerKey);
  t.equal(after.status, 401, 'then it is refused');
  t.match(((await after.json()) as { message: string }).message, /^API key expired at /);
  const listed = await runCli(['keys', 'list', 'shop'], env);
  t.match(
    listed.stdout,
    /^2\tpsk_[\w-]+\.\.\.\tpets:read,orders:read\t\S+\t-\t-$/m,
    'keys list shows scopes and expiry',
  );
  await server.stop();
});
