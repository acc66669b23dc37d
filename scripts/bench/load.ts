import autocannon from 'autocannon';
import { connect, type Socket } from 'node:net';

/** What loads of one server have gathered: one-second turns add up to one measurement. */
export interface Tally {
  seconds: number;
  /** Responses by HTTP status. */
  statuses: Record<string, number>;
  /** Socket errors, timeouts and requests never answered. */
  errors: number;
  latencies: number[];
}

export interface Measurement extends Omit<Tally, 'latencies'> {
  /** Responses a second. */
  rps: number;
  p99Ms: number;
  responses: number;
}

export const newTally = (): Tally => ({ seconds: 0, statuses: {}, errors: 0, latencies: [] });

function percentile(values: number[], fraction: number): number {
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? NaN;
}

export function measure({ seconds, statuses, errors, latencies }: Tally): Measurement {
  const responses = Object.values(statuses).reduce((sum, n) => sum + n, 0);
  const rps = seconds > 0 ? responses / seconds : 0;
  return { seconds, statuses, errors, rps, p99Ms: percentile(latencies, 0.99), responses };
}

const count = (statuses: Record<string, number>, status: string, n = 1) =>
  (statuses[status] = (statuses[status] ?? 0) + n);

export interface LoadOptions {
  origin: string;
  /** Sent in turn on each connection. */
  requests: autocannon.Request[];
  seconds: number;
  /** 50 unless said. */
  connections?: number;
  /** How long a request may take before it counts as failed: 10 s unless said. */
  timeoutSeconds?: number;
}

/**
 * A closed loop for a fixed time (autocannon), added to `tally`. Latencies are taken unrounded from
 * its response events (its histogram's 1 ms resolution is too coarse for a 1.2x comparison of a few
 * ms), leaving out each connection's first: all connections open at once, and that burst would set p99.
 */
export function applyLoad(
  { origin, requests, seconds, connections = 50, timeoutSeconds = 10 }: LoadOptions,
  tally = newTally(),
) {
  return new Promise<Tally>((resolve, reject) => {
    const instance = autocannon(
      { url: origin, requests, duration: seconds, connections, timeout: timeoutSeconds },
      (error, result) => {
        if (error !== null && error !== undefined) {
          reject(error instanceof Error ? error : new Error('autocannon failed', { cause: error }));
          return;
        }
        for (const [status, { count: n = 0 }] of Object.entries(result.statusCodeStats ?? {}))
          count(tally.statuses, status, n);
        tally.errors += result.errors + result.timeouts;
        tally.seconds += result.duration;
        resolve(tally);
      },
    );
    const connected = new Set<unknown>();
    instance.on('response', (client, _status, _bytes, milliseconds) => {
      if (connected.has(client)) tally.latencies.push(milliseconds);
      else connected.add(client);
    });
  });
}

export interface OpenLoopOptions {
  origin: string;
  /** Each request's bytes: HTTP/1.1, kept alive. */
  request: () => string;
  /** Requests a second, each sent when due whether or not earlier ones were answered. */
  rate: number;
  seconds: number;
  /**
   * At most this many, each opened when a request is due and none is free (a connection opened and
   * left without a request, Node closes after its headers timeout); past that, requests wait.
   */
  connections: number;
}

/** An open loop's measurement, with what the load generator itself cost and how late it sent. */
export interface OpenLoopMeasurement extends Measurement {
  /**
   * p99 of how late the generator wrote the requests it had a free connection for, past when each
   * was due: its own lag (its timer, its CPU), which counts in every latency it reports.
   */
  sendLagP99Ms: number;
  /** This process's CPU time (user + system) per request sent, in µs. */
  generatorCpuUs: number;
  /** p99 of the requests served that were due in the second half of the run: the load sustained. */
  secondHalfP99Ms: number;
}

/** How long after the last request is due the answers are awaited; what is still out then failed. */
const OPEN_LOOP_GRACE_MS = 5_000;

/**
 * An open loop: the i-th request is due at i / rate seconds and its latency counts from then, so a
 * wait for a connection counts too. autocannon's `overallRate` is not one: each connection sends
 * its share of a second as fast as it is answered, then waits for the next second, so every second
 * begins with all connections sending at once and a quick 503 only brings the next request sooner.
 * Latencies are kept for 2xx answers only (the requests served); errors are requests never answered.
 */
export async function openLoop({
  origin,
  request,
  rate,
  seconds,
  connections,
}: OpenLoopOptions): Promise<OpenLoopMeasurement> {
  const { hostname, port } = new URL(origin);
  const tally = newTally();
  /** Due times of requests waiting for a connection. */
  const waiting: number[] = [];
  const opened: Socket[] = [];
  const idle: Socket[] = [];
  const inFlight = new Map<Socket, { due: number; received: string }>();
  const sendLags: number[] = [];
  const secondHalf: number[] = [];
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  const halfway = start + (seconds * 1000) / 2;
  const total = Math.round(rate * seconds);
  const send = (socket: Socket, due: number) => {
    inFlight.set(socket, { due, received: '' });
    socket.write(request());
  };
  const answer = (socket: Socket, chunk: string) => {
    const out = inFlight.get(socket);
    if (out === undefined) return;
    out.received += chunk;
    const headEnd = out.received.indexOf('\r\n\r\n');
    const length = /\r\ncontent-length: *(\d+)/i.exec(out.received.slice(0, Math.max(0, headEnd)))?.[1];
    if (headEnd === -1 || out.received.length < headEnd + 4 + Number(length ?? 0)) return;
    const status = out.received.slice(9, 12);
    count(tally.statuses, status);
    if (status.startsWith('2')) {
      const latency = performance.now() - out.due;
      tally.latencies.push(latency);
      if (out.due >= halfway) secondHalf.push(latency);
    }
    inFlight.delete(socket);
    // A server (or balancer) that says it closes the connection is not sent another request on it.
    if (/\r\nconnection: *close\r\n/i.test(out.received.slice(0, headEnd + 2))) {
      socket.destroy();
      sendWaiting();
      return;
    }
    const next = waiting.shift();
    if (next === undefined) idle.push(socket);
    else send(socket, next);
  };
  /** Requests waiting for a connection, sent while one can be had (one closed makes room for another). */
  const sendWaiting = () => {
    while (waiting.length > 0) {
      const socket = free();
      if (socket === undefined) return;
      send(socket, waiting.shift() as number);
    }
  };
  const free = () => {
    if (idle.length > 0 || opened.length === connections) return idle.pop();
    // Written before it connects, a request waits in the socket until it does.
    const socket = connect(Number(port), hostname).setNoDelay(true).setEncoding('latin1');
    socket.on('data', (chunk: string) => answer(socket, chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      // A request in flight on it is never answered: counted as failed.
      inFlight.delete(socket);
      for (const list of [idle, opened]) if (list.includes(socket)) list.splice(list.indexOf(socket), 1);
      sendWaiting();
    });
    opened.push(socket);
    return socket;
  };

  const dueAt = (index: number) => start + (index * 1000) / rate;
  let sent = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      for (; sent < total && dueAt(sent) <= now; sent += 1) {
        const socket = free();
        if (socket === undefined) waiting.push(dueAt(sent));
        else {
          sendLags.push(now - dueAt(sent));
          send(socket, dueAt(sent));
        }
      }
      if (sent === total && (inFlight.size === 0 || now - dueAt(total) > OPEN_LOOP_GRACE_MS)) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  const { user, system } = process.cpuUsage(cpuBefore);
  for (const socket of opened) socket.destroy();
  tally.seconds = (performance.now() - start) / 1000;
  const measured = measure(tally);
  return {
    ...measured,
    errors: total - measured.responses,
    sendLagP99Ms: percentile(sendLags, 0.99),
    generatorCpuUs: total > 0 ? (user + system) / total : NaN,
    secondHalfP99Ms: percentile(secondHalf, 0.99),
  };
}

/**
 * `count` requests at once, as a batch import with some concurrency sends them: each on a
 * connection of its own, all opened first, then all written in one go, so that they reach the
 * server together. Each request should ask to close its connection (`Connection: close`).
 * Resolves with each answer's raw text, in order; an answer cut short is whatever arrived.
 */
export async function burst(origin: string, request: (index: number) => string, count: number): Promise<string[]> {
  const { hostname, port } = new URL(origin);
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect(Number(port), hostname, () => resolve(socket));
          socket.on('error', reject);
        }),
    ),
  );
  const answers = sockets.map(
    (socket) =>
      new Promise<string>((resolve) => {
        let received = '';
        socket.setEncoding('latin1');
        socket.on('data', (chunk: string) => (received += chunk));
        socket.on('close', () => resolve(received));
      }),
  );
  sockets.forEach((socket, index) => socket.write(request(index)));
  return Promise.all(answers);
}
