import type { Redis } from 'ioredis';

/** A count under one key: the requests in the window so far, and the window's milliseconds left. */
export interface Counted {
  current: number;
  ttl: number;
}

/**
 * Where a limit counts, in fixed windows that start with a key's first request: `count` adds one
 * request under `key` and answers with the count (at once in this process; when Redis answers for
 * the shared store).
 */
export interface CountingStore {
  count(key: string, windowMs: number, answer: (error: Error | undefined, counted?: Counted) => void): void;
}

interface Window extends Counted {
  startedAt: number;
}

/** Counts in this process: at most `size` keys, the least recently counted dropped first. */
export class InProcessStore implements CountingStore {
  readonly #windows = new Map<string, Window>();

  constructor(private readonly size = 5_000) {}

  count(key: string, windowMs: number, answer: (error: undefined, counted: Counted) => void): void {
    const now = Date.now();
    let window = this.#windows.get(key);
    if (window === undefined) {
      if (this.#windows.size >= this.size) this.#windows.delete(this.#windows.keys().next().value as string);
      window = { current: 0, ttl: windowMs, startedAt: now };
    } else {
      // Set again below: a Map keeps insertion order, so the most recently counted comes last.
      this.#windows.delete(key);
    }
    if (window.current === 0 || window.startedAt + windowMs <= now) {
      window.current = 1;
      window.ttl = windowMs;
      window.startedAt = now;
    } else {
      window.current += 1;
      window.ttl = windowMs - (now - window.startedAt);
    }
    this.#windows.set(key, window);
    answer(undefined, window);
  }
}

/** The count and the window's milliseconds left, in one round trip. */
const COUNT_SCRIPT = `
local current = redis.call('INCR', KEYS[1])
if current == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {current, tonumber(ARGV[1])}
end
return {current, redis.call('PTTL', KEYS[1])}
`;

const COMMAND = 'petstoreRateLimitCount';

type CountCommand = (
  key: string,
  windowMs: number,
  callback: (error: Error | null | undefined, result?: [number, number]) => void,
) => unknown;

/** Counts in Redis, shared by every instance using it; each key prefixed with `prefix`. */
export class RedisStore implements CountingStore {
  readonly #command: CountCommand;

  constructor(
    redis: Redis,
    private readonly prefix: string,
  ) {
    // ioredis adds a defined command as a method of the client, sending the script's hash after the first time.
    const commands = redis as unknown as Record<string, CountCommand | undefined>;
    if (commands[COMMAND] === undefined) redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: COUNT_SCRIPT });
    this.#command = (commands[COMMAND] as CountCommand).bind(redis);
  }

  count(key: string, windowMs: number, answer: (error: Error | undefined, counted?: Counted) => void): void {
    this.#command(this.prefix + key, windowMs, (error, result) => {
      if (error === null && result !== undefined) answer(undefined, { current: result[0], ttl: result[1] });
      else answer(error ?? new Error('Redis gave no count'));
    });
  }
}
