import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import t from 'tap';
import { projectRoot } from '../src/contract/paths.js';
import { assertConforms } from './helpers/contract.js';
import { conformingFetch, listen, startApi, temporaryDirectory, type TestApi } from './helpers/api.js';
import { databaseWithKey, failedStart, startServerProcess } from './helpers/process.js';

const WRONG_KEY = { authorization: 'Bearer psk_notakeyatallnotakeyatallnotakeyat' };

/** A failed authentication arriving from `peer`, claiming to be from `forwardedFor`. */
async function failFrom(api: TestApi, peer: string, forwardedFor?: string): Promise<number> {
  const headers = forwardedFor === undefined ? WRONG_KEY : { ...WRONG_KEY, 'x-forwarded-for': forwardedFor };
  const response = await api.app.inject({ method: 'GET', url: '/v1/pets', headers, remoteAddress: peer });
  assertConforms('GET', '/v1/pets', response);
  return response.statusCode;
}

const limits = { perMinute: 1000, authFailuresPerMinute: 2 };

t.test('without TRUST_PROXY a spoofed X-Forwarded-For changes nothing: the limit is per peer', async (t) => {
  const api = await startApi(t, { rateLimit: limits });
  t.equal(await failFrom(api, '198.51.100.1', '203.0.113.1'), 401);
  t.equal(await failFrom(api, '198.51.100.1', '203.0.113.2'), 401);
  t.equal(await failFrom(api, '198.51.100.1', '203.0.113.3'), 429, 'a new claimed address each time: still limited');
  t.equal(await failFrom(api, '198.51.100.2', '203.0.113.3'), 401, 'another peer has its own count');
});

t.test('with TRUST_PROXY naming the proxy, clients behind it are limited on their own addresses', async (t) => {
  const proxy = '10.0.0.5';
  const api = await startApi(t, { rateLimit: limits, trustProxy: `${proxy},192.0.2.0/24` });
  t.equal(await failFrom(api, proxy, '203.0.113.1'), 401);
  t.equal(await failFrom(api, proxy, '203.0.113.1'), 401);
  t.equal(await failFrom(api, proxy, '203.0.113.1'), 429, 'the client that failed is limited');
  t.equal(await failFrom(api, proxy, '203.0.113.2'), 401, 'another client behind the same proxy is not');
  t.equal(await failFrom(api, '192.0.2.77', '203.0.113.2'), 401, 'a proxy in a trusted CIDR');
  t.equal(await failFrom(api, '192.0.2.77', '203.0.113.2'), 429, 'the same client through either proxy');
  // A peer that is not a trusted proxy cannot pass as another client.
  t.equal(await failFrom(api, '198.51.100.9', '203.0.113.50'), 401);
  t.equal(await failFrom(api, '198.51.100.9', '203.0.113.51'), 401);
  t.equal(await failFrom(api, '198.51.100.9', '203.0.113.52'), 429);
});

t.test(
  'over a socket from a trusted proxy, each forwarded client has its own failed-authentication count',
  async (t) => {
    const api = await startApi(t, { rateLimit: limits, trustProxy: 'loopback' });
    const { baseUrl } = await listen(t, api);
    const failAs = async (client: string) =>
      (await conformingFetch(new Request(`${baseUrl}/pets`, { headers: { ...WRONG_KEY, 'x-forwarded-for': client } })))
        .status;
    t.equal(await failAs('203.0.113.1'), 401);
    t.equal(await failAs('203.0.113.1'), 401);
    t.equal(await failAs('203.0.113.1'), 429, 'the client that failed twice is limited');
    t.equal(await failAs('203.0.113.2'), 401, 'another client through the same proxy is not');
    t.equal(await failAs('203.0.113.2'), 401);
    t.equal(await failAs('203.0.113.2'), 429, 'and has a count of its own');
  },
);

const certFile = join(projectRoot, 'test/fixtures/tls/localhost-cert.pem');
const keyFile = join(projectRoot, 'test/fixtures/tls/localhost-key.pem');

function getOverTls(url: string, headers: Record<string, string>) {
  return new Promise<{ statusCode: number; headers: Record<string, string | string[] | undefined>; body: string }>(
    (resolve, reject) => {
      const request = httpsRequest(url, { ca: readFileSync(certFile), headers }, (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body }));
      });
      request.on('error', reject);
      request.end();
    },
  );
}

t.test(
  'with TLS_CERT_FILE and TLS_KEY_FILE the API is served over HTTPS; logs name the forwarded client',
  async (t) => {
    const databaseFile = join(temporaryDirectory(t), 'tls.db');
    const key = await databaseWithKey(databaseFile);
    const server = await startServerProcess(t, {
      DATABASE_URL: databaseFile,
      TLS_CERT_FILE: certFile,
      TLS_KEY_FILE: keyFile,
      TRUST_PROXY: '127.0.0.1',
    });
    t.match(server.baseUrl, /^https:\/\/127\.0\.0\.1:\d+\/v1$/, 'the banner says https');
    const response = await getOverTls(`${server.baseUrl}/pets`, {
      authorization: `Bearer ${key}`,
      'x-forwarded-for': '203.0.113.7',
    });
    assertConforms('GET', '/v1/pets', response);
    t.equal(response.statusCode, 200);
    t.same(JSON.parse(response.body), []);
    const served = await getOverTls(`${server.baseUrl}/openapi.json`, {});
    const { servers } = JSON.parse(served.body) as { servers: { url: string }[] };
    t.equal(servers[0]?.url, server.baseUrl, 'the served contract names this instance by https');
    await t.rejects(fetch(server.baseUrl.replace('https:', 'http:')), 'plain HTTP is not spoken');
    t.equal(await server.stop(), 0);
    t.match(server.output(), /"client":"203\.0\.113\.7"/, 'the log line names the client, not the proxy');
  },
);

t.test('TLS settings that cannot work stop the start with a clear message', async (t) => {
  const databaseFile = join(temporaryDirectory(t), 'tls-bad.db');
  const half = failedStart({ DATABASE_URL: databaseFile, TLS_CERT_FILE: certFile });
  t.equal(half.code, 1);
  t.match(half.stderr, /TLS_CERT_FILE and TLS_KEY_FILE go together/);
  const missing = failedStart({
    DATABASE_URL: databaseFile,
    TLS_CERT_FILE: certFile,
    TLS_KEY_FILE: '/nonexistent/key.pem',
  });
  t.equal(missing.code, 1);
  t.match(
    missing.stderr,
    /TLS_KEY_FILE \/nonexistent\/key\.pem cannot be read: ENOENT.*set TLS_KEY_FILE to a readable file/,
  );

  const swapped = failedStart({ DATABASE_URL: databaseFile, TLS_CERT_FILE: keyFile, TLS_KEY_FILE: certFile });
  t.equal(swapped.code, 1);
  t.match(
    swapped.stderr,
    /TLS_CERT_FILE \S+ holds a private key and TLS_KEY_FILE \S+ a certificate: the two are swapped/,
  );
  t.notMatch(swapped.stderr, /routines/, "not OpenSSL's words");

  const notPem = failedStart({
    DATABASE_URL: databaseFile,
    TLS_CERT_FILE: join(projectRoot, 'package.json'),
    TLS_KEY_FILE: keyFile,
  });
  t.equal(notPem.code, 1);
  t.match(notPem.stderr, /TLS_CERT_FILE \S+ holds no PEM certificate; set it to the server's certificate/);

  const otherKeyFile = join(temporaryDirectory(t), 'other-key.pem');
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  writeFileSync(otherKeyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const mismatched = failedStart({ DATABASE_URL: databaseFile, TLS_CERT_FILE: certFile, TLS_KEY_FILE: otherKeyFile });
  t.equal(mismatched.code, 1);
  t.match(mismatched.stderr, /TLS_KEY_FILE \S+ is not the private key of the certificate in TLS_CERT_FILE/);
  for (const start of [missing, swapped, notPem, mismatched]) t.notMatch(start.stderr, /\n\s+at /, 'no stack trace');
});

t.test('TRUST_PROXY that would trust no proxy stops the start, saying what to set instead', async (t) => {
  const databaseFile = join(temporaryDirectory(t), 'proxy-bad.db');
  const bad = failedStart({ DATABASE_URL: databaseFile, TRUST_PROXY: 'the proxy' });
  t.equal(bad.code, 1);
  t.match(bad.stderr, /TRUST_PROXY must be true, false, or comma-separated addresses, CIDRs or named ranges/);
  const hops = failedStart({ DATABASE_URL: databaseFile, TRUST_PROXY: '1' });
  t.equal(hops.code, 1, 'a hop count is refused, not silently ignored');
  t.match(hops.stderr, /TRUST_PROXY=1 is a hop count.*name the proxy's addresses instead/);
  t.notMatch(hops.stderr, /\n\s+at /, 'no stack trace');
});
