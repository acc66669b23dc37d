import { ApiError } from '../domain/errors.js';
import type { Metrics } from './registry.js';
import type { Storage } from '../storage/types.js';

/** An object's methods, own and inherited (a backend's repositories may be classes or literals). */
function methodNames(target: object): string[] {
  const names = new Set<string>();
  for (let proto: object | null = target; proto !== null && proto !== Object.prototype;) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name !== 'constructor' && typeof (target as Record<string, unknown>)[name] === 'function') names.add(name);
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  return [...names];
}

/**
 * The same repository with every method timed into `petstore_storage_query_duration_seconds` and
 * every failure counted in `petstore_storage_errors_total`, labelled `<repository>.<method>`.
 * Each method's series are resolved once, and the caller gets the method's own promise: the timing
 * watches it rather than wrapping it in another (an async wrapper costs a promise and a tick a call).
 */
function instrumentRepository<T extends object>(repository: T, name: string, metrics: Metrics): T {
  const timed: Record<string, unknown> = {};
  for (const method of methodNames(repository)) {
    const call = (repository as Record<string, (...args: unknown[]) => Promise<unknown>>)[method];
    if (call === undefined) continue;
    const query = `${name}.${method}`;
    const duration = metrics.queryDuration.series({ query });
    const errors = metrics.queryErrors.series({ query });
    timed[method] = (...args: unknown[]) => {
      const started = performance.now();
      const done = () => duration.observe((performance.now() - started) / 1000);
      // A refusal decided inside the transaction (an ApiError: a 409, a 412) is an answer, not a failure.
      const failed = (error: unknown) => {
        if (!(error instanceof ApiError)) errors.inc();
        done();
      };
      let result: Promise<unknown>;
      try {
        result = call.apply(repository, args);
      } catch (error) {
        failed(error);
        throw error;
      }
      result.then(done, failed);
      return result;
    };
  }
  return timed as T;
}

/**
 * Storage whose repositories are timed (any backend: the decorator knows only the interface).
 * A backend with a connection pool reports it through `stats()`, read at each scrape.
 */
export function instrumentStorage(storage: Storage, metrics: Metrics): Storage {
  const pooled = storage.stats !== undefined;
  const stats = () => storage.stats?.() ?? { total: 0, idle: 0, waiting: 0 };
  if (pooled) metrics.watchPool(stats);
  return {
    pets: instrumentRepository(storage.pets, 'pets', metrics),
    orders: instrumentRepository(storage.orders, 'orders', metrics),
    accounts: instrumentRepository(storage.accounts, 'accounts', metrics),
    webhooks: instrumentRepository(storage.webhooks, 'webhooks', metrics),
    // The worker's own metrics cover deliveries (src/events/metrics.ts).
    deliveries: storage.deliveries,
    migrationsApplied: storage.migrationsApplied,
    ping: () => storage.ping(),
    close: () => storage.close(),
    ...(pooled ? { stats } : {}),
  };
}
