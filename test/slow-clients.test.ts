import { connect, type Server, type Socket } from 'node:net';
import t from 'tap';
import { conformingFetch, listen, parseRawResponse, startApi, type Teardown } from './helpers/api.js';
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
  t.same((await api.storage.pets.list({ limit: 10 })).pets, [], 'nothing was stored');
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
    t.equal(response.headers.connection, 'close', `${what}: the answer says the connection closes`);
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
