import autocannon from 'autocannon';

export interface LoadOptions {
  origin: string;
  /** Sent in turn on each connection. */
  requests: autocannon.Request[];
  seconds: number;
  connections: number;
  /** Requests a second over all connections; unset: as fast as the server answers. */
  rate?: number;
  /** Also collects the latencies (ms) here, to summarise several loads as one. */
  latencies?: number[];
  /** Only the latencies of 2xx responses (the requests that were served, not shed). */
  servedOnly?: boolean;
}

export interface Measurement {
  /** Responses a second over the run. */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Connection errors and timeouts. */
  errors: number;
  non2xx: number;
  /** Responses by HTTP status. */
  statuses: Record<string, number>;
  /** All responses, whatever their status. */
  responses: number;
  /** How long the load ran. */
  seconds: number;
}

/** The value below which `fraction` of the sorted values lie. */
function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN;
}

function latencyPercentiles(latencies: readonly number[]): Pick<Measurement, 'p50Ms' | 'p99Ms'> {
  const sorted = Float64Array.from(latencies).sort();
  return { p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
}

/** Several loads of the same requests on the same server as one measurement; `latencies` holds all of theirs. */
export function combineLoads(parts: readonly Measurement[], latencies: readonly number[]): Measurement {
  const sum = (of: (part: Measurement) => number) => parts.reduce((total, part) => total + of(part), 0);
  const statuses: Record<string, number> = {};
  for (const part of parts) {
    for (const [status, count] of Object.entries(part.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
  }
  const seconds = sum((part) => part.seconds);
  const responses = sum((part) => part.responses);
  return {
    rps: seconds > 0 ? responses / seconds : 0,
    ...latencyPercentiles(latencies),
    errors: sum((part) => part.errors),
    non2xx: sum((part) => part.non2xx),
    statuses,
    responses,
    seconds,
  };
}

/**
 * Runs autocannon for a fixed time. Latencies are kept unrounded from autocannon's response events
 * (its own histogram has a 1 ms resolution, too coarse for a 1.2x comparison of a few ms), except
 * each connection's first: all connections open at once, so those include the connect burst, which
 * the benchmark's one-second turns would otherwise put into p99 (BENCHMARKS.md).
 */
export function applyLoad({
  origin,
  requests,
  seconds,
  connections,
  rate,
  latencies = [],
  servedOnly = false,
}: LoadOptions): Promise<Measurement> {
  const start = latencies.length;
  return new Promise((resolve, reject) => {
    const options = {
      url: origin,
      requests,
      duration: seconds,
      connections,
      ...(rate === undefined ? {} : { overallRate: rate }),
    };
    const instance = autocannon(options, (error: unknown, result) => {
      if (error !== null && error !== undefined) {
        reject(error instanceof Error ? error : new Error('autocannon failed', { cause: error }));
        return;
      }
      const statuses = Object.fromEntries(
        Object.entries(result.statusCodeStats ?? {}).map(([status, { count = 0 }]) => [status, count]),
      );
      const responses = Object.values(statuses).reduce((sum, n) => sum + n, 0);
      resolve({
        rps: responses / result.duration,
        ...latencyPercentiles(latencies.slice(start)),
        errors: result.errors + result.timeouts,
        non2xx: result.non2xx,
        statuses,
        responses,
        seconds: result.duration,
      });
    });
    // A connection's first response waits for the connection, opened with the others at once.
    const connected = new Set<unknown>();
    instance.on('response', (client, status, _bytes, milliseconds) => {
      if (!connected.has(client)) connected.add(client);
      else if (!servedOnly || (status >= 200 && status < 300)) latencies.push(milliseconds);
    });
  });
}
