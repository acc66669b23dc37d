import { connect, type Server, type Socket } from 'node:net';
import t from 'tap';
import { conformingFetch, listen, parseRawResponse, startApi, type Teardown } from './helpers/api.js';
import { newDatabase } from './helpers/backend.js';
import { databaseWithKey, startServerProcess } from './helpers/process.js';
import { haproxyMissing, startBalancer } from './helpers/haproxy.js';
import { freePort } from '../scripts/local-servers.js';
import { assertConforms } from './helpers/contract.js';

interface RawExchange {
  socket: Socket;
  /** Everything the server sent until it closed the connection. */
  closed: Promise<{ received: string; afterMs: number }>;
}

function rawConnection(port: number): Promise<RawExchange> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => {
      let received = '';
      socket.on('data', (chunk) => (received += chunk.toString()));
      const closed = new Promise<{ received: string; afterMs: number }>((done) =>
        socket.on('close', () => done({ received, afterMs: Date.now() - started })),
      );
      resolve({ socket, closed });
    });
    socket.on('error', reject);
  });
}

t.test('a client sending its body a byte a second is cut off; others are served meanwhile', async (t) => {
  const api = await startApi(t, { connections: { requestTimeoutMs: 1500, maxConnections: 100 } });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);

  const slow = await rawConnection(port);
  const body = JSON.stringify({ name: 'Sloth', categoryId: 1 });
  slow.socket.write(
    `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  let sent = 0;
  const drip = setInterval(() => {
    if (!slow.socket.destroyed && sent < body.length) slow.socket.write(body[sent++] ?? '');
  }, 1000);
  t.teardown(() => clearInterval(drip));

  const others = await Promise.all(
    Array.from({ length: 5 }, () =>
      conformingFetch(new Request(`${origin}/v1/pets`, { headers: api.auth })).then((response) => response.status),
    ),
  );
  t.same(others, [200, 200, 200, 200, 200], 'other clients are served while the slow one drips');

  const { received, afterMs } = await slow.closed;
  clearInterval(drip);
  t.ok(afterMs < 5000, `cut off after ${afterMs} ms (timeout 1500 ms)`);
  t.ok(sent < body.length, 'before its body arrived');
  const response = parseRawResponse(received);
  assertConforms('POST', '/v1/pets', response);
  t.equal(response.statusCode, 408);
  t.same(response.json(), {
    code: 'request_timeout',
    message: 'The request took too long to arrive',
    status: 408,
  });
  t.same((await api.storage.pets.list({ limit: 10 })).items, [], 'nothing was stored');
});

t.test('a body declared over 16 KiB is refused before it is sent', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const raw = await rawConnection(Number(new URL(origin).port));
  raw.socket.write(
    `POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: ${api.auth.authorization}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 104857600\r\nConnection: close\r\n\r\n{"name":',
  );
  const { received, afterMs } = await raw.closed;
  const response = parseRawResponse(received);
  assertConforms('POST', '/v1/pets', response);
  t.equal(response.statusCode, 413, 'answered from the Content-Length alone');
  t.equal(response.json<{ code: string }>().code, 'payload_too_large');
  t.ok(afterMs < 3000, `without waiting for 100 MiB (${afterMs} ms)`);
});

t.test('connections beyond MAX_CONNECTIONS are refused and the server keeps serving', async (t) => {
  const api = await startApi(t, { connections: { requestTimeoutMs: 10_000, maxConnections: 3 } });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const held = await Promise.all([rawConnection(port), rawConnection(port), rawConnection(port)]);
  const extra = await rawConnection(port);
  const { received } = await extra.closed;
  t.equal(received, '', 'the fourth connection is closed at once');
  for (const connection of held) connection.socket.destroy();
  await Promise.all(held.map((connection) => connection.closed));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const after = await conformingFetch(new Request(`${origin}/v1/pets`, { headers: api.auth }));
  t.equal(after.status, 200, 'served again once connections are free');
});

/** A client that keeps its end open whatever it is told; `answer` is what came before the server's end. */
function stubbornClient(t: Teardown, port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => socket.write(request));
    t.teardown(() => socket.destroy());
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.once('end', () => resolve(received));
    socket.once('error', reject);
  });
}

function openConnections(server: Server): Promise<number> {
  return new Promise((resolve, reject) =>
    server.getConnections((error, count) => (error === null ? resolve(count) : reject(error))),
  );
}

t.test('a client that ignores an error answer and keeps its end open does not keep the connection', async (t) => {
  const api = await startApi(t, { connections: { requestTimeoutMs: 1000, maxConnections: 4 } });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  const bodyNeverSent =
    'POST /v1/pets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{"n';
  const stubborn = [
    { what: 'malformed', request: 'HELLO\r\n\r\n', code: 'invalid_request', status: 400 },
    {
      what: 'headers too large',
      request: `GET /v1/pets HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
      code: 'headers_too_large',
      status: 431,
    },
    {
      what: 'headers too slow',
      request: 'POST /v1/pets HTTP/1.1\r\nHost: x\r\n',
      code: 'request_timeout',
      status: 408,
    },
    { what: 'no key, the body still to come', request: bodyNeverSent, code: 'unauthorized', status: 401 },
  ];
  const answers = await Promise.all(stubborn.map(({ request }) => stubbornClient(t, port, request)));
  for (const [index, { what, code, status }] of stubborn.entries()) {
    const response = parseRawResponse(answers[index] ?? '');
    if (status === 408 || status === 401) assertConforms('POST', '/v1/pets', response);
    t.equal(response.statusCode, status, what);
    t.equal(response.json<{ code: string }>().code, code, `${what}: an Error body`);
    // A refusal from the headers ends its connection after the answer without saying so: with
    // `Connection: close` Node would close at once (closeAfterAnswer in src/http/lingering-close.ts).
    if (status !== 401) t.equal(response.headers.connection, 'close', `${what}: the answer says the connection closes`);
    t.equal(response.headers['x-content-type-options'], 'nosniff', `${what}: nosniff`);
    t.match(response.headers['x-request-id'], /\S/, `${what}: a request id`);
  }

  // The server closes each connection itself, after a short wait for the client to read its answer.
  const deadline = Date.now() + 10_000;
  let open = await openConnections(api.app.server);
  while (open > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    open = await openConnections(api.app.server);
  }
  t.equal(open, 0, 'no connection is left open, though every client kept its end open');
  const after = await conformingFetch(new Request(`${origin}/v1/pets`, { headers: api.auth }));
  t.equal(after.status, 200, 'MAX_CONNECTIONS is not used up by them');
});

/** Writes a whole request before reading anything, as Node's http and Python's http.client do. */
function sendThenRead(port: number, head: string, bodyBytes: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(head);
      socket.end(Buffer.alloc(bodyBytes, 'x'));
    });
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('close', () => resolve(received));
    // A reset (EPIPE, ECONNRESET) ends the exchange with whatever arrived before it.
    socket.on('error', () => undefined);
  });
}

t.test('a client still sending a large body gets the refusal decided from its headers', async (t) => {
  // A server process of its own: in this process the client would read the answer before the reset.
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl, AUTH_FAILURES_PER_MINUTE: '0' });
  const port = Number(new URL(server.baseUrl).port);
  const size = 8 * 1024 * 1024;
  const post = (path: string, headers: string) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`;
  const cases = [
    { what: 'no key', head: post('/v1/pets', ''), status: 401 },
    { what: 'no such path', head: post('/v1/nope', ''), status: 404 },
    { what: 'over the limit', head: post('/v1/pets', `Authorization: Bearer ${key}\r\n`), status: 413 },
  ];
  for (const { what, head, status } of cases) {
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const response = parseRawResponse(await sendThenRead(port, head, size));
      if (status !== 404) assertConforms('POST', '/v1/pets', response);
      t.equal(response.statusCode, status, `${what} (${attempt})`);
    }
  }
  const listed = await conformingFetch(
    new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } }),
  );
  t.same(await listed.json(), [], 'nothing was stored');
});

/** Writes a whole request, half-closes, and reads the answer, as `nc -N` and some HTTP/1.0 tools do. */
function sendHalfCloseThenRead(port: number, request: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => socket.end(request));
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('close', () => resolve(received));
    socket.on('error', () => undefined);
  });
}

// The balancer's job, not the instance's (docs/deploy.md): an instance ends a connection its
// client half-closed, as Node does by default, and HAProxy, in front, answers such a client.
t.test(
  'through the balancer, a client that half-closes after its request gets its answer',
  { skip: haproxyMissing() },
  async (t) => {
    const databaseUrl = await newDatabase(t);
    const key = await databaseWithKey(databaseUrl);
    const server = await startServerProcess(t, { DATABASE_URL: databaseUrl });
    const instance = new URL(server.baseUrl).host;
    const port = await freePort();
    await startBalancer(t, [instance, instance], { env: { PETSTORE_LB_HTTP_ADDRESS: `127.0.0.1:${port}` } });
    const request = (path: string) =>
      `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`;
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const listed = parseRawResponse(await sendHalfCloseThenRead(port, request('/v1/pets')));
      assertConforms('GET', '/v1/pets', listed);
      t.equal(listed.statusCode, 200, `answered (${attempt})`);
    }
  },
);

t.test('a refused request whose small body has arrived keeps its connection', async (t) => {
  const api = await startApi(t);
  const { origin } = await listen(t, api);
  const body = '{"name":"Rex","categoryId":1}';
  const refused = (path: string) =>
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  for (const [what, request] of [
    ['401', refused('/v1/pets')],
    ['404', refused('/v1/nope')],
  ] as const) {
    const raw = await rawConnection(Number(new URL(origin).port));
    raw.socket.write(`${request}GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const { received } = await raw.closed;
    const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => match[1]);
    t.same(statuses, [what, '200'], `after the ${what}, the next request on the connection is answered`);
  }
});

t.test('an answer written before its body arrived is the only one, even if the body never comes', async (t) => {
  const api = await startApi(t, { connections: { requestTimeoutMs: 800, maxConnections: 100 } });
  const { origin } = await listen(t, api);
  const port = Number(new URL(origin).port);
  // A small body is awaited and dropped to keep the connection; here only part of it comes.
  const cases: [string, string, number][] = [
    ['POST', '/v1/pets', 401], // refused from its headers
    ['GET', '/healthz', 200], // served without reading a body
  ];
  for (const [method, path, status] of cases) {
    const stalled = await rawConnection(port);
    stalled.socket.write(
      `${method} ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n{"name":`,
    );
    const { received, afterMs } = await stalled.closed;
    const answers = received.match(/^HTTP\/1\.1 \d{3}/gm) ?? [];
    t.same(answers, [`HTTP/1.1 ${status}`], `${method} ${path}: one answer, no 408 for the same request`);
    t.ok(afterMs < 5000, `${method} ${path}: closed once the body is overdue (${afterMs} ms, timeout 800 ms)`);
    if (path.startsWith('/v1')) assertConforms(method, path, parseRawResponse(received));
  }
});
