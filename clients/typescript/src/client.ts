import createFetchClient from 'openapi-fetch';
import { PetstoreError, PetstoreNetworkError } from './errors.js';
import { nextLink, queryString, retryAfterSeconds, sleep } from './http.js';
import type {
  Api,
  Arguments,
  CallOptions,
  Item,
  ListOperationId,
  OperationEntry,
  OperationId,
  Page,
  ReportedCode,
  Result,
  ResultOf,
} from './types.js';

/** Any error of version A's operations, as `onRetry` sees it. */
type Failure<A extends Api> = PetstoreError<OperationId<A>, ReportedCode<A, OperationId<A>>> | PetstoreNetworkError;

export interface ClientOptions<A extends Api> {
  /** The API's base URL, its version path included: `https://api.petstore.example/v2` (`/v1` for the v1 client). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>`. */
  apiKey: string;
  /** Attempts per call, the first included (default 4). */
  attempts?: number;
  /** The wait before the first retry when the answer names none (ms, default 250); doubled, jittered, each time. */
  backoffMs?: number;
  /** The longest wait between attempts (ms, default 60 000): a longer `Retry-After` is waited this long. */
  maxDelayMs?: number;
  /** How long one attempt may take before it counts as no answer (ms, default 30 000). */
  timeoutMs?: number;
  /** Aborts every call of this client. */
  signal?: AbortSignal;
  /**
   * The fetch to send with (default: the global `fetch`): called with one argument, the `Request`
   * to send (its URL, method, headers, body and signal set), and resolving to its `Response`.
   */
  fetch?: (request: Request) => Promise<Response>;
  /** Called before each retry, which waits for what it returns. */
  onRetry?: (retry: Retry<A>) => void | Promise<void>;
  /**
   * Called with each request as it is about to be sent (every attempt): for logging, metrics or
   * headers. It may return a `Request` to send instead; the call waits for what it returns.
   */
  onRequest?: (request: Request, context: HookContext<A>) => Request | undefined | Promise<Request | undefined>;
  /**
   * Called with each answer as it arrives (every attempt, errors included), before the client reads
   * it; the call waits for what it returns. Read its body from `response.clone()`, if at all.
   */
  onResponse?: (response: Response, context: HookContext<A> & { request: Request }) => void | Promise<void>;
}

/** Which call and which attempt a request or response hook sees. */
export interface HookContext<A extends Api> {
  operationId: OperationId<A>;
  /** 1 for the first attempt, 2 for the first retry, ... */
  attempt: number;
}

/** A retry about to be made: why, and how long it waits first. */
export interface Retry<A extends Api> {
  operationId: OperationId<A>;
  /** The attempt that failed (1 for the first). */
  attempt: number;
  delayMs: number;
  failure: Failure<A>;
}

/**
 * One method per operation of the contract, by operationId, each documented as the contract
 * documents it (summary, description, deprecation), and the helpers that work across them.
 */
export type PetstoreClient<A extends Api> = {
  [K in keyof A['docs']]: K extends OperationId<A> ? (...args: Arguments<A, K>) => Promise<ResultOf<A, K>> : never;
} & Helpers<A>;

/** What a client has beside its operations. */
interface Helpers<A extends Api> {
  /** One page of a list operation, with the cursor of the next. */
  page<K extends ListOperationId<A>>(operationId: K, ...args: Arguments<A, K>): Promise<Page<A, K>>;
  /**
   * Every item of a list operation, page after page: following its envelope's next cursor, or its
   * `Link: rel="next"`, as its version's contract says.
   */
  each<K extends ListOperationId<A>>(
    operationId: K,
    ...args: Arguments<A, K>
  ): AsyncGenerator<Item<A, K>, void, undefined>;
  /**
   * Read, change, write: reads with `read`, writes with `write` (which sends `current.etag` as
   * `If-Match`); when the write finds the resource changed since (`412`), reads and writes again.
   * `write` gets the read as it answered (a result, or a page with its `items`), its `etag` a string.
   */
  modify<R extends Result<unknown>, W>(
    read: () => Promise<R>,
    write: (current: R & { etag: string }) => Promise<W>,
    options?: { attempts?: number },
  ): Promise<W>;
}

type LooseRequest = (
  method: string,
  path: string,
  init: Record<string, unknown>,
) => Promise<{ data?: unknown; error?: unknown; response: Response }>;

interface LooseInput {
  path?: Record<string, unknown>;
  query?: Record<string, unknown>;
  header?: Record<string, string>;
  body?: unknown;
}

const DEFAULTS = { attempts: 4, backoffMs: 250, maxDelayMs: 60_000, timeoutMs: 30_000 };

/** What a version's client is made from: its table of operations, and the error class that knows its codes. */
export interface ClientParts {
  operations: Readonly<Record<string, OperationEntry>>;
  PetstoreError: typeof PetstoreError;
}

/** The client of the version `parts` describe. */
export function createClient<A extends Api>(
  { operations, PetstoreError: VersionError }: ClientParts,
  options: ClientOptions<A>,
): PetstoreClient<A> {
  type Operation = OperationEntry;
  const settings = { ...DEFAULTS, ...options };
  const fetchClient = createFetchClient({
    baseUrl: options.baseUrl,
    headers: { authorization: `Bearer ${options.apiKey}` },
  });
  const request = fetchClient.request as unknown as LooseRequest;
  const fetchRequest = options.fetch ?? ((input: Request) => globalThis.fetch(input));

  /** The fetch of one attempt: the request and response hooks around the client's fetch. */
  const hooked = (context: HookContext<A>) => async (original: Request) => {
    const sent = (await options.onRequest?.(original, context)) ?? original;
    const response = await fetchRequest(sent);
    await options.onResponse?.(response, { ...context, request: sent });
    return response;
  };

  /** How long to wait before trying again after `failure`, or undefined when it must not be retried. */
  function delayBefore(retry: number, operation: Operation, failure: Failure<A>) {
    const status = failure instanceof PetstoreError ? failure.status : undefined;
    // 429 and 503 say the request was not served; other 5xx and no answer leave it unknown.
    const retryable =
      status === 429 || status === 503 || ((status === undefined || status >= 500) && operation.safeToResend);
    if (!retryable) return undefined;
    const backoff = Math.random() * settings.backoffMs * 2 ** (retry - 1);
    const asked = failure instanceof PetstoreError ? failure.retryAfter : undefined;
    return Math.min(asked === undefined ? backoff : asked * 1000, settings.maxDelayMs);
  }

  /** The table's entry of an operation of this version (each method and pager is made from one). */
  const entryOf = (operationId: string): Operation => {
    const operation = operations[operationId];
    if (operation === undefined) throw new TypeError(`${operationId} is no operation of this version`);
    return operation;
  };

  async function send<K extends OperationId<A>>(
    operationId: K,
    input: LooseInput = {},
    call: CallOptions = {},
  ): Promise<ResultOf<A, K>> {
    const operation = entryOf(operationId);
    const header = { ...input.header };
    // A header left undefined (an ETag the read did not carry) would be no header: a write meant as
    // conditional would then apply unconditionally. Refused before anything is sent.
    const missing = Object.keys(header).filter((name) => header[name] === undefined);
    if (missing.length > 0) {
      throw new TypeError(`${operationId}: header ${missing.join(', ')} is undefined; give it a value or leave it out`);
    }
    // One key for the call, so that its retries are answered with what the first attempt did.
    if (operation.idempotencyKey === true && !Object.keys(header).some((name) => /^idempotency-key$/i.test(name))) {
      header['Idempotency-Key'] = crypto.randomUUID();
    }
    const signals = [options.signal, call.signal].filter((signal) => signal !== undefined);
    const attempts = call.attempts ?? settings.attempts;
    for (let attempt = 1; ; attempt++) {
      // Any operation's error: what `onRetry` takes.
      let failure: Failure<A>;
      try {
        const { data, error, response } = await request(operation.method, operation.path, {
          fetch: hooked({ operationId, attempt }),
          params: { path: input.path, header, query: input.query },
          querySerializer: (query: Record<string, unknown>) => queryString(query, operation.arrays),
          ...(operation.requestMediaType === undefined
            ? {}
            : { body: input.body, headers: { 'content-type': operation.requestMediaType } }),
          signal: AbortSignal.any([...signals, AbortSignal.timeout(call.timeoutMs ?? settings.timeoutMs)]),
        });
        if (response.ok) return resultOf(data, response) as ResultOf<A, K>;
        failure = errorOf(VersionError, operationId, operation, response, error) as Failure<A>;
      } catch (error) {
        // The caller's abort ends the call; a timeout or a failed connection is no answer.
        const aborted = signals.find((signal) => signal.aborted);
        if (aborted !== undefined) throw aborted.reason;
        failure = new PetstoreNetworkError(operationId, error);
      }
      const delayMs = attempt < attempts ? delayBefore(attempt, operation, failure) : undefined;
      if (delayMs === undefined) throw failure;
      await options.onRetry?.({ operationId, attempt, delayMs, failure });
      await sleep(delayMs, signals.length === 0 ? undefined : AbortSignal.any(signals));
    }
  }

  /** A page's items and the next page's cursor: from its envelope, or from its array and `Link: rel="next"`. */
  function pageOf(operation: Operation, result: Result<unknown>): { items: unknown[]; next: string | undefined } {
    const { cursor, envelope } = operation;
    if (envelope !== undefined) {
      const body = (result.data ?? {}) as Record<string, unknown>;
      const next = body[envelope.next];
      return { items: body[envelope.items] as unknown[], next: typeof next === 'string' ? next : undefined };
    }
    const link = nextLink(result.headers.get('link'));
    const next =
      link === undefined || cursor === undefined
        ? undefined
        : (new URL(link, options.baseUrl).searchParams.get(cursor) ?? undefined);
    return { items: result.data as unknown[], next };
  }

  async function page<K extends ListOperationId<A>>(operationId: K, input?: LooseInput, call?: CallOptions) {
    const result = await send(operationId, input, call);
    return { ...result, ...pageOf(entryOf(operationId), result) } as Page<A, K>;
  }

  async function* each<K extends ListOperationId<A>>(operationId: K, input: LooseInput = {}, call?: CallOptions) {
    const operation = entryOf(operationId);
    let current = await page(operationId, input, call);
    yield* current.items;
    while (current.next !== undefined && operation.cursor !== undefined) {
      current = await page(
        operationId,
        { ...input, query: { ...input.query, [operation.cursor]: current.next } },
        call,
      );
      yield* current.items;
    }
  }

  const modify: Helpers<A>['modify'] = async (read, write, { attempts = settings.attempts } = {}) => {
    for (let attempt = 1; ; attempt++) {
      const current = await read();
      const { etag } = current;
      if (etag === undefined) throw new TypeError('modify: the read answered no ETag to send as If-Match');
      try {
        return await write({ ...current, etag });
      } catch (error) {
        if (!(error instanceof VersionError && error.status === 412) || attempt >= attempts) throw error;
      }
    }
  };

  const methods = Object.fromEntries(
    (Object.keys(operations) as OperationId<A>[]).map((operationId) => [
      operationId,
      (input?: LooseInput, call?: CallOptions) => send(operationId, input, call),
    ]),
  );
  return { ...methods, page, each, modify } as unknown as PetstoreClient<A>;
}

function resultOf(data: unknown, response: Response): Result<unknown> {
  return {
    data,
    status: response.status,
    etag: response.headers.get('etag') ?? undefined,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    requestId: response.headers.get('x-request-id') ?? undefined,
    headers: response.headers,
  };
}

/**
 * The error an answer is: read as the operation's contract says its errors are, problem details
 * (`detail` its text, with `type` and `title`) or an `Error` (`message` its text).
 */
function errorOf(
  VersionError: typeof PetstoreError,
  operationId: string,
  operation: OperationEntry,
  response: Response,
  body: unknown,
): PetstoreError {
  const fields = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const text = (name: string) => (typeof fields[name] === 'string' ? fields[name] : undefined);
  const problem = operation.problem === true;
  return new VersionError(
    operationId,
    response.status,
    text('code') ?? '',
    text(problem ? 'detail' : 'message') ?? response.statusText,
    response.headers.get('x-request-id') ?? undefined,
    retryAfterSeconds(response.headers.get('retry-after')),
    response.headers.get('etag') ?? undefined,
    problem ? { type: text('type'), title: text('title') } : {},
  );
}
