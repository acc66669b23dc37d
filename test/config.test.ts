import t from 'tap';
import { loadConfig } from '../src/config/environment.js';

t.test('PORT is a plain decimal port; empty means the default', async (t) => {
  t.equal(loadConfig({}).port, 3000);
  t.equal(loadConfig({ PORT: '' }).port, 3000, 'an empty PORT is the default, not any free port');
  t.equal(loadConfig({ PORT: '0' }).port, 0, '0 asks for any free port');
  t.equal(loadConfig({ PORT: '65535' }).port, 65535);
  for (const port of ['0x50', ' 80', '80 ', '1e3', '-1', '65536', '08', '3000.0', 'eighty']) {
    t.throws(() => loadConfig({ PORT: port }), /PORT must be an integer from 0 to 65535/, `PORT="${port}" is refused`);
  }
});

t.test('LOG_LEVEL and SQLITE_SYNCHRONOUS are taken in any case', async (t) => {
  t.equal(loadConfig({ LOG_LEVEL: 'INFO' }).logLevel, 'info');
  t.match(loadConfig({ SQLITE_SYNCHRONOUS: 'full' }).database, { engine: 'sqlite', synchronous: 'FULL' });
  t.throws(() => loadConfig({ LOG_LEVEL: 'loud' }), /LOG_LEVEL must be one of/);
  t.throws(
    () => loadConfig({ SQLITE_SYNCHRONOUS: 'off' }),
    /SQLITE_SYNCHRONOUS must be one of NORMAL, FULL, EXTRA/,
    'OFF is refused: a power loss could corrupt the database',
  );
});

t.test('an empty variable is its default, never something wider', async (t) => {
  const config = loadConfig({ HOST: '', LOG_LEVEL: '', SQLITE_SYNCHRONOUS: '', PORT: '' });
  t.equal(config.host, '127.0.0.1', 'HOST= is loopback, not every interface');
  t.equal(config.logLevel, 'info');
  t.match(config.database, { engine: 'sqlite', synchronous: 'NORMAL' });
  t.throws(() => loadConfig({ LOG_LEVEL: 'LOUD' }), /got "LOUD"/, 'an error quotes the value as set');
});

t.test('DATABASE_URL names a SQLite file or a PostgreSQL server, and nothing else', async (t) => {
  t.match(loadConfig({}).database, { engine: 'sqlite', file: /\/data\/petstore\.db$/ });
  t.match(loadConfig({ DATABASE_URL: 'sqlite:./x.db' }).database, { engine: 'sqlite', file: /\/x\.db$/ });
  const url = 'postgres://app:secret@db:5432/pets?sslmode=require';
  t.same(loadConfig({ DATABASE_URL: url }).database, { engine: 'postgres', url, poolSize: 10, timeoutMs: 3000 });
  t.match(
    loadConfig({ DATABASE_URL: 'postgresql://db/pets', DATABASE_POOL_SIZE: '4', DATABASE_TIMEOUT_MS: '500' }).database,
    { engine: 'postgres', poolSize: 4, timeoutMs: 500 },
  );
  t.throws(
    () => loadConfig({ DATABASE_URL: url, DATABASE_POOL_SIZE: '0' }),
    /DATABASE_POOL_SIZE must be a whole number above 0/,
  );
  for (const other of ['mysql://app:secret@db/pets', 'redis://db:6379', 'https://example.com/db']) {
    t.throws(
      () => loadConfig({ DATABASE_URL: other }),
      /DATABASE_URL must be a SQLite file path or a postgres:\/\/ URL/,
    );
  }
  try {
    loadConfig({ DATABASE_URL: 'mysql://app:secret@db/pets' });
  } catch (error) {
    t.notMatch((error as Error).message, /secret/, 'the message never repeats the URL and its password');
  }
  t.throws(() => loadConfig({ DATABASE_URL: 'postgres://app:secret@[db/pets' }), /not a valid postgres:\/\/ URL/);
});

t.test('REDIS_URL is a redis:// or rediss:// URL, never echoed back', async (t) => {
  t.equal(loadConfig({}).redisUrl, undefined, 'unset: each instance counts its own limits');
  t.equal(loadConfig({ REDIS_URL: '' }).redisUrl, undefined);
  t.equal(loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379' }).redisUrl, 'redis://127.0.0.1:6379');
  t.equal(loadConfig({ REDIS_URL: 'rediss://:secret@cache.internal/2' }).redisUrl, 'rediss://:secret@cache.internal/2');
  for (const url of ['http://user:secret@cache.internal', 'cache.internal:6379', 'secret']) {
    const error = t.throws(() => loadConfig({ REDIS_URL: url }), /REDIS_URL must be a redis:\/\/ or rediss:\/\/ URL/);
    t.notMatch((error as Error).message, 'secret', 'the value, which may hold a password, is not repeated');
  }
  t.equal(
    loadConfig({ REDIS_URL: 'redis://cache.internal:6379?family=6' }).redisUrl,
    'redis://cache.internal:6379?family=6',
    'other query parameters are ioredis options, passed on',
  );
  const error = t.throws(
    () => loadConfig({ REDIS_URL: 'redis://:secret@cache.internal?commandTimeout=60000&enableOfflineQueue=true' }),
    /REDIS_URL must not set enableOfflineQueue, commandTimeout: the server sets these/,
    "the options that bound a wait on Redis are the server's",
  );
  t.notMatch((error as Error).message, 'secret');
});

t.test('metrics listen on METRICS_HOST:METRICS_PORT, loopback 9464 by default; off turns them off', async (t) => {
  t.same(loadConfig({}).metrics, { host: '127.0.0.1', port: 9464 });
  t.same(loadConfig({ METRICS_HOST: '0.0.0.0', METRICS_PORT: '9100' }).metrics, { host: '0.0.0.0', port: 9100 });
  t.equal(loadConfig({ METRICS_PORT: 'off' }).metrics, undefined);
  t.equal(loadConfig({ METRICS_PORT: 'OFF' }).metrics, undefined);
  t.throws(() => loadConfig({ METRICS_PORT: 'no' }), /METRICS_PORT must be an integer from 0 to 65535, or off/);
});

t.test('overload: OVERLOAD_MAX_EVENT_LOOP_DELAY_MS (0 turns shedding off), Retry-After, sampling, burst', async (t) => {
  t.same(loadConfig({}).overload, {
    maxEventLoopDelayMs: 25,
    retryAfterSeconds: 1,
    sampleIntervalMs: 10,
    burstCpuMs: 500,
  });
  t.same(
    loadConfig({
      OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
      OVERLOAD_RETRY_AFTER_SECONDS: '5',
      OVERLOAD_SAMPLE_INTERVAL_MS: '250',
      OVERLOAD_BURST_CPU_MS: '0',
    }).overload,
    { maxEventLoopDelayMs: 0, retryAfterSeconds: 5, sampleIntervalMs: 250, burstCpuMs: 0 },
  );
  t.throws(
    () => loadConfig({ OVERLOAD_RETRY_AFTER_SECONDS: '0' }),
    /OVERLOAD_RETRY_AFTER_SECONDS must be a whole number above 0/,
  );
});

t.test('TRUST_PROXY takes addresses, CIDRs or named ranges, and nothing that only looks like them', async (t) => {
  t.equal(
    loadConfig({ TRUST_PROXY: '10.0.0.5, 10.1.0.0/16,fd00::/8, loopback' }).trustProxy,
    '10.0.0.5,10.1.0.0/16,fd00::/8,loopback',
  );
  // `1.5` is no hop count, and proxy-addr would read it as the address 1.0.0.5.
  for (const value of ['1.5', '10.0.0.0/33', '::1/129', '10.0.0.256', '10.0.0.0/8/8', 'yes', '-1']) {
    t.throws(() => loadConfig({ TRUST_PROXY: value }), /TRUST_PROXY must be/, value);
  }
  // fastify 5 trusts no peer for a hop count: every client behind the proxy would share its address.
  for (const value of ['0', '1', '2']) {
    t.throws(
      () => loadConfig({ TRUST_PROXY: value }),
      /TRUST_PROXY=\d is a hop count, which is not supported .*name the proxy's addresses instead.*loopback/,
      value,
    );
  }
});
