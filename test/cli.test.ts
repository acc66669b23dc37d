import t from 'tap';
import { conformingFetch } from './helpers/api.js';
import { newDatabase, probeDatabase } from './helpers/backend.js';
import { runCli, runCliProcess, startServerProcess } from './helpers/process.js';

t.test('accounts and keys are managed with the petstore command, against a running server', async (t) => {
  const env = { DATABASE_URL: await newDatabase(t) };
  const account = await runCliProcess(['accounts', 'create', 'acme'], env);
  t.equal(account.code, 0, account.stderr);
  t.match(account.stdout, /created account acme/);
  t.equal((await runCliProcess(['accounts', 'create', 'acme'], env)).code, 1, 'names are unique');

  const created = await runCliProcess(['keys', 'create', 'acme'], env);
  t.equal(created.code, 0, created.stderr);
  const key = created.stdout.trimEnd().split('\n').at(-1) ?? '';
  t.match(key, /^psk_[A-Za-z0-9_-]{43}$/, 'the key alone on the last line');

  const server = await startServerProcess(t, env);
  t.equal(server.key, undefined, 'keys exist, so no development key is made');
  const call = () =>
    conformingFetch(new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } }));
  t.equal((await call()).status, 200, 'the new key works');

  const listed = await runCliProcess(['keys', 'list', 'acme'], env);
  t.equal(listed.code, 0);
  t.notMatch(listed.stdout, key, 'a listing never shows the key');
  const id = /^(\d+)\t(psk_[\w-]+)\.\.\.\t/m.exec(listed.stdout);
  t.ok(id, listed.stdout);
  t.ok(key.startsWith(id?.[2] ?? '?'), 'it shows the prefix');

  const revoked = await runCliProcess(['keys', 'revoke', id?.[1] ?? ''], env);
  t.equal(revoked.code, 0, revoked.stderr);
  t.equal((await call()).status, 401, 'revocation takes effect on the next request');
  t.match(
    (await runCliProcess(['keys', 'list', 'acme'], env)).stdout,
    /\t20\d\d-\d\d-\d\dT[\d:.]+Z\n?$/,
    'the listing shows when',
  );
  await server.stop();
});

t.test('the petstore command explains mistakes', async (t) => {
  const env = { DATABASE_URL: await newDatabase(t) };
  const usage = await runCliProcess([], env);
  t.equal(usage.code, 2, 'the exit code of the process');
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

t.test('every command refuses arguments beyond those it takes, and does nothing', async (t) => {
  const databaseUrl = await newDatabase(t);
  const env = { DATABASE_URL: databaseUrl };
  t.equal((await runCli(['accounts', 'create', 'acme'], env)).code, 0);
  t.equal((await runCli(['keys', 'create', 'acme'], env)).code, 0);

  const unquoted = await runCli(['accounts', 'create', 'Acme', 'Corp'], env);
  t.equal(unquoted.code, 2, 'a name with spaces left unquoted is a usage error');
  t.match(
    unquoted.stderr,
    'petstore: "accounts create" takes one argument, <name>, but was given 2: "Acme" "Corp" (quote one that has spaces)',
  );
  t.match(unquoted.stderr, /Usage: petstore <command>/);
  t.equal((await runCli(['keys', 'list', 'Acme'], env)).code, 1, 'no account "Acme" was made of it');

  const revoke = await runCli(['keys', 'revoke', '1', '2'], env);
  t.equal(revoke.code, 2, 'two key ids are not taken for one');
  t.match(revoke.stderr, '"keys revoke" takes one argument, <key-id>, but was given 2: "1" "2"');
  t.match(
    (await runCli(['keys', 'list', 'acme'], env)).stdout,
    /^1\tpsk_[\w-]+\.\.\.\tall\t\S+\t-\t-$/m,
    'key 1 is not revoked',
  );

  const cases: [string[], string][] = [
    [['keys', 'create', 'acme', 'now'], '"keys create" takes one argument, <account>, but was given 2: "acme" "now"'],
    [['keys', 'list', 'acme', '--all'], '"keys list" takes no options; got "--all"'],
    [
      ['keys', 'create', 'acme', '--scope', 'pets:read'],
      '"keys create" takes --scopes, --expires-in, --expires-at; got "--scope"',
    ],
    [['keys', 'create', 'acme', '--scopes', 'pets:read,pets:fly'], '"pets:fly" is not one'],
    [['keys', 'create', 'acme', '--scopes'], '--scopes needs a value'],
    [['keys', 'create', 'acme', '--scopes=pets:read', '--scopes=orders:read'], '--scopes is given twice'],
    [['keys', 'create', 'acme', '--expires-in', '90'], '--expires-in must be a duration such as 30s, 15m, 24h or 90d'],
    [
      ['keys', 'create', 'acme', '--expires-at', '2030-01-01T00:00:00'],
      '--expires-at must be an ISO 8601 time with its zone',
    ],
    [['keys', 'create', 'acme', '--expires-at', '2000-01-01T00:00:00Z'], 'is not in the future'],
    [['keys', 'create', 'acme', '--expires-in=1d', '--expires-at=2099-01-01T00:00:00Z'], 'not both'],
    [['keys', 'rotate', '1', '--grace', 'forever'], '--grace must be a duration'],
    [['migrate', 'now'], '"migrate" takes no arguments, but was given 1: "now"'],
    // Not an account named --help: no command takes options.
    [['accounts', 'create', '--help'], '"accounts create" takes no options; got "--help"'],
    [['keys', 'revoke', '-1'], '"keys revoke" takes no options; got "-1"'],
  ];
  const results = await Promise.all(cases.map(([args]) => runCli(args, env)));
  cases.forEach(([args, message], at) => {
    t.equal(results[at]?.code, 2, args.join(' '));
    t.match(results[at]?.stderr, message, args.join(' '));
  });
  const db = await probeDatabase(t, databaseUrl);
  t.match(await db.snapshot(), { accounts: 1, 'accounts ids': 1, api_keys: 1 }, 'nothing was created');
});

t.test('account names follow the rules of pet names, with no white space at either end', async (t) => {
  const databaseUrl = await newDatabase(t);
  const env = { DATABASE_URL: databaseUrl };
  const rule = '<name> must be 1 to 100 characters, with no control characters and no white space at either end';
  for (const name of ['bad\u0001name', 'new\nline', '', '   ', ' acme', 'x'.repeat(101)]) {
    const refused = await runCli(['accounts', 'create', name], env);
    t.equal(refused.code, 2, JSON.stringify(name));
    t.match(refused.stderr, `petstore: ${rule}; got ${JSON.stringify(name)}`, 'the name is shown escaped');
  }
  const hundred = 'é'.repeat(100);
  for (const name of ['Acme Corp', hundred]) {
    const created = await runCli(['accounts', 'create', name], env);
    t.equal(created.code, 0, created.stderr);
  }
  t.equal((await runCli(['keys', 'create', 'Acme Corp'], env)).code, 0, 'an account is found by its name');
  const db = await probeDatabase(t, databaseUrl);
  const names = await db.query<{ name: string }>('SELECT name FROM accounts ORDER BY id');
  t.same(
    names.map(({ name }) => name),
    ['Acme Corp', hundred],
    'stored as given (100 characters, not bytes), and nothing refused was stored',
  );
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
