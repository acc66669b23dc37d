import { DeliveryMetrics } from '../events/metrics.js';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import { CounterFamily, type CounterSeries, HistogramFamily } from './series.js';
import type { PoolStats } from '../storage/types.js';

/**
 * Why a request was refused before it was served. `authentication_limit` is the 429 for too many
 * failed authentications from one client address; `rate_limit` the 429 for one key's requests.
 */
export type RejectionCause = 'authentication' | 'authentication_limit' | 'rate_limit' | 'validation' | 'overload';

// Served requests take 0.2-2 ms here (BENCHMARKS.md); a slow database or a saturated process
// pushes them to seconds. Storage queries are sub-millisecond on SQLite, milliseconds over a network.
const REQUEST_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const QUERY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];

/**
 * The service's Prometheus metrics, in a registry of their own (served by metrics/server.ts).
 * Every label value is chosen by the server (an operationId, a route, a status code, a query
 * name), never taken from what a client sent.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly deliveries = new DeliveryMetrics(this.registry);

  // The metrics counted on every request or storage call are counted in plain numbers (series.ts).
  readonly requests = new CounterFamily({
    name: 'petstore_http_requests_total',
    help: 'Requests answered, by method, operation (the contract operationId; fixed names otherwise) and status.',
    labelNames: ['method', 'operation', 'status'],
    registers: [this.registry],
  });

  readonly requestDuration = new HistogramFamily({
    name: 'petstore_http_request_duration_seconds',
    help: 'Time from a request arriving to its answer being written, by method and operation.',
    labelNames: ['method', 'operation'],
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  /** Updated by the HTTP hooks; read at scrape time. */
  inFlight = 0;

  readonly rejections = new CounterFamily({
    name: 'petstore_http_rejections_total',
    help: 'Requests refused before being served, by cause: authentication, authentication_limit, rate_limit, validation, overload.',
    labelNames: ['cause'],
    registers: [this.registry],
  });

  readonly idempotentReplays = new Counter({
    name: 'petstore_idempotent_replays_total',
    help: 'Creates answered from an earlier request with the same Idempotency-Key instead of creating again.',
    registers: [this.registry],
  });

  readonly queryDuration = new HistogramFamily({
    name: 'petstore_storage_query_duration_seconds',
    help: 'Storage calls (repository.method), successful or not.',
    labelNames: ['query'],
    buckets: QUERY_BUCKETS,
    registers: [this.registry],
  });

  readonly queryErrors = new CounterFamily({
    name: 'petstore_storage_errors_total',
    help: 'Storage calls that failed (threw), by repository.method.',
    labelNames: ['query'],
    registers: [this.registry],
  });

  readonly #rejectedBy = new Map<RejectionCause, CounterSeries>();

  constructor() {
    const inFlight = () => this.inFlight;
    new Gauge({
      name: 'petstore_http_requests_in_flight',
      help: 'Requests received and not yet answered.',
      registers: [this.registry],
      collect() {
        this.set(inFlight());
      },
    });
    // Event-loop delay, heap, GC, CPU, file descriptors: prom-client's process_* and nodejs_*.
    collectDefaultMetrics({ register: this.registry });
  }

  /** Counts a refusal; fixed causes only. */
  rejected(cause: RejectionCause): void {
    let series = this.#rejectedBy.get(cause);
    if (series === undefined) {
      series = this.rejections.series({ cause });
      this.#rejectedBy.set(cause, series);
    }
    series.inc();
  }

  /**
   * Reports a storage backend's pool (PostgreSQL): `petstore_storage_pool_clients{state}`. Called
   * once, where a backend with a pool is opened; `stats` is read at each scrape.
   */
  watchPool(stats: () => PoolStats): void {
    new Gauge({
      name: 'petstore_storage_pool_clients',
      help: 'Database pool clients: total, idle, and waiting (requests queued for a client).',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const { total, idle, waiting } = stats();
        this.set({ state: 'total' }, total);
        this.set({ state: 'idle' }, idle);
        this.set({ state: 'waiting' }, waiting);
      },
    });
  }

  /**
   * Reports whether Redis answers: `petstore_redis_up` 1 or 0. Called once, where the Redis client
   * is made (shared rate limits); `reachable` is read at each scrape.
   */
  watchRedis(reachable: () => boolean): void {
    new Gauge({
      name: 'petstore_redis_up',
      help: 'Whether the Redis holding shared rate limits is reachable (1) or not (0).',
      registers: [this.registry],
      collect() {
        this.set(reachable() ? 1 : 0);
      },
    });
  }
}
