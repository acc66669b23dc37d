import { ApiError } from '../domain/errors.js';
import type { Metrics } from './registry.js';
import { decorateStorage } from '../storage/decorate.js';
import type { Storage } from '../storage/types.js';

/**
 * Storage (any backend) whose every repository method is timed into
 * `petstore_storage_query_duration_seconds` and whose every failure is counted in
 * `petstore_storage_errors_total`, labelled `<repository>.<method>`. Each method's series are
 * resolved once, and the caller gets the method's own promise: the timing watches it rather than
 * wrapping it in another (an async wrapper costs a promise and a tick a call). A backend with a
 * connection pool reports it through `stats()`, read at each scrape.
 */
export function instrumentStorage(storage: Storage, metrics: Metrics): Storage {
  if (storage.stats !== undefined) metrics.watchPool(storage.stats.bind(storage));
  return decorateStorage(storage, (call, query) => {
    const duration = metrics.queryDuration.series({ query });
    const errors = metrics.queryErrors.series({ query });
    return (...args) => {
      const started = performance.now();
      const done = () => duration.observe((performance.now() - started) / 1000);
      // A refusal decided inside the transaction (an ApiError: a 409, a 412) is an answer, not a failure.
      const failed = (error: unknown) => {
        if (!(error instanceof ApiError)) errors.inc();
        done();
      };
      let result: Promise<unknown>;
      try {
        result = call(...args);
      } catch (error) {
        failed(error);
        throw error;
      }
      result.then(done, failed);
      return result;
    };
  });
}
