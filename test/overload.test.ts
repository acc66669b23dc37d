import { connect, type Socket } from 'node:net';
import t from 'tap';
import type { Storage } from '../src/storage/types.js';
import { type ConformingResponse, parseRawResponse, startApi, type TapTest, type TestApi } from './helpers/api.js';
import { assertConforms } from './helpers/contract.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// Well above the lag this shared machine gives an idle loop (up to ~20 ms seen).
const LIMIT_MS = 50;
const HOLD_MS = 120;
const STALL_MS = 150;

/** Holds the event loop for `ms`, as a request doing heavy work would. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy
  }
}

/** A server whose reads of one pet hold its event loop for `holdMs`: a few requests saturate it. */
async function slowServer(t: TapTest, maxEventLoopDelayMs: number, holdMs: number, onHold?: () => void) {
  const api = await startApi(t, {
    metrics: true,
    overload: { maxEventLoopDelayMs, retryAfterSeconds: 3, sampleIntervalMs: 10 },
    storageSeenByServer: (storage): Storage => ({
      ...storage,
      pets: {
        ...storage.pets,
        get: (id) => {
          onHold?.();
          busy(holdMs);
          return storage.pets.get(id);
        },
      },
    }),
  });
  const pet = await api.createPet({ name: 'Rex', categoryId: 1 });
  const address = await api.app.listen({ host: '127.0.0.1', port: 0 });
  const port = Number(new URL(address).port);
  return { api, port, getPet: `/v1/pets/${pet.id}` };
}

function connections(api: TestApi): Promise<number> {
  return new Promise((resolve, reject) => {
    api.app.server.getConnections((error, count) => (error === null ? resolve(count) : reject(error)));
  });
}

function connected(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
  });
}

/**
 * Sends one request on each of `paths`' connections in the same instant, so that the server reads
 * them all in one turn of its event loop; resolves with each answer, checked against the contract.
 */
async function together(
  api: TestApi,
  port: number,
  paths: string[],
  { afterAStall = false } = {},
): Promise<ConformingResponse[]> {
  const sockets = await Promise.all(paths.map(() => connected(port)));
  // Once the server has accepted them all: it reads what arrives on all of them in its next turn.
  while ((await connections(api)) < paths.length) await sleep(5);
  // A few quiet turns: whatever ran long before (this process compiling, its set-up) is behind.
  await sleep(100);
  const answers = sockets.map(
    (socket) =>
      new Promise<string>((resolve) => {
        let received = '';
        socket.on('data', (chunk) => (received += chunk.toString()));
        socket.on('end', () => resolve(received));
      }),
  );
  if (afterAStall) {
    // A turn of the shared event loop runs long; the requests go out in the next, after the
    // server's timer has found itself late.
    busy(STALL_MS);
    await sleep(1);
  }
  sockets.forEach((socket, i) =>
    socket.write(
      `GET ${paths[i]} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${api.key}\r\nConnection: close\r\n\r\n`,
    ),
  );
  return (await Promise.all(answers)).map((raw, i) => {
    const response = parseRawResponse(raw);
    // /healthz and /readyz are outside the contract.
    if (paths[i]?.startsWith('/v1/') === true) assertConforms('GET', paths[i] ?? '', response);
    return response;
  });
}

t.test('one long loop turn sheds nothing: a single stall is not saturation', async (t) => {
  const { api, port, getPet } = await slowServer(t, LIMIT_MS, HOLD_MS);
  const answers = await together(api, port, [getPet, getPet, getPet]);
  t.same(
    answers.map((answer) => answer.statusCode),
    [200, 200, 200],
  );
});

t.test(
  'a request read late in a long turn after another is shed with a 503; /readyz says so; it recovers',
  async (t) => {
    const { api, port, getPet } = await slowServer(t, LIMIT_MS, HOLD_MS);
    // After a stall, the first getPet read is served and holds the loop: those read after it in
    // the same turn have waited past the limit, and are shed at once. /healthz is answered.
    const answers = await together(api, port, [getPet, getPet, getPet, '/healthz'], { afterAStall: true });
    const statuses = answers.map((answer) => answer.statusCode);
    t.equal(
      statuses.filter((status) => status === 200).length,
      2,
      `one getPet served, and /healthz: ${statuses.join()}`,
    );
    t.equal(statuses.filter((status) => status === 503).length, 2, 'the getPets read after the slow one: shed');
    const shed = answers.find((answer) => answer.statusCode === 503);
    t.same(shed?.json(), {
      code: 'service_unavailable',
      message: 'The server is overloaded; retry shortly',
      status: 503,
    });
    t.equal(shed?.headers['retry-after'], '3');
    t.equal(shed?.headers['cache-control'], 'no-store');
    t.equal(shed?.headers['x-content-type-options'], 'nosniff');
    t.match(shed?.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'an id of its own, as any answer has');

    const ready = await api.app.inject({ method: 'GET', url: '/readyz' });
    t.equal(ready.statusCode, 503, '/readyz tells the load balancer to send no more');
    t.equal(ready.headers['retry-after'], '3');
    t.equal((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200, '/healthz: the process is up');
    const text = await api.metrics?.registry.metrics();
    t.match(text, /petstore_http_rejections_total\{cause="overload"\} 2\b/, 'each shed request is counted');
    t.match(text, /petstore_http_requests_total\{method="GET",operation="shed",status="503"\} 2\b/);

    // A second without shedding ends the episode: served, and ready, again.
    await sleep(1_200);
    const [served] = await together(api, port, [getPet]);
    t.equal(served?.statusCode, 200, 'one request at a time is served');
    t.equal((await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready again');
  },
);

t.test('during an episode, a request read in the turn after a long one has waited through it: shed', async (t) => {
  let duringHold: (() => void) | undefined;
  const { api, port, getPet } = await slowServer(t, LIMIT_MS, HOLD_MS, () => duringHold?.());
  const opening = await together(api, port, [getPet, getPet, getPet], { afterAStall: true });
  t.ok(
    opening.some((answer) => answer.statusCode === 503),
    'an episode begins',
  );

  const [first, second] = await Promise.all([connected(port), connected(port)]);
  const answers = [first, second].map(
    (socket) =>
      new Promise<ConformingResponse>((resolve) => {
        let received = '';
        socket.on('data', (chunk) => (received += chunk.toString()));
        socket.on('end', () => resolve(parseRawResponse(received)));
      }),
  );
  const request = `GET ${getPet} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${api.key}\r\nConnection: close\r\n\r\n`;
  // The second request is sent while the first holds the loop (a socket write is tried at once):
  // the server reads it in the next turn, as soon as it comes round. It waited the whole first
  // turn; the loop's own timer, due again at the start of that next turn, would find nothing late.
  duringHold = () => {
    duringHold = undefined;
    second.write(request);
  };
  first.write(request);
  const [served, shed] = await Promise.all(answers);
  t.equal(served?.statusCode, 200);
  t.equal(shed?.statusCode, 503);
  assertConforms('GET', getPet, shed as ConformingResponse);
});

t.test('OVERLOAD_MAX_EVENT_LOOP_DELAY_MS=0: never shed', async (t) => {
  const { api, port, getPet } = await slowServer(t, 0, HOLD_MS);
  const answers = await together(api, port, [getPet, getPet, getPet], { afterAStall: true });
  t.same(
    answers.map((answer) => answer.statusCode),
    [200, 200, 200],
  );
  t.equal((await api.app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
});
