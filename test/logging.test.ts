import t from 'tap';
import { conformingFetch, parseRawResponse, rawExchange, startApi } from './helpers/api.js';
import { newDatabase } from './helpers/backend.js';
import { databaseWithKey, startServerProcess } from './helpers/process.js';

/** Every character as %XX: a form of the key no plain search finds. */
function percentEncoded(text: string): string {
  return [...Buffer.from(text)].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('');
}

t.test('logs carry no key and no Authorization value, and tie every line to its request', async (t) => {
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl, LOG_LEVEL: 'trace' });
  const wrongKey = `psk_${'Z'.repeat(43)}`;
  const basic = `Basic ${Buffer.from('user:hunter2').toString('base64')}`;
  const traffic: [string, RequestInit][] = [
    ['/pets', { headers: { authorization: `Bearer ${key}` } }],
    [
      '/pets',
      {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-request-id': 'trace-me' },
        body: '{"name":"Logged","categoryId":1}',
      },
    ],
    ['/pets/999', { headers: { authorization: `bearer ${key}` } }],
    [
      '/pets',
      {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: '{"name":',
      },
    ],
    ['/pets', { headers: { authorization: `Bearer ${wrongKey}` } }],
    ['/pets', { headers: { authorization: basic } }],
    // A key where none belongs, as clients of other APIs send them: still never logged.
    [`/pets?limit=1&access_token=${key}`, {}],
    [`/pets/${key}`, { headers: { authorization: `Bearer ${key}` } }],
    [`/pets?api_key=${key.replace('_', '%5F')}`, {}],
    [`/pets?t=${key.replace('p', '%70')}`, {}],
    [`/pets?t=${key.replace('_', '%255F')}`, {}],
    [`/pets?t=${percentEncoded(key)}`, {}],
    // URLs the router cannot decode: answered outside any route, logged all the same.
    ['/pets/%ZZ', {}],
    ['/pets/%ZZ', { headers: { authorization: `Bearer ${key}` } }],
  ];
  for (const [path, init] of traffic) await conformingFetch(new Request(`${server.baseUrl}${path}`, init));
  const unparsable = parseRawResponse(await rawExchange(Number(new URL(server.baseUrl).port), 'HELLO\r\n\r\n'));
  await server.stop();

  const logs = server.output();
  for (const secret of [key, wrongKey, key.slice(4), percentEncoded(key.slice(4)), 'hunter2', basic.slice(6)]) {
    t.notOk(logs.includes(secret), `the logs never contain ${secret.slice(0, 8)}…`);
  }
  t.notMatch(logs, /authorization/i, 'nor any Authorization header');
  t.ok(logs.includes('"url":"/v1/pets?limit=1&access_token=[redacted]"'), 'a URL with a key in it is logged redacted');
  const requestLines = logs
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { reqId?: string; msg: string; url?: string; statusCode?: number });
  const requests = requestLines.filter((line) => line.msg === 'request');
  t.equal(requests.length, traffic.length, 'one line per request');
  for (const line of requests) t.ok(line.reqId, `${line.url} ${line.statusCode} has a reqId`);
  t.same(
    requests.filter((line) => line.url?.includes('%ZZ') === true).map(({ url, statusCode }) => [url, statusCode]),
    [
      ['/v1/pets/%ZZ', 401],
      ['/v1/pets/%ZZ', 400],
    ],
    'a URL the router cannot decode is logged as sent',
  );
  t.ok(
    requests.some((line) => line.reqId === 'trace-me' && line.statusCode === 201),
    'a sent X-Request-Id is the reqId',
  );
  const notParsed = requestLines.filter((line) => line.msg === 'request not parsed');
  t.same(
    notParsed.map(({ reqId, statusCode }) => ({ reqId, statusCode })),
    [{ reqId: unparsable.headers['x-request-id'], statusCode: 400 }],
    "a request that could not be parsed has a line with its answer's X-Request-Id",
  );
});

t.test('probes are not logged at info, not even refused while shutting down; the stop is', async (t) => {
  const databaseUrl = await newDatabase(t);
  await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl, SHUTDOWN_DELAY_MS: '1000' });
  const origin = new URL(server.baseUrl).origin;
  for (const probe of ['/healthz', '/readyz', '/readyz']) t.equal((await fetch(`${origin}${probe}`)).status, 200);
  const exited = server.stop('SIGTERM');
  while (!server.output().includes('"msg":"shutting down"')) await new Promise((resolve) => setTimeout(resolve, 20));
  t.equal((await fetch(`${origin}/readyz`)).status, 503, 'refused while the delay runs');
  t.equal(await exited, 0);

  const lines = server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string; url?: string });
  t.same(
    lines.filter((line) => line.url !== undefined),
    [],
    'no request line for a probe: a balancer checks every second',
  );
  t.same(
    lines.filter((line) => line.level >= 50),
    [],
    'a refused /readyz is no error: refusing is what it is for',
  );
  t.equal(lines.at(-1)?.msg, 'stopped: requests finished, database closed', 'the last line says it has stopped');
});

t.test('at LOG_LEVEL=warn a request that succeeds or is refused writes no line', async (t) => {
  const lines: string[] = [];
  const api = await startApi(t, {
    logger: { level: 'warn', stream: { write: (line: string) => void lines.push(line) } },
  });
  t.equal((await api.request({ method: 'GET', url: '/v1/pets', headers: api.auth })).statusCode, 200);
  t.equal((await api.request({ method: 'GET', url: '/v1/pets' })).statusCode, 401);
  t.same(lines, [], 'nothing written');
});
