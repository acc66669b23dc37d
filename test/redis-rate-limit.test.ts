import { join } from 'node:path';
import { Writable } from 'node:stream';
import t from 'tap';
import type { ErrorBody } from '../src/domain/errors.js';
import { REDIS_KEY_PREFIX } from '../src/plugins/rate-limit/index.js';
import type { RateLimitSettings } from '../src/plugins/settings.js';
import { connectRedis, redisClient } from '../src/plugins/rate-limit/redis.js';
import {
  conformingFetch,
  startApi,
  temporaryDirectory,
  type ConformingResponse,
  type TapTest,
  type TestApi,
} from './helpers/api.js';
import { newDatabase } from './helpers/backend.js';
import { databaseWithKey, startServerProcess } from './helpers/process.js';
import { redisMissing, startRedis } from './helpers/redis.js';

/** A sanity bound, not a benchmark: a request that waited on a down Redis would take much longer. */
const PROMPT_MS = 2_000;

interface LogLine {
  level: number;
  msg: string;
  redis?: string;
}

/** A pino stream keeping every line the server logs. */
function capturedLog() {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return {
    logger: { level: 'info', stream },
    warnings: () => lines.filter((line) => line.level === 40),
    recoveries: () => lines.filter((line) => line.level === 30 && line.msg.startsWith('Redis answers again')),
  };
}

/** Two instances on one database, counting in one Redis: a deployment of two, in process. */
async function twoInstances(t: TapTest, redisUrl: string, rateLimit: RateLimitSettings) {
  const first = capturedLog();
  const second = capturedLog();
  const a = await startApi(t, { redisUrl, rateLimit, logger: first.logger });
  const b = await startApi(t, { databaseUrl: a.databaseUrl, redisUrl, rateLimit, logger: second.logger });
  return { a, b, logs: [first, second] };
}

const list = (api: TestApi, key = api.key) =>
  api.request({ method: 'GET', url: '/v1/pets', headers: { authorization: `Bearer ${key}` } });

function assertRateLimited(t: TapTest, response: ConformingResponse, message: string): void {
  t.equal(response.statusCode, 429, message);
  t.equal(response.json<ErrorBody>().code, 'rate_limited');
  const retryAfter = Number(response.headers['retry-after']);
  t.ok(retryAfter > 0 && retryAfter <= 60, `Retry-After within the minute (${retryAfter})`);
}

t.test(
  'a key gets its limit in total, however its requests are spread over instances',
  { skip: redisMissing() },
  async (t) => {
    const redis = await startRedis(t);
    const { a, b } = await twoInstances(t, redis.url, { perMinute: 4, authFailuresPerMinute: 0 });
    for (const [i, api] of [a, b, b, a].entries()) {
      const response = await list(api, a.key);
      t.equal(response.statusCode, 200);
      t.equal(response.headers['ratelimit-remaining'], String(3 - i), 'counted with the other instance');
    }
    assertRateLimited(t, await list(b, a.key), 'the fifth request, on either instance, is over the limit');
    assertRateLimited(t, await list(a, a.key), 'on both');
    // Each instance now remembers the key as over its limit, until the shared count's expiry.
    assertRateLimited(t, await list(b, a.key), 'refused again, without counting, on the one');
    assertRateLimited(t, await list(a, a.key), 'and on the other');
    t.equal((await list(b, b.key)).statusCode, 200, 'another key has its own budget');
  },
);

t.test('failed authentications are counted across instances', { skip: redisMissing() }, async (t) => {
  const redis = await startRedis(t);
  const { a, b } = await twoInstances(t, redis.url, { perMinute: 0, authFailuresPerMinute: 3 });
  const guess = { authorization: `Bearer psk_${'A'.repeat(43)}` };
  for (const api of [a, b, a]) {
    t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: guess })).statusCode, 401);
  }
  assertRateLimited(
    t,
    await b.request({ method: 'GET', url: '/v1/pets', headers: guess }),
    'the fourth guess is cut off, whichever instance it reaches',
  );
});

t.test(
  'the counters in Redis are named petstore-ratelimit-key:<id> and -ip:<address>',
  { skip: redisMissing() },
  async (t) => {
    const redis = await startRedis(t);
    const client = await redisClient(redis.url);
    t.teardown(() => client.disconnect());
    await connectRedis(client);
    const { a } = await twoInstances(t, redis.url, { perMinute: 5, authFailuresPerMinute: 5 });
    t.equal((await list(a)).statusCode, 200);
    t.equal((await list(a, `psk_${'A'.repeat(43)}`)).statusCode, 401);
    // Under TEST_REDIS_URL every name has a prefix of the test's own, which ioredis leaves to KEYS.
    const testPrefix = new URL(redis.url).searchParams.get('keyPrefix') ?? '';
    const names = (await client.keys(`${testPrefix}${REDIS_KEY_PREFIX}*`)).map((name) => name.slice(testPrefix.length));
    t.match(names.sort(), [`${REDIS_KEY_PREFIX}ip:127.0.0.1`, /^petstore-ratelimit-key:[1-9]\d*$/]);
    t.equal(names.length, 2, 'one counter for the key, one for the address that failed');
  },
);

t.test(
  'with Redis down the API keeps serving, warns once, and shares the limits again once it is back',
  { skip: redisMissing({ stoppable: true }) },
  async (t) => {
    const redis = await startRedis(t, { stoppable: true });
    const { a, b, logs } = await twoInstances(t, redis.url, { perMinute: 3, authFailuresPerMinute: 3 });
    t.equal((await list(a)).headers['ratelimit-remaining'], '2');

    await redis.stop();
    for (let i = 0; i < 10; i += 1) {
      for (const api of [a, b]) {
        const started = Date.now();
        const response = await list(api, a.key);
        t.equal(response.statusCode, 200, 'served: the limit fails open');
        t.equal(response.headers['ratelimit-remaining'], undefined, 'no budget is claimed that was not counted');
        t.ok(Date.now() - started < PROMPT_MS, 'without waiting on Redis');
      }
    }
    const guess = { authorization: `Bearer psk_${'A'.repeat(43)}` };
    for (let i = 0; i < 5; i += 1) {
      t.equal((await a.request({ method: 'GET', url: '/v1/pets', headers: guess })).statusCode, 401);
    }
    for (const log of logs) {
      t.equal(log.warnings().length, 1, 'one warning for the outage, not one per request');
      t.match(log.warnings()[0], { msg: /Redis is unreachable/, redis: redis.url });
    }

    await redis.start();
    const deadline = Date.now() + 15_000;
    while (logs.some((log) => log.recoveries().length === 0)) {
      if (Date.now() > deadline) throw new Error('the instances did not reconnect to Redis within 15 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // The restarted Redis is empty: the key's minute starts afresh, counted by both again.
    for (const [i, api] of [b, a, b].entries()) {
      const response = await list(api, a.key);
      t.equal(response.statusCode, 200);
      t.equal(response.headers['ratelimit-remaining'], String(2 - i));
    }
    assertRateLimited(t, await list(a, a.key), 'shared again after the outage');
    for (const log of logs) t.equal(log.warnings().length, 1, 'and no more warnings');
  },
);

t.test(
  'a Redis that hangs delays requests by the command timeout at most',
  { skip: redisMissing({ stoppable: true }) },
  async (t) => {
    const redis = await startRedis(t, { stoppable: true });
    const log = capturedLog();
    const api = await startApi(t, {
      redisUrl: redis.url,
      rateLimit: { perMinute: 100, authFailuresPerMinute: 3 },
      logger: log.logger,
    });
    redis.pause();
    for (let i = 0; i < 5; i += 1) {
      const started = Date.now();
      const response = await list(api);
      t.equal(response.statusCode, 200, 'served uncounted');
      t.equal(response.headers['ratelimit-remaining'], undefined);
      t.ok(Date.now() - started < PROMPT_MS, 'the count was given up on, not waited for');
    }
    t.equal(log.warnings().length, 1, 'one warning for the hang');
    t.match(log.warnings()[0], { reason: /timed out/ });

    redis.resume();
    const counted = await list(api);
    t.equal(counted.statusCode, 200);
    t.ok(counted.headers['ratelimit-remaining'], 'counted again as soon as Redis answers');
    t.equal(log.recoveries().length, 1, 'and the recovery is logged');
  },
);

t.test('an unreachable Redis at start: the API starts, serves and warns once', async (t) => {
  const log = capturedLog();
  // Nothing listens on port 1 of the loopback interface.
  const api = await startApi(t, {
    redisUrl: 'redis://127.0.0.1:1',
    rateLimit: { perMinute: 2, authFailuresPerMinute: 2 },
    logger: log.logger,
  });
  for (let i = 0; i < 5; i += 1) {
    const started = Date.now();
    t.equal((await list(api)).statusCode, 200);
    t.ok(Date.now() - started < PROMPT_MS, 'without waiting on Redis');
  }
  t.equal(log.warnings().length, 1);
  t.match(log.warnings()[0], { msg: /Redis is unreachable/, redis: 'redis://127.0.0.1:1' });
});

t.test('the banner says whether limits are shared; no password is shown or logged', async (t) => {
  const dir = temporaryDirectory(t);
  const alone = await startServerProcess(t, { DATABASE_URL: join(dir, 'alone.db'), REDIS_URL: '' });
  t.match(alone.output(), /rate limits: counted by this instance alone; set REDIS_URL to share them across instances/);
  await alone.stop();

  const password = 'not-for-the-logs';
  const shared = await startServerProcess(t, {
    DATABASE_URL: join(dir, 'shared.db'),
    REDIS_URL: `redis://petstore:${password}@127.0.0.1:1/2`,
  });
  t.match(shared.output(), /rate limits: shared through Redis at redis:\/\/127\.0\.0\.1:1\/2\n/);
  t.match(shared.output(), /Redis is unreachable/, 'the outage is logged');
  t.notMatch(shared.output(), password);
  t.notMatch(shared.output(), 'petstore:', 'nor the user name');
  await shared.stop();
});

t.test('two server processes share a limit through Redis', { skip: redisMissing() }, async (t) => {
  const redis = await startRedis(t);
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, RATE_LIMIT_PER_MINUTE: '3' };
  const servers = [await startServerProcess(t, env), await startServerProcess(t, env)];
  t.match(servers[0]?.output(), /rate limits: shared through Redis at redis:\/\/\S+:\d+\n/);
  const statuses: number[] = [];
  for (const server of [...servers, ...servers]) {
    const request = new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } });
    statuses.push((await conformingFetch(request)).status);
  }
  t.same(statuses, [200, 200, 200, 429], 'three a minute in total, not three each');
});
