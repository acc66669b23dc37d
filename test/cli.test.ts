import t from 'tap';
import { conformingFetch } from './helpers/api.js';
import { newDatabase } from './helpers/backend.js';
import { runCli, startServerProcess } from './helpers/process.js';

t.test('accounts and keys are managed with the petstore command, against a running server', async (t) => {
  const env = { DATABASE_URL: await newDatabase(t) };
  const account = await runCli(['accounts', 'create', 'acme'], env);
  t.equal(account.code, 0, account.stderr);
  t.match(account.stdout, /created account acme/);
  t.equal((await runCli(['accounts', 'create', 'acme'], env)).code, 1, 'names are unique');

  const created = await runCli(['keys', 'create', 'acme'], env);
  t.equal(created.code, 0, created.stderr);
  const key = created.stdout.trimEnd().split('\n').at(-1) ?? '';
  t.match(key, /^psk_[A-Za-z0-9_-]{43}$/, 'the key alone on the last line');

  const server = await startServerProcess(t, env);
  t.equal(server.key, undefined, 'keys exist, so no development key is made');
  const call = () =>
    conformingFetch(new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } }));
  t.equal((await call()).status, 200, 'the new key works');

  const listed = await runCli(['keys', 'list', 'acme'], env);
  t.equal(listed.code, 0);
  t.notMatch(listed.stdout, key, 'a listing never shows the key');
  const id = /^(\d+)\t(psk_[\w-]+)\.\.\.\t/m.exec(listed.stdout);
  t.ok(id, listed.stdout);
  t.ok(key.startsWith(id?.[2] ?? '?'), 'it shows the prefix');

  const revoked = await runCli(['keys', 'revoke', id?.[1] ?? ''], env);
  t.equal(revoked.code, 0, revoked.stderr);
  t.equal((await call()).status, 401, 'revocation takes effect on the next request');
  t.match(
    (await runCli(['keys', 'list', 'acme'], env)).stdout,
    /\t20\d\d-\d\d-\d\dT[\d:.]+Z\n?$/,
    'the listing shows when',
  );
  await server.stop();
});

t.test('the petstore command explains mistakes', async (t) => {
  const env = { DATABASE_URL: await newDatabase(t) };
  const usage = await runCli([], env);
  t.equal(usage.code, 2);
  t.match(usage.stdout, /keys revoke <key-id>/);
  const unknown = await runCli(['keys', 'create', 'nobody'], env);
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /no account named "nobody"/);
  const badId = await runCli(['keys', 'revoke', 'abc'], env);
  t.equal(badId.code, 2);
  const missing = await runCli(['keys', 'revoke', '999'], env);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /no key with id 999/);
  t.equal((await runCli(['frobnicate'], env)).code, 2);
  const bareNoun = await runCli(['keys'], env);
  t.equal(bareNoun.code, 2);
  t.match(bareNoun.stderr, /"keys": see the keys commands below/);
});

t.test('petstore migrate says what it applied', async (t) => {
  const env = { DATABASE_URL: await newDatabase(t) };
  const first = await runCli(['migrate'], env);
  t.equal(first.code, 0, first.stderr);
  t.match(first.stdout, /^applied \d+ migrations?: the database schema is up to date$/m);
  const again = await runCli(['migrate'], env);
  t.equal(again.code, 0, again.stderr);
  t.match(again.stdout, /^nothing to apply: the database schema was up to date$/m);
});
