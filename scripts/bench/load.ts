import autocannon from 'autocannon';
import { connect, type Socket } from 'node:net';

export interface LoadOptions {
  origin: string;
  /** Sent in turn on each connection. */
  requests: autocannon.Request[];
  seconds: number;
  connections: number;
  /** Collects the latencies (ms) here too, to summarise several loads as one. */
  latencies?: number[];
  /** Only the latencies of 2xx responses (the requests served, not shed). */
  servedOnly?: boolean;
}

export interface Measurement {
  /** Responses a second. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Socket errors and timeouts. */
  errors: number;
  /** Responses by HTTP status. */
  statuses: Record<string, number>;
  responses: number;
  seconds: number;
}

function percentiles(latencies: readonly number[]): Pick<Measurement, 'p50Ms' | 'p99Ms'> {
  const sorted = Float64Array.from(latencies).sort();
  const at = (fraction: number) => sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? NaN;
  return { p50Ms: at(0.5), p99Ms: at(0.99) };
}

/** Several loads of the same requests on one server as one measurement; `latencies` holds all of theirs. */
export function combineLoads(parts: readonly Measurement[], latencies: readonly number[]): Measurement {
  const statuses: Record<string, number> = {};
  for (const part of parts) {
    for (const [status, count] of Object.entries(part.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
  }
  const sum = (pick: (part: Measurement) => number) => parts.reduce((total, part) => total + pick(part), 0);
  const [seconds, responses] = [sum((part) => part.seconds), sum((part) => part.responses)];
  return {
    rps: seconds > 0 ? responses / seconds : 0,
    ...percentiles(latencies),
    errors: sum((part) => part.errors),
    statuses,
    responses,
    seconds,
  };
}

/**
 * Runs autocannon for a fixed time. Latencies are taken unrounded from its response events (its
 * histogram's 1 ms resolution is too coarse for a 1.2x comparison of a few ms), leaving out each
 * connection's first: all connections open at once, and that burst would set p99.
 */
export function applyLoad({ origin, requests, seconds, connections, latencies = [], servedOnly = false }: LoadOptions) {
  const start = latencies.length;
  return new Promise<Measurement>((resolve, reject) => {
    const instance = autocannon({ url: origin, requests, duration: seconds, connections }, (error, result) => {
      if (error !== null && error !== undefined) {
        reject(error instanceof Error ? error : new Error('autocannon failed', { cause: error }));
        return;
      }
      const statuses = Object.fromEntries(
        Object.entries(result.statusCodeStats ?? {}).map(([status, { count = 0 }]) => [status, count]),
      );
      const responses = Object.values(statuses).reduce((sum, n) => sum + n, 0);
      const errors = result.errors + result.timeouts;
      resolve({
        rps: responses / result.duration,
        ...percentiles(latencies.slice(start)),
        errors,
        statuses,
        responses,
        seconds: result.duration,
      });
    });
    const connected = new Set<unknown>();
    instance.on('response', (client, status, _bytes, milliseconds) => {
      if (!connected.has(client)) connected.add(client);
      else if (!servedOnly || (status >= 200 && status < 300)) latencies.push(milliseconds);
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

/** How long after the last request is due the answers are awaited; what is still out then failed. */
const OPEN_LOOP_GRACE_MS = 5_000;

/**
 * An open loop: the i-th request is due at i / rate seconds and its latency counts from then, so a
 * wait for a connection counts too. autocannon's `overallRate` is not one: each connection sends
 * its share of a second as fast as it is answered, then waits for the next second, so every second
 * begins with all connections sending at once and a quick 503 only brings the next request sooner.
 * Latencies are kept for 2xx answers only (the requests served); errors are requests never answered.
 */
export async function openLoop({ origin, request, rate, seconds, connections }: OpenLoopOptions): Promise<Measurement> {
  const { hostname, port } = new URL(origin);
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  /** Due times of requests waiting for a connection. */
  const waiting: number[] = [];
  const opened: Socket[] = [];
  const idle: Socket[] = [];
  const dueOf = new Map<Socket, { due: number; received: string }>();
  let answered = 0;
  const send = (socket: Socket, due: number) => {
    dueOf.set(socket, { due, received: '' });
    socket.write(request());
  };
  const answer = (socket: Socket, chunk: string) => {
    const out = dueOf.get(socket);
    if (out === undefined) return;
    out.received += chunk;
    const headEnd = out.received.indexOf('\r\n\r\n');
    const length = /\r\ncontent-length: *(\d+)/i.exec(out.received.slice(0, Math.max(0, headEnd)))?.[1];
    if (headEnd === -1 || out.received.length < headEnd + 4 + Number(length ?? 0)) return;
    const status = out.received.slice(9, 12);
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status.startsWith('2')) latencies.push(performance.now() - out.due);
    answered += 1;
    dueOf.delete(socket);
    const next = waiting.shift();
    if (next === undefined) idle.push(socket);
    else send(socket, next);
  };
  const free = () => {
    if (idle.length > 0 || opened.length === connections) return idle.pop();
    // Written before it connects, a request waits in the socket until it does.
    const socket = connect(Number(port), hostname).setNoDelay(true).setEncoding('latin1');
    socket.on('data', (chunk: string) => answer(socket, chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      if (!dueOf.delete(socket)) idle.splice(idle.indexOf(socket), 1);
    });
    opened.push(socket);
    return socket;
  };

  const start = performance.now();
  const total = Math.round(rate * seconds);
  const dueAt = (index: number) => start + (index * 1000) / rate;
  let sent = 0;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = performance.now();
      for (; sent < total && dueAt(sent) <= now; sent += 1) {
        const socket = free();
        if (socket === undefined) waiting.push(dueAt(sent));
        else send(socket, dueAt(sent));
      }
      if (sent === total && (dueOf.size === 0 || now - dueAt(total) > OPEN_LOOP_GRACE_MS)) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  });
  for (const socket of opened) socket.destroy();
  const elapsed = (performance.now() - start) / 1000;
  return {
    rps: answered / elapsed,
    ...percentiles(latencies),
    errors: total - answered,
    statuses,
    responses: answered,
    seconds: elapsed,
  };
}
