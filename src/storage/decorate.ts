import type { Storage } from './types.js';

/** A repository's method. */
export type StorageCall = (...args: unknown[]) => Promise<unknown>;

/**
 * Wraps one repository method, once, when the storage is decorated: `call` is the method bound to
 * its repository, `name` says which (`pets.create`).
 */
export type CallDecorator = (call: StorageCall, name: string) => StorageCall;

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

function decorateRepository<T extends object>(repository: T, name: string, decorate: CallDecorator): T {
  const decorated: Record<string, StorageCall> = {};
  for (const method of methodNames(repository)) {
    const call = (repository as Record<string, StorageCall>)[method];
    if (call !== undefined) decorated[method] = decorate(call.bind(repository), `${name}.${method}`);
  }
  return decorated as T;
}

/**
 * The same storage, any backend, with every method of its repositories wrapped by `decorate`
 * (timing, tracing). The delivery queue is the worker's, which observes its own work.
 */
export function decorateStorage(storage: Storage, decorate: CallDecorator): Storage {
  return {
    pets: decorateRepository(storage.pets, 'pets', decorate),
    orders: decorateRepository(storage.orders, 'orders', decorate),
    accounts: decorateRepository(storage.accounts, 'accounts', decorate),
    webhooks: decorateRepository(storage.webhooks, 'webhooks', decorate),
    deliveries: storage.deliveries,
    migrationsApplied: storage.migrationsApplied,
    ping: () => storage.ping(),
    close: () => storage.close(),
    ...(storage.stats === undefined ? {} : { stats: storage.stats.bind(storage) }),
  };
}
