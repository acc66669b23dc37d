import { Writable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import t from 'tap';
import type { ErrorBody } from '../src/domain/errors.js';
import { LimitLog } from '../src/plugins/request-log.js';
import { startApi } from './helpers/api.js';

/** A logger (pino options) keeping every line written, parsed. */
function capturedLog() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: { level: 'info', stream }, lines };
}

t.test('each API key gets RATE_LIMIT_PER_MINUTE requests, then 429 with Retry-After', async (t) => {
  const api = await startApi(t, { rateLimit: { perMinute: 3, authFailuresPerMinute: 0 } });
  for (let i = 1; i <= 3; i += 1) {
    const response = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
    t.equal(response.statusCode, 200);
    t.equal(response.headers['ratelimit-limit'], '3');
    t.equal(response.headers['ratelimit-remaining'], String(3 - i));
  }
  const limited = await api.request({
    method: 'POST',
    url: '/v1/pets',
    headers: api.auth,
    payload: { name: 'x', categoryId: 1 },
  });
  t.equal(limited.statusCode, 429);
  t.equal(limited.json<ErrorBody>().code, 'rate_limited');
  t.ok(Number(limited.headers['retry-after']) > 0 && Number(limited.headers['retry-after']) <= 60);
  const listed = await api.storage.pets.list({ limit: 10 });
  t.same(listed.items, [], 'the limited create changed nothing');

  const { issueKey } = await import('../src/auth/api-keys.js');
  const account = await api.storage.accounts.createAccount('second');
  const { key } = await issueKey(api.storage.accounts, account.id);
  const other = await api.request({ method: 'GET', url: '/v1/pets', headers: { authorization: `Bearer ${key}` } });
  t.equal(other.statusCode, 200, 'other keys have their own budget');
});

t.test('failed authentication is limited per client address', async (t) => {
  const api = await startApi(t, { rateLimit: { perMinute: 0, authFailuresPerMinute: 5 } });
  const guess = { authorization: `Bearer psk_${'A'.repeat(43)}` };
  for (let i = 0; i < 5; i += 1) {
    t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: guess })).statusCode, 401);
  }
  const limited = await api.request({ method: 'GET', url: '/v1/pets', headers: guess });
  t.equal(limited.statusCode, 429, 'guessing keys at speed is cut off');
  t.ok(limited.headers['retry-after']);
  const valid = await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal(valid.statusCode, 200, 'a valid key is not counted as a failure');
  t.equal(valid.headers['ratelimit-limit'], undefined, 'RATE_LIMIT_PER_MINUTE=0 turns the per-key limit off');
});

t.test('a key over its limit stays refused until its window ends, even if revoked meanwhile; then 401', async (t) => {
  const api = await startApi(t, { rateLimit: { perMinute: 2, authFailuresPerMinute: 0 } });
  const list = () => api.request({ method: 'GET', url: '/v1/pets', headers: api.auth });
  t.equal((await list()).statusCode, 200);
  t.equal((await list()).statusCode, 200);
  const first = await list();
  t.equal(first.statusCode, 429);
  const { hashKey } = await import('../src/auth/api-keys.js');
  const principal = await api.storage.accounts.findPrincipal(hashKey(api.key));
  t.ok(principal !== undefined && (await api.storage.accounts.revokeKey(principal.keyId)));
  // Refused from memory now, without a look-up: the same answer, its wait counting down.
  const again = await list();
  t.equal(again.statusCode, 429, 'revoked within its window: still 429');
  t.equal(again.json<ErrorBody>().code, 'rate_limited');
  t.equal(again.headers['ratelimit-limit'], '2');
  t.equal(again.headers['ratelimit-remaining'], '0');
  const [waitedBefore, waitedNow] = [Number(first.headers['retry-after']), Number(again.headers['retry-after'])];
  t.ok(waitedNow > 0 && waitedNow <= waitedBefore, `Retry-After counts down (${waitedBefore}, then ${waitedNow})`);
  t.equal(again.headers['ratelimit-reset'], again.headers['retry-after']);

  // The window's end, as the limit's clock (Date.now) sees it.
  const realNow = Date.now;
  Date.now = () => realNow() + 61_000;
  t.teardown(() => {
    Date.now = realNow;
  });
  const after = await list();
  t.equal(after.statusCode, 401, 'once the window is over, the revoked key is refused as revoked');
  t.equal(after.json<ErrorBody>().code, 'unauthorized');
});

t.test("a limit's refusals are logged once per key or address and window, not one line a request", async (t) => {
  const log = capturedLog();
  const api = await startApi(t, { rateLimit: { perMinute: 1, authFailuresPerMinute: 2 }, logger: log.logger });
  const guess = { authorization: `Bearer psk_${'A'.repeat(43)}` };
  const statuses: number[] = [];
  for (const headers of [api.auth, guess]) {
    for (let i = 0; i < 6; i++)
      statuses.push((await api.request({ method: 'GET', url: '/v1/pets', headers })).statusCode);
  }
  t.same(statuses, [200, 429, 429, 429, 429, 429, 401, 401, 429, 429, 429, 429], 'every refusal answered');
  const requestLines = log.lines.filter((line) => line.msg === 'request').map((line) => line.statusCode);
  t.same(requestLines, [200, 429, 401, 401, 429], "each limit's first refusal has its request line, the rest none");
  const reached = log.lines.filter((line) => String(line.msg).startsWith('rate limit reached'));
  t.match(reached, [
    { limit: 'per key', keyId: Number },
    { limit: 'failed authentications', client: '127.0.0.1' },
  ]);
  t.ok(
    reached.every((line) => Number(line.retryAfterSeconds) > 0 && Number(line.retryAfterSeconds) <= 60),
    'each says how long the refusals last',
  );
  const written = JSON.stringify(log.lines);
  t.notOk(written.includes(api.key) || written.includes('A'.repeat(43)), 'no key, presented or guessed, is logged');
});

t.test('when the window ends, one line says how many refusals were not logged', async (t) => {
  const log = capturedLog();
  const api = await startApi(t, { logger: log.logger });
  const limitLog = new LimitLog(api.app.log, 'per key');
  const resetAt = Date.now() + 50;
  for (let i = 0; i < 4; i++) limitLog.refused({} as FastifyRequest, '7', { keyId: 7 }, resetAt);
  await new Promise((resolve) => setTimeout(resolve, 150));
  t.match(log.lines, [
    { msg: /^rate limit reached/, limit: 'per key', keyId: 7 },
    { msg: 'rate limit window over', limit: 'per key', keyId: 7, refused: 3 },
  ]);
  limitLog.refused({} as FastifyRequest, '7', { keyId: 7 }, Date.now() + 50);
  t.match(log.lines[2], { msg: /^rate limit reached/ }, 'a new window is logged afresh');
});
