import { LRUCache } from 'lru-cache';
import type { KeyHash, Principal } from '../types.js';
import type { Listen } from './listen.js';

/** Where migration 011's trigger announces every committed change to `api_keys`. */
const CHANNEL = 'petstore_api_keys';

/**
 * The longest an entry is kept even when no change is announced: the bound on a stale answer if
 * the listening connection stops delivering without failing (a network that silently drops it).
 */
const KEPT_FOR_MS = 5_000;

/**
 * The principals of the keys this instance has looked up, kept while it listens for changes to
 * `api_keys`: a change, by whoever commits it, clears them on every instance once its notification
 * arrives (milliseconds). Until this instance listens (at start, after a lost connection), every
 * lookup goes to the database, and it starts again empty. A lookup begun before a change is not
 * kept. Unknown keys are never kept, so guessed keys cannot fill it; at most `size` entries.
 */
export class KeyCache {
  readonly #entries: LRUCache<string, Principal>;
  #listening = false;
  /** Moves on every change and every loss: a lookup that saw it move is not kept. */
  #generation = 0;
  #listener: { stop(): void } | undefined;

  constructor(
    private readonly listen: Listen,
    size = 10_000,
  ) {
    this.#entries = new LRUCache({ max: size, ttl: KEPT_FOR_MS, ttlAutopurge: false });
  }

  async get(key: KeyHash, read: () => Promise<Principal | undefined>): Promise<Principal | undefined> {
    // Started by the first lookup: the CLI, which looks up no key, opens no listening connection.
    this.#listener ??= this.listen('petstore-keys', CHANNEL, {
      notified: () => this.#changed(),
      listening: () => {
        this.#changed();
        this.#listening = true;
      },
      lost: () => {
        this.#listening = false;
        this.#changed();
      },
    });
    if (!this.#listening) return read();
    const cached = this.#entries.get(key);
    if (cached !== undefined) return cached;
    const generation = this.#generation;
    const principal = await read();
    // A change or a lost connection meanwhile moved the generation.
    if (principal !== undefined && generation === this.#generation) this.#entries.set(key, Object.freeze(principal));
    return principal;
  }

  /** This instance changed a key: forgotten at once, before its own notification comes back. */
  changed(): void {
    this.#changed();
  }

  stop(): void {
    this.#listener?.stop();
    this.#listener = undefined;
    this.#listening = false;
    this.#changed();
  }

  #changed(): void {
    this.#generation += 1;
    this.#entries.clear();
  }
}
