import autocannon from 'autocannon';

export interface LoadOptions {
  origin: string;
  /** Sent in turn on each connection. */
  requests: autocannon.Request[];
  seconds: number;
  connections: number;
  /** Requests a second over all connections (an open loop); unset: as fast as the server answers. */
  rate?: number;
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
export function applyLoad({
  origin,
  requests,
  seconds,
  connections,
  rate,
  latencies = [],
  servedOnly = false,
}: LoadOptions) {
  const start = latencies.length;
  return new Promise<Measurement>((resolve, reject) => {
    const options = { url: origin, requests, duration: seconds, connections };
    const instance = autocannon(rate === undefined ? options : { ...options, overallRate: rate }, (error, result) => {
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
