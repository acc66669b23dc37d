// v2's errors are problem details (RFC 9457), v1's the Error they always were (issue 51, change 2):
// each error the framework answers, on /v2 and on /v1, from the same server; the raw refusals
// written before any route is known; the shed 503; and the balancer's own 503 and 504.
import { createServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { request as httpsRequest } from 'node:https';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { issueKey } from '../src/auth/api-keys.js';
import { JSON_CONTENT_TYPE, PROBLEM_CONTENT_TYPE } from '../src/contract/media-types.js';
import { type ErrorBody, PROBLEM_TITLES, PROBLEM_TYPE_BASE, type ProblemBody } from '../src/domain/errors.js';
import { freePort } from '../scripts/local-servers.js';
import type { Storage } from '../src/storage/types.js';
import { problemDetails } from '../src/versions/changes/problem-details.js';
import {
  type ConformingResponse,
  listen,
  parseRawResponse,
  rawExchange,
  startApi,
  type TapTest,
  temporaryDirectory,
  type TestApi,
} from './helpers/api.js';
import { assertConforms, type ObservedResponse, servedVersions } from './helpers/contract.js';
import { haproxyMissing, startBalancer, TEST_CERT_FILE } from './helpers/haproxy.js';

type Version = 'v1' | 'v2';
const json = { 'content-type': 'application/json' };

/** A v2 problem: its media type, its members in RFC 9457's order, its type and title those of its code. */
function isProblem(t: TapTest, response: ObservedResponse, status: number, code: string, what: string): ProblemBody {
  t.equal(response.statusCode, status, `${what}: ${response.body}`);
  t.equal(response.headers['content-type'], PROBLEM_CONTENT_TYPE, `${what}: application/problem+json`);
  const body = JSON.parse(response.body) as ProblemBody;
  t.same(Object.keys(body), ['type', 'title', 'status', 'detail', 'code'], `${what}: a problem's members`);
  t.equal(body.code, code, what);
  t.equal(body.type, `${PROBLEM_TYPE_BASE}${code}`, `${what}: its type`);
  t.equal(body.title, PROBLEM_TITLES[code as keyof typeof PROBLEM_TITLES], `${what}: its title`);
  t.equal(body.status, status, `${what}: its status`);
  return body;
}

/** A v1 Error, byte for byte as v1 writes it: `{code, message, status}` in `application/json`. */
function isError(
  t: TapTest,
  response: ObservedResponse,
  status: number,
  code: string,
  what: string,
  contentType = JSON_CONTENT_TYPE,
): ErrorBody {
  t.equal(response.statusCode, status, `${what}: ${response.body}`);
  t.equal(response.headers['content-type'], contentType, `${what}: application/json`);
  const body = JSON.parse(response.body) as ErrorBody;
  t.equal(response.body, JSON.stringify({ code, message: body.message, status }), `${what}: an Error, as v1 wrote it`);
  return body;
}

/**
 * The same error through each version: a problem on v2, the Error with the same words on v1 (those
 * that name the path name each its own).
 */
async function sameErrorBothWays(
  t: TapTest,
  what: string,
  status: number,
  code: string,
  answer: (version: Version) => Promise<ObservedResponse>,
  v1ContentType = JSON_CONTENT_TYPE,
): Promise<void> {
  const problem = isProblem(t, await answer('v2'), status, code, `/v2 ${what}`);
  const error = isError(t, await answer('v1'), status, code, `/v1 ${what}`, v1ContentType);
  t.equal(error.message, problem.detail.replaceAll('/v2/', '/v1/'), `${what}: v1's message is v2's detail`);
}

/** A raw exchange on a new connection, checked against the contract of the path's version. */
async function raw(port: number, method: string, url: string, bytes: string): Promise<ConformingResponse> {
  const response = parseRawResponse(await rawExchange(port, bytes));
  assertConforms(method, url, response);
  return response;
}

function connected(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
  });
}

async function keyWith(api: TestApi, scopes: readonly string[]): Promise<string> {
  const account = await api.storage.accounts.findAccount('tests');
  return (await issueKey(api.storage.accounts, account?.id ?? 0, { scopes })).key;
}

t.test("the contract's problem types are the server's: each code's type URI and title", async (t) => {
  const { Problem, ErrorCode } = servedVersions.contract.dereferenced.components?.schemas ?? {};
  const documented = (Problem as { 'x-problem-types'?: Record<string, { type: string; title: string }> })[
    'x-problem-types'
  ];
  const codes = (ErrorCode as { enum: string[] }).enum;
  t.same(Object.keys(documented ?? {}).sort(), [...codes].sort(), 'x-problem-types lists every ErrorCode');
  for (const code of codes) {
    t.same(
      documented?.[code],
      { type: `${PROBLEM_TYPE_BASE}${code}`, title: PROBLEM_TITLES[code as keyof typeof PROBLEM_TITLES] },
      code,
    );
  }
});

t.test('problemDetails: a problem down to v1 is its Error; anything else is left as it is', async (t) => {
  const problem = {
    type: `${PROBLEM_TYPE_BASE}not_found`,
    title: 'Not found',
    status: 404,
    detail: 'No pet with id 42',
    code: 'not_found',
  };
  const response = {
    operationId: 'deletePet',
    params: {},
    status: 404,
    headers: { 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' },
    body: problem,
  };
  problemDetails.responseDown?.(response);
  t.same(response, {
    operationId: 'deletePet',
    params: {},
    status: 404,
    headers: { 'content-type': JSON_CONTENT_TYPE, 'cache-control': 'no-store' },
    body: { code: 'not_found', message: 'No pet with id 42', status: 404 },
  });
  t.same(Object.keys(response.body), ['code', 'message', 'status'], "in v1's order");
  const success = {
    operationId: 'listPets',
    params: {},
    status: 200,
    headers: { 'content-type': JSON_CONTENT_TYPE },
    body: [],
  };
  problemDetails.responseDown?.(success);
  t.same(success.body, [], 'a success is left alone');
});

t.test("each error the framework answers: a problem on /v2, v1's Error on /v1", async (t) => {
  const api = await startApi(t, { connections: { requestTimeoutMs: 800, maxConnections: 100 } });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const { auth } = api;
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  const readOnly = { authorization: `Bearer ${await keyWith(api, ['pets:read'])}` };
  const inject =
    (method: string, path: string, options: object = {}) =>
    (version: Version) =>
      api.request({ method, url: `/${version}${path}`, ...options });

  // Each once through /v1 and once through /v2: the same refusal in each version's words.
  const cases: [string, number, string, (version: Version) => Promise<ObservedResponse>][] = [
    ['an invalid parameter', 400, 'invalid_request', inject('GET', '/pets?limit=1000', { headers: auth })],
    [
      'a body that is not JSON',
      400,
      'malformed_json',
      inject('POST', '/pets', { headers: { ...auth, ...json }, payload: '{"name":' }),
    ],
    ['no key', 401, 'unauthorized', inject('GET', '/pets')],
    [
      'a key without the scope',
      403,
      'insufficient_scope',
      inject('POST', '/pets', { headers: { ...readOnly, ...json }, payload: { name: 'Rex', categoryId: 1 } }),
    ],
    ['no such pet', 404, 'not_found', inject('DELETE', '/pets/999999', { headers: auth })],
    ['no such path', 404, 'not_found', inject('GET', '/no-such-thing', { headers: auth })],
    ['another method', 405, 'method_not_allowed', inject('DELETE', '/pets', { headers: auth })],
    [
      'a body too large',
      413,
      'payload_too_large',
      inject('POST', '/pets', { headers: { ...auth, ...json }, payload: { name: 'x'.repeat(20_000), categoryId: 1 } }),
    ],
    [
      'a body of another type',
      415,
      'unsupported_media_type',
      inject('POST', '/pets', { headers: { ...auth, 'content-type': 'text/plain' }, payload: 'hi' }),
    ],
    [
      'a transfer coding besides chunked',
      501,
      'not_implemented',
      (version) =>
        raw(
          port,
          'PATCH',
          `/${version}/pets/${pet.id}`,
          `PATCH /${version}/pets/${pet.id} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\n` +
            'Content-Type: application/merge-patch+json\r\nConnection: close\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n',
        ),
    ],
    ['an undecodable URL', 400, 'invalid_request', inject('DELETE', '/pets/%E0%A4%A', { headers: auth })],
    // Routed to its operation all the same: its key and scopes are checked first.
    ['an undecodable URL without a key', 401, 'unauthorized', inject('DELETE', '/pets/%E0%A4%A')],
    [
      'an undecodable URL with a key without the scope',
      403,
      'insufficient_scope',
      inject('DELETE', '/pets/%zz', { headers: readOnly }),
    ],
    [
      'a path parameter over the length limit',
      400,
      'invalid_request',
      inject('DELETE', `/pets/${'1'.repeat(150)}`, { headers: auth }),
    ],
  ];
  for (const [what, status, code, request] of cases) await sameErrorBothWays(t, what, status, code, request);

  // Written raw, before any route is known: by the base path of the request line, where it can be read.
  await sameErrorBothWays(t, 'a body too slow to arrive', 408, 'request_timeout', (version) =>
    raw(
      port,
      'POST',
      `/${version}/pets`,
      `POST /${version}/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth.authorization}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 10\r\n\r\n{}',
    ),
  );
  await sameErrorBothWays(t, 'headers too large', 431, 'headers_too_large', async (version) =>
    parseRawResponse(
      await rawExchange(port, `GET /${version}/pets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`),
    ),
  );
  await sameErrorBothWays(t, 'a malformed header', 400, 'invalid_request', async (version) =>
    parseRawResponse(await rawExchange(port, `GET /${version}/pets HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n`)),
  );
  // No request line to read a version from: answered as before v2.
  isError(t, parseRawResponse(await rawExchange(port, 'HELLO\r\n\r\n')), 400, 'invalid_request', 'no request line');
  const slowHeaders = parseRawResponse(await rawExchange(port, 'POST /v2/pets HTTP/1.1\r\nHost: x\r\n'));
  isError(t, slowHeaders, 408, 'request_timeout', 'headers too slow: the request line is not kept');

  // Outside every version's base path, as before v2; the documents under /v2 as v2 answers.
  isError(t, await api.request({ method: 'POST', url: '/healthz' }), 405, 'method_not_allowed', 'POST /healthz');
  isProblem(
    t,
    await api.request({ method: 'POST', url: '/v2/openapi.json' }),
    405,
    'method_not_allowed',
    'POST /v2/openapi.json',
  );
  isError(
    t,
    await api.request({ method: 'POST', url: '/v1/openapi.json' }),
    405,
    'method_not_allowed',
    'POST /v1/openapi.json',
  );
  api.app.stopBeingReady();
  isError(t, await api.app.inject({ method: 'GET', url: '/readyz' }), 503, 'service_unavailable', '/readyz');
});

t.test('429 and 500: a problem on /v2, an Error on /v1', async (t) => {
  const limited = await startApi(t, { rateLimit: { perMinute: 2, authFailuresPerMinute: 0 } });
  const list = (version: Version) => limited.request({ method: 'GET', url: `/${version}/pets`, headers: limited.auth });
  t.equal((await list('v2')).statusCode, 200);
  t.equal((await list('v1')).statusCode, 200);
  await sameErrorBothWays(t, 'over the limit', 429, 'rate_limited', list);

  const failing = await startApi(t, {
    storageSeenByServer: (storage): Storage => ({
      ...storage,
      pets: { ...storage.pets, list: () => Promise.reject(new Error('the disk is on fire')) },
    }),
  });
  await sameErrorBothWays(t, 'a fault', 500, 'internal_error', (version) =>
    failing.request({ method: 'GET', url: `/${version}/pets`, headers: failing.auth }),
  );
});

t.test('a shed request: a problem on /v2, an Error on /v1 and outside the versions', async (t) => {
  // Lists hold the event loop: the requests read in the turn after one has waited through it and,
  // with no burst allowed, are shed. Shedding is decided before storage, so this server is on a
  // SQLite file whatever the backend: its reads are synchronous, so the hold falls in the very turn
  // that read the request, which is the one the shedder times (a PostgreSQL read comes in a later one).
  const HOLD_MS = 150;
  let duringHold: (() => void) | undefined;
  const api = await startApi(t, {
    databaseUrl: join(temporaryDirectory(t), 'shed.db'),
    overload: { maxEventLoopDelayMs: 20, retryAfterSeconds: 1, sampleIntervalMs: 10, burstCpuMs: 0 },
    storageSeenByServer: (storage): Storage => ({
      ...storage,
      pets: {
        ...storage.pets,
        list: (query) => {
          duringHold?.();
          const end = performance.now() + HOLD_MS;
          while (performance.now() < end) {
            // held
          }
          return storage.pets.list(query);
        },
      },
    }),
  });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const get = (url: string) =>
    `GET ${url} HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\nConnection: close\r\n\r\n`;
  const paths = ['/v2/pets', '/v1/pets', '/v2/nothing-here', '/nothing-here'];
  const sockets = await Promise.all(paths.map(() => connected(port)));
  const answers = sockets.map(
    (socket) =>
      new Promise<ConformingResponse>((resolve) => {
        let received = '';
        socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
        socket.on('end', () => resolve(parseRawResponse(received)));
      }),
  );
  // Whatever ran long before (this process's set-up) is behind.
  await new Promise((resolve) => setTimeout(resolve, 200));
  // Written while the first list holds the loop (a socket write is tried at once): read in the turn after it.
  duringHold = () => {
    duringHold = undefined;
    sockets.forEach((socket, i) => socket.write(get(paths[i] ?? '')));
  };
  t.equal(parseRawResponse(await rawExchange(port, get('/v2/pets'))).statusCode, 200, 'the first is served');
  const [v2, v1, v2Unrouted, outside] = await Promise.all(answers);
  // The contract's checker takes an unknown path for a 404: only the operations' answers are checked.
  assertConforms('GET', '/v2/pets', v2 as ConformingResponse);
  assertConforms('GET', '/v1/pets', v1 as ConformingResponse);
  const problem = isProblem(t, v2 as ConformingResponse, 503, 'service_unavailable', 'shed /v2/pets');
  const error = isError(t, v1 as ConformingResponse, 503, 'service_unavailable', 'shed /v1/pets');
  t.equal(error.message, problem.detail);
  isProblem(t, v2Unrouted as ConformingResponse, 503, 'service_unavailable', 'shed under /v2, no operation');
  isError(t, outside as ConformingResponse, 503, 'service_unavailable', 'shed outside the versions');
  t.equal(v2?.headers['retry-after'], '1', 'with Retry-After');
});

/** The media type of the balancer's v1 errors, as its error files always gave it. */
const BALANCER_JSON = 'application/json';

/** A request through the balancer (HTTPS, the test certificate), its answer checked against its version's contract. */
function throughBalancer(origin: string, method: string, url: string, inContract = true): Promise<ObservedResponse> {
  return new Promise((resolve, reject) => {
    const sent = httpsRequest(
      `${origin}${url}`,
      { method, ca: readFileSync(TEST_CERT_FILE), headers: { authorization: 'Bearer psk_any', ...json } },
      (response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => {
          const answer = {
            statusCode: response.statusCode ?? 0,
            headers: response.headers,
            body,
          };
          try {
            if (inContract) assertConforms(method, url, answer);
            resolve(answer);
          } catch (error) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        });
      },
    );
    sent.on('error', reject);
    sent.end(method === 'POST' ? JSON.stringify({ name: 'Rex', categoryId: 1 }) : undefined);
  });
}

t.test("the balancer's own 503 and 504: a problem for /v2, an Error for /v1", { skip: haproxyMissing() }, async (t) => {
  const nobody = [`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`];
  const down = await startBalancer(t, nobody, { expect: 'DOWN' });
  await sameErrorBothWays(
    t,
    'no instance up',
    503,
    'service_unavailable',
    (version) => throughBalancer(down.origin, 'GET', `/${version}/pets`),
    BALANCER_JSON,
  );
  isError(
    t,
    await throughBalancer(down.origin, 'GET', '/healthz', false),
    503,
    'service_unavailable',
    'outside the versions',
    BALANCER_JSON,
  );

  // Ready, and then silent: the balancer gives up on it after PETSTORE_LB_SERVER_TIMEOUT.
  const ports = [await freePort(), await freePort()];
  for (const port of ports) {
    const silent = createServer((request, response) => {
      if (request.url === '/readyz') response.end('{"status":"ready"}');
    });
    await new Promise<void>((resolve) => silent.listen(port, '127.0.0.1', resolve));
    t.teardown(() => {
      silent.closeAllConnections();
      silent.close();
    });
  }
  const hung = await startBalancer(
    t,
    ports.map((port) => `127.0.0.1:${port}`),
    { env: { PETSTORE_LB_SERVER_TIMEOUT: '300ms' } },
  );
  // An unkeyed create, which the balancer does not send again.
  await sameErrorBothWays(
    t,
    'an instance that does not answer',
    504,
    'service_unavailable',
    // No operation declares a 504: the balancer's own, for an outcome unknown.
    (version) => throughBalancer(hung.origin, 'POST', `/${version}/pets`, false),
    BALANCER_JSON,
  );
});
