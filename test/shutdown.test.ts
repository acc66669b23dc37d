import { connect, type Socket } from 'node:net';
import t from 'tap';
import { conformingFetch } from './helpers/api.js';
import { newDatabase } from './helpers/backend.js';
import { databaseWithKey, startServerProcess } from './helpers/process.js';

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

function responseOf(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('close', () => resolve(received));
  });
}

t.test('SIGTERM lets an in-flight request finish, refuses new connections, and exits cleanly', async (t) => {
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  const port = Number(new URL(server.baseUrl).port);

  const body = JSON.stringify({ name: 'In flight', categoryId: 4 });
  const inFlight = await open(port);
  const answer = responseOf(inFlight);
  inFlight.write(
    `POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n` +
      body.slice(0, 10),
  );
  await new Promise((resolve) => setTimeout(resolve, 200));
  const exited = server.stop('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 300));

  await t.rejects(open(port), { code: 'ECONNREFUSED' }, 'new connections are refused while draining');
  inFlight.write(body.slice(10));
  const response = await answer;
  t.match(response, /^HTTP\/1\.1 201 /, 'the in-flight request completes');
  t.match(response, /"name":"In flight"/);
  t.equal(await exited, 0, 'the process exits 0 after closing the database');
  t.match(server.output(), /"msg":"shutting down"/);
  t.match(server.output(), /"msg":"stopped: requests finished, database closed"/, 'and says when it has stopped');

  const restarted = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  const listed = await conformingFetch(
    new Request(`${restarted.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } }),
  );
  t.match(await listed.text(), /In flight/, 'and what it wrote is stored');
  await restarted.stop();
});

t.test('SIGTERM is not held up by a client that ignores an error answer and keeps its end open', async (t) => {
  const databaseUrl = await newDatabase(t);
  await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl });
  const port = Number(new URL(server.baseUrl).port);
  const stubborn = connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => stubborn.write('HELLO\r\n\r\n'));
  t.teardown(() => stubborn.destroy());
  stubborn.on('error', () => undefined);
  const answer = await new Promise<string>((resolve) => {
    let received = '';
    stubborn.on('data', (chunk) => (received += chunk.toString()));
    stubborn.once('end', () => resolve(received));
  });
  t.match(answer, /^HTTP\/1\.1 400 /, 'the client got its answer and still keeps its end open');
  t.equal(await server.stop('SIGTERM'), 0, 'the process exits 0 all the same');
});

t.test(
  'a request still open past SHUTDOWN_TIMEOUT_MS does not hold the process: it exits 1 and says why',
  async (t) => {
    const databaseUrl = await newDatabase(t);
    const key = await databaseWithKey(databaseUrl);
    const server = await startServerProcess(t, { DATABASE_URL: databaseUrl, SHUTDOWN_TIMEOUT_MS: '300' });
    const port = Number(new URL(server.baseUrl).port);
    // A body announced and never sent: the request stays open for REQUEST_TIMEOUT_MS (10 s).
    const stuck = await open(port);
    t.teardown(() => stuck.destroy());
    stuck.on('error', () => undefined);
    stuck.write(
      `POST /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"name":',
    );
    await new Promise((resolve) => setTimeout(resolve, 200));
    t.equal(await server.stop('SIGTERM'), 1, 'the process exits 1: it stopped with a request unfinished');
    t.match(server.output(), /"msg":"requests were still open past SHUTDOWN_TIMEOUT_MS: exiting without them"/);
    t.notMatch(server.output(), /"msg":"stopped: requests finished/);
  },
);

t.test('with SHUTDOWN_DELAY_MS, a stopping instance is not ready but serves until the delay ends', async (t) => {
  const databaseUrl = await newDatabase(t);
  const key = await databaseWithKey(databaseUrl);
  const server = await startServerProcess(t, { DATABASE_URL: databaseUrl, SHUTDOWN_DELAY_MS: '3000' });
  const origin = server.baseUrl.replace(/\/v1$/, '');
  // /readyz is served outside the contract (decisions.md); the API's answers are checked against it.
  const readiness = () => fetch(`${origin}/readyz`);
  const listPets = () =>
    conformingFetch(new Request(`${server.baseUrl}/pets`, { headers: { authorization: `Bearer ${key}` } }));
  t.equal((await readiness()).status, 200, 'ready before the signal');

  const signalled = Date.now();
  const exited = server.stop('SIGTERM');
  while (!server.output().includes(`"msg":"shutting down"`)) await new Promise((resolve) => setTimeout(resolve, 20));
  const notReady = await readiness();
  t.equal(notReady.status, 503, '/readyz answers 503 at once: a balancer stops sending');
  t.equal(notReady.headers.get('retry-after'), '1');
  t.match(await notReady.json(), { code: 'service_unavailable', status: 503 });
  t.equal((await listPets()).status, 200, 'requests are still served meanwhile');
  const fresh = await open(Number(new URL(origin).port));
  t.pass('and new connections accepted');
  fresh.destroy();
  t.equal(await exited, 0, 'then it closes and exits 0');
  t.ok(Date.now() - signalled >= 3000, 'not before the delay');
  t.match(server.output(), /"delayMs":3000,"msg":"shutting down"/);
});
