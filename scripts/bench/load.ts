import autocannon from 'autocannon';

export interface LoadOptions {
  origin: string;
  /** Sent in turn on each connection. */
  requests: autocannon.Request[];
  seconds: number;
  connections: number;
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
}

/** One stretch of load: every response's latency, kept so that stretches can be merged. */
export interface LoadSample {
  seconds: number;
  latenciesMs: number[];
  errors: number;
  non2xx: number;
  statuses: Record<string, number>;
}

/** The value below which `fraction` of the sorted values lie. */
function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))] ?? Number.NaN;
}

/** Throughput, latency percentiles and counts over stretches of load on one server. */
export function measurementOf(samples: readonly LoadSample[]): Measurement {
  const sorted = Float64Array.from(samples.flatMap((sample) => sample.latenciesMs)).sort();
  const statuses: Record<string, number> = {};
  for (const sample of samples) {
    for (const [status, count] of Object.entries(sample.statuses)) statuses[status] = (statuses[status] ?? 0) + count;
  }
  const total = (pick: (sample: LoadSample) => number) => samples.reduce((sum, sample) => sum + pick(sample), 0);
  return {
    rps: sorted.length / total((sample) => sample.seconds),
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    errors: total((sample) => sample.errors),
    non2xx: total((sample) => sample.non2xx),
    statuses,
  };
}

/**
 * Runs autocannon for a fixed time. Latencies are kept unrounded from autocannon's response events
 * (its own histogram has a 1 ms resolution, too coarse for a 1.2x comparison of a few ms).
 */
export function applyLoad({ origin, requests, seconds, connections }: LoadOptions): Promise<LoadSample> {
  const latenciesMs: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon({ url: origin, requests, duration: seconds, connections }, (error: unknown, result) => {
      if (error !== null && error !== undefined) {
        reject(error instanceof Error ? error : new Error('autocannon failed', { cause: error }));
        return;
      }
      const statuses = Object.fromEntries(
        Object.entries(result.statusCodeStats ?? {}).map(([status, { count = 0 }]) => [status, count]),
      );
      resolve({
        seconds: result.duration,
        latenciesMs,
        errors: result.errors + result.timeouts,
        non2xx: result.non2xx,
        statuses,
      });
    });
    instance.on('response', (_client, _status, _bytes, milliseconds) => latenciesMs.push(milliseconds));
  });
}
