import t from 'tap';
import { issueKey } from '../src/auth/api-keys.js';
import { scopesOf } from '../src/contract/document.js';
import type { ErrorBody } from '../src/domain/errors.js';
import { startApi, type TestApi } from './helpers/api.js';
import { contract, servedVersions } from './helpers/contract.js';

type Operation = (typeof contract.operations)[number];
const allScopes = [...scopesOf(contract.dereferenced).keys()];

async function keyWith(api: TestApi, scopes: readonly string[], expiresAt?: Date): Promise<string> {
  const account = await api.storage.accounts.findAccount('tests');
  return (await issueKey(api.storage.accounts, account?.id ?? 0, { scopes, expiresAt })).key;
}

/** A request to an operation, with a body it would refuse: a 403 must come before the body is read. */
function call(api: TestApi, key: string, { method, path, requestMediaType }: Operation, basePath = contract.basePath) {
  return api.request({
    method,
    url: `${basePath}${path.replace(/\{[^}]+\}/g, '1')}`,
    headers: {
      authorization: `Bearer ${key}`,
      ...(requestMediaType === undefined ? {} : { 'content-type': requestMediaType }),
    },
    ...(requestMediaType === undefined ? {} : { payload: '{"not":"valid"' }),
  });
}

t.test('every operation needs the scope the contract names, and nothing else', async (t) => {
  const api = await startApi(t);
  for (const operation of contract.operations) {
    t.ok(operation.scopes.length > 0, `${operation.operationId} names a scope`);
    const without = await keyWith(
      api,
      allScopes.filter((scope) => !operation.scopes.includes(scope)),
    );
    const refused = await call(api, without, operation);
    t.equal(refused.statusCode, 403, `${operation.operationId} without ${operation.scopes.join(', ')}`);
    t.same(refused.json(), {
      code: 'insufficient_scope',
      message: `This API key lacks the scope ${operation.scopes[0] ?? ''}`,
      status: 403,
    });
    const allowed = await call(api, await keyWith(api, operation.scopes), operation);
    t.not(
      allowed.statusCode,
      403,
      `${operation.operationId} with only ${operation.scopes.join(', ')}: ${allowed.statusCode}`,
    );
    t.not(allowed.statusCode, 401);
  }
});

t.test('every operation of every newer version needs the scope its contract names', async (t) => {
  const api = await startApi(t);
  const newer = [servedVersions.contract, ...servedVersions.olderContracts].filter((served) => served !== contract);
  for (const version of newer) {
    for (const operation of version.operations) {
      const without = await keyWith(
        api,
        allScopes.filter((scope) => !operation.scopes.includes(scope)),
      );
      const refused = await call(api, without, operation, version.basePath);
      t.equal(
        refused.statusCode,
        403,
        `${version.basePath} ${operation.operationId} without ${operation.scopes.join(', ')}`,
      );
      t.match(refused.json(), { code: 'insufficient_scope', status: 403 });
      const allowed = await call(api, await keyWith(api, operation.scopes), operation, version.basePath);
      t.not(
        allowed.statusCode,
        403,
        `${version.basePath} ${operation.operationId} with only ${operation.scopes.join(', ')}`,
      );
    }
  }
});

t.test('a key created without scopes holds them all; a read-only key reads and cannot write', async (t) => {
  const api = await startApi(t);
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  const reader = { authorization: `Bearer ${await keyWith(api, ['pets:read'])}` };
  t.equal((await api.request({ method: 'GET', url: `/v1/pets?id=${pet.id}`, headers: reader })).statusCode, 200);
  const write = await api.request({ method: 'DELETE', url: `/v1/pets/${pet.id}`, headers: reader });
  t.equal(write.statusCode, 403);
  t.equal(
    (await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).json<unknown[]>().length,
    1,
    'nothing was removed',
  );
});

t.test('expiry: a warning header in the last week, then a 401 that says the key expired', async (t) => {
  let clock = Date.parse('2026-11-25T12:00:00Z');
  const day = 24 * 60 * 60 * 1000;
  const api = await startApi(t, { now: () => clock });
  const expiresAt = new Date(clock + 10 * day);
  const headers = { authorization: `Bearer ${await keyWith(api, allScopes, expiresAt)}` };
  const list = () => api.request({ method: 'GET', url: '/v1/pets', headers });
  const early = await list();
  t.equal(early.statusCode, 200);
  t.equal(early.headers['api-key-expires'], undefined, 'no warning more than a week ahead');
  clock += 4 * day;
  const warned = await list();
  t.equal(warned.statusCode, 200);
  t.equal(warned.headers['api-key-expires'], expiresAt.toUTCString(), 'the last week: when it expires');
  clock += 6 * day;
  const expired = await list();
  t.equal(expired.statusCode, 401);
  t.same(expired.json<ErrorBody>().message, `API key expired at ${expiresAt.toISOString()}; create or rotate one`);
  t.match(expired.headers['www-authenticate'], /error="invalid_token"/);
});

t.test('rotation: the old key works through its grace period, then 401; the new one has its scopes', async (t) => {
  let clock = Date.parse('2026-11-25T12:00:00Z');
  const api = await startApi(t, { now: () => clock });
  const oldKey = await keyWith(api, ['pets:read']);
  const account = await api.storage.accounts.findAccount('tests');
  const [oldInfo] = (await api.storage.accounts.listKeys(account?.id ?? 0)).slice(-1);
  await api.storage.accounts.expireKey(oldInfo?.id ?? 0, new Date(clock + 60 * 60 * 1000));
  const asOld = { authorization: `Bearer ${oldKey}` };
  clock += 59 * 60 * 1000;
  t.equal(
    (await api.request({ method: 'GET', url: '/v1/pets', headers: asOld })).statusCode,
    200,
    'within the grace period',
  );
  clock += 2 * 60 * 1000;
  t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: asOld })).statusCode, 401, 'after it');
  await api.storage.accounts.expireKey(oldInfo?.id ?? 0, new Date(clock + 24 * 60 * 60 * 1000));
  t.equal(
    (await api.storage.accounts.findKey(oldInfo?.id ?? 0))?.expiresAt,
    new Date(clock - 60 * 1000).toISOString(),
    'a later expiry never extends a key',
  );
});
