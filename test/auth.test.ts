import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { issueKey } from '../src/auth/api-keys.js';
import type { ErrorBody } from '../src/domain/errors.js';
import {
  conformingFetch,
  listen,
  parseRawResponse,
  rawExchange,
  startApi,
  type TapTest,
  type TestApi,
} from './helpers/api.js';
import { backend, probeDatabase } from './helpers/backend.js';
import { assertConforms } from './helpers/contract.js';

const REALM = 'Bearer realm="petstore"';
const INVALID_TOKEN = 'Bearer realm="petstore", error="invalid_token"';

async function expectUnauthorized(
  t: TapTest,
  api: TestApi,
  headers: Record<string, string>,
  challenge: string,
  what: string,
) {
  for (const [method, url] of [
    ['GET', '/v1/pets'],
    ['POST', '/v1/pets'],
    ['GET', '/v1/pets/1'],
  ] as const) {
    const response = await api.request({
      method,
      url,
      headers,
      ...(method === 'POST' ? { payload: { name: 'x', categoryId: 1 } } : {}),
    });
    t.equal(response.statusCode, 401, `${what}: ${method} ${url}`);
    t.equal(response.json<ErrorBody>().code, 'unauthorized');
    t.equal(response.headers['www-authenticate'], challenge, `${what}: challenge`);
  }
}

t.test('a missing or non-Bearer Authorization is a 401 with the plain challenge', async (t) => {
  const api = await startApi(t);
  await expectUnauthorized(t, api, {}, REALM, 'no header');
  await expectUnauthorized(t, api, { authorization: '' }, REALM, 'empty header');
  await expectUnauthorized(t, api, { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }, REALM, 'Basic');
  await expectUnauthorized(t, api, { authorization: api.key }, REALM, 'a key without a scheme');
  await expectUnauthorized(t, api, { authorization: 'Bearer' }, REALM, 'Bearer without a token');
  const messages: [Record<string, string>, string][] = [
    [{}, 'Missing API key: send Authorization: Bearer <key>'],
    [{ authorization: 'Bearer ' }, 'Missing API key: send Authorization: Bearer <key>'],
    [{ authorization: 'Basic YTpi' }, 'Authorization must use the Bearer scheme: Bearer <key>'],
  ];
  for (const [headers, message] of messages) {
    const response = await api.request({ method: 'GET', url: '/v1/pets', headers });
    t.equal(response.json<ErrorBody>().message, message, `${JSON.stringify(headers)}: the message says what to send`);
  }
});

t.test('an unknown, malformed or revoked key is a 401 with error="invalid_token"', async (t) => {
  const api = await startApi(t);
  await expectUnauthorized(t, api, { authorization: `Bearer psk_${'A'.repeat(43)}` }, INVALID_TOKEN, 'unknown key');
  await expectUnauthorized(t, api, { authorization: 'Bearer not-a-key' }, INVALID_TOKEN, 'malformed key');
  await expectUnauthorized(
    t,
    api,
    { authorization: `Bearer ${api.key.slice(0, -1)}.` },
    INVALID_TOKEN,
    'a key with a character no key has',
  );
  await expectUnauthorized(
    t,
    api,
    { authorization: `Bearer ${api.key}x` },
    INVALID_TOKEN,
    'key with an extra character',
  );

  const account = await api.storage.accounts.createAccount('revoked');
  const { key, info } = await issueKey(api.storage.accounts, account.id);
  const before = await api.request({ method: 'GET', url: '/v1/pets', headers: { authorization: `Bearer ${key}` } });
  t.equal(before.statusCode, 200, 'the key works before it is revoked');
  t.ok(await api.storage.accounts.revokeKey(info.id));
  await expectUnauthorized(
    t,
    api,
    { authorization: `Bearer ${key}` },
    INVALID_TOKEN,
    'revoked key, on the next request',
  );
  const other = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(other.statusCode, 200, 'other keys keep working');
});

t.test(
  'a key changed behind the server (the CLI, SQL of its own) is refused within a second, after many uses',
  async (t) => {
    const api = await startApi(t);
    const probe = await probeDatabase(t, api.databaseUrl, { writable: true });
    const status = async () => (await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).statusCode;
    // Long enough for the server to be told of changes (PostgreSQL: its LISTEN), and to keep the key.
    for (let use = 0; use < 10; use += 1) {
      t.equal(await status(), 200);
      await sleep(50);
    }
    const refusedWithin = async (what: string, change: string) => {
      await probe.query(change);
      const changed = performance.now();
      while ((await status()) !== 401 && performance.now() - changed < 1000) await sleep(5);
      t.equal(await status(), 401, `${what}: refused within ${Math.round(performance.now() - changed)} ms`);
    };
    await refusedWithin('revoked', 'UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP');
    await probe.query('UPDATE api_keys SET revoked_at = NULL');
    t.equal(await status(), 200, 'a change back counts too');
    if (backend === 'postgres') {
      // The connection it is told on, lost: until it listens again, every request looks the key up.
      await sleep(200);
      await probe.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'petstore-keys'`,
      );
      await refusedWithin(
        'revoked while the server was not listening',
        'UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP',
      );
      await probe.query('UPDATE api_keys SET revoked_at = NULL');
      await sleep(1500);
      t.equal(await status(), 200, 'listening again');
      await refusedWithin('revoked once listening again', 'UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP');
    }
  },
);

t.test('a Bearer token outside token68 is an invalid key, and a failed authentication', async (t) => {
  const api = await startApi(t, { rateLimit: { perMinute: 1000, authFailuresPerMinute: 4 } });
  // Three failures, one per operation.
  await expectUnauthorized(t, api, { authorization: 'Bearer psk_ a b' }, INVALID_TOKEN, 'a token with spaces');
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  // Raw, as a client sends it: UTF-8 bytes, which Node reads as Latin-1.
  const send = () =>
    rawExchange(port, 'GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer psk_ä\r\nConnection: close\r\n\r\n');
  const refused = parseRawResponse(await send());
  assertConforms('GET', '/v1/pets', refused);
  t.equal(refused.statusCode, 401);
  t.equal(refused.json<ErrorBody>().message, 'Invalid or revoked API key');
  t.equal(refused.headers['www-authenticate'], INVALID_TOKEN);
  const limited = parseRawResponse(await send());
  assertConforms('GET', '/v1/pets', limited);
  t.equal(limited.statusCode, 429, 'each counted as a failure: the fifth in a minute is over the limit of four');
});

t.test('the scheme name is case-insensitive', async (t) => {
  const api = await startApi(t);
  for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
    const response = await api.request({
      method: 'GET',
      url: '/v1/pets',
      headers: { authorization: `${scheme} ${api.key}` },
    });
    t.equal(response.statusCode, 200, scheme);
  }
});

t.test('authentication runs before the body is read or anything is validated', async (t) => {
  const api = await startApi(t);
  const cases: [string, Record<string, string>, string | undefined][] = [
    ['an invalid body', { 'content-type': 'application/json' }, '{"categoryId":"x","extra":1}'],
    ['malformed JSON', { 'content-type': 'application/json' }, '{"name":'],
    ['a wrong content type', { 'content-type': 'text/plain' }, 'hello'],
    [
      'a body over the limit',
      { 'content-type': 'application/json' },
      JSON.stringify({ name: 'x'.repeat(20_000), categoryId: 1 }),
    ],
    ['no body at all', {}, undefined],
  ];
  for (const [what, headers, payload] of cases) {
    const response = await api.request({
      method: 'POST',
      url: '/v1/pets',
      headers,
      ...(payload === undefined ? {} : { payload }),
    });
    t.equal(response.statusCode, 401, `${what} without a key is a 401`);
    t.notMatch(response.body, /categoryId|name|JSON|body/, 'and reveals nothing of the schema');
  }
  const badQuery = await api.request({ method: 'GET', url: '/v1/pets?limit=1000&status=lost' });
  t.equal(badQuery.statusCode, 401, 'an invalid query without a key is a 401');
  const badId = await api.request({ method: 'GET', url: '/v1/pets/abc' });
  t.equal(badId.statusCode, 401, 'an invalid petId without a key is a 401');
});

/** Sends the head of a request, then `body` once a 100 Continue has come; resolves with all answered. */
function expectContinue(port: number, head: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(head));
    let received = '';
    socket.on('data', (chunk) => {
      received += chunk.toString();
      // Written, not ended: a client that half-closes is answered by HAProxy in front (docs/deploy.md).
      if (received === 'HTTP/1.1 100 Continue\r\n\r\n') socket.write(body);
    });
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
}

t.test('Expect: 100-continue gets the 100 only once authentication has passed', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const body = '{"name":"Expected","categoryId":1}';
  const head = (authorization: string) =>
    `POST /v1/pets HTTP/1.1\r\nHost: x\r\n${authorization}Content-Type: application/json\r\n` +
    `Content-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;

  const refused = await expectContinue(port, head(''), body);
  t.match(refused, /^HTTP\/1\.1 401 /, 'without a key: the 401, with no 100 inviting the body first');
  assertConforms('POST', '/v1/pets', parseRawResponse(refused));

  const accepted = await expectContinue(port, head(`Authorization: ${api.auth.authorization}\r\n`), body);
  t.match(accepted, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /, 'with a key: the 100, then the 201');
  assertConforms('POST', '/v1/pets', parseRawResponse(accepted.slice(accepted.indexOf('\r\n\r\n') + 4)));
  t.equal((await api.storage.pets.list({ limit: 10 })).items.length, 1, 'the pet was created once');

  const other = await expectContinue(
    port,
    `GET /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\nExpect: something-else\r\nConnection: close\r\n\r\n`,
    '',
  );
  t.match(other, /^HTTP\/1\.1 200 /, 'another expectation is ignored, not an undeclared 417');
});

t.test('keys are stored only as SHA-256 hashes', async (t) => {
  const api = await startApi(t);
  const db = await probeDatabase(t, api.databaseUrl);
  const rows = await db.query<{ hash: Buffer; prefix: string }>('SELECT hash, prefix FROM api_keys');
  t.ok(rows.length > 0);
  for (const row of rows) {
    t.equal(row.hash.length, 32, 'a 32-byte digest');
    t.ok(api.key.startsWith(row.prefix) && row.prefix.length <= 10, 'only a short prefix is kept in clear');
  }
  const dump = JSON.stringify(await db.query('SELECT * FROM api_keys'));
  t.notOk(dump.includes(api.key), 'the key itself is nowhere in the table');
  t.match(api.key, /^psk_[A-Za-z0-9_-]{43}$/, 'a recognisable prefix and 256 random bits');
});

t.test('a refusal, written at once, has the headers of any answer, over a real socket too', async (t) => {
  const api = await startApi(t, { rateLimit: { perMinute: 1, authFailuresPerMinute: 0 } });
  const sent = { 'x-request-id': 'refused-1' };
  const expected = (response: { headers: Record<string, unknown>; body: string }) => {
    t.equal(response.headers['x-request-id'], 'refused-1', 'the request id echoed');
    t.equal(response.headers['x-content-type-options'], 'nosniff');
    t.equal(response.headers['cache-control'], 'no-store');
    t.equal(response.headers['content-type'], 'application/json; charset=utf-8');
    t.equal(response.headers['content-length'], String(Buffer.byteLength(response.body)));
    // getPet is deprecated: its refusals say so too.
    t.equal(response.headers.deprecation, '@1795305600');
  };
  const unauthorized = await api.request({ method: 'GET', url: '/v1/pets/1', headers: sent });
  t.equal(unauthorized.statusCode, 401);
  expected(unauthorized);

  const headers = { ...api.auth, ...sent };
  t.equal((await api.request({ method: 'GET', url: '/v1/pets/1', headers })).statusCode, 404, 'the one allowed');
  for (let i = 0; i < 2; i++) {
    const limited = await api.request({ method: 'GET', url: '/v1/pets/1', headers });
    t.equal(limited.statusCode, 429, 'the same refusal, answered twice');
    expected(limited);
    t.equal(limited.headers['ratelimit-remaining'], '0');
    t.equal(limited.headers['ratelimit-reset'], limited.headers['retry-after']);
    t.match(limited.json<ErrorBody>().message, `retry in ${String(limited.headers['retry-after'])} seconds`);
  }

  const { origin } = await listen(t, api);
  const response = await conformingFetch(new Request(`${origin}/v1/pets/1`, { headers: sent }));
  t.equal(response.status, 401);
  expected({ headers: Object.fromEntries(response.headers), body: await response.text() });
  t.equal(response.headers.get('connection'), 'keep-alive', 'the connection is kept for the next request');
});
