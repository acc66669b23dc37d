import type { ApiVersion } from '../../src/versions/change.js';
import { connect } from 'node:net';
import type { BuiltPlugins, Test } from '@tapjs/test';
import type { FastifyInstance, FastifyServerOptions, InjectOptions } from 'fastify';
import createClient from 'openapi-fetch';
// The suites of /v1 call it through its own contract's types (v2's suites use their own client).
import type { paths } from '../../generated/v1.js';
import { buildApp } from '../../src/app.js';
import { servedVersions as versionsServed } from '../../src/app/versions.js';
import type { Contract } from '../../src/contract/document.js';
import { Dispatcher } from '../../src/events/dispatcher.js';
import { DEFAULT_WEBHOOKS, type WebhookSettings } from '../../src/events/settings.js';
import { issueKey } from '../../src/auth/api-keys.js';
import { redisClient } from '../../src/plugins/rate-limit/redis.js';
import { Metrics } from '../../src/metrics/registry.js';
import {
  type ConnectionLimits,
  DEFAULT_OVERLOAD,
  type OverloadSettings,
  type RateLimitSettings,
} from '../../src/plugins/settings.js';
import { instrumentStorage } from '../../src/metrics/storage-timing.js';
import type { Pet, Storage } from '../../src/storage/types.js';
import { newDatabase, openDatabase, type Teardown } from './backend.js';
import { assertConforms, contract, servedVersions } from './contract.js';

export { temporaryDirectory, type Teardown } from './backend.js';

/** A tap test, as subtest callbacks receive it. */
export type TapTest = Test & BuiltPlugins;

function jsonOf(body: string): ConformingResponse['json'] {
  return () => JSON.parse(body) as never;
}

export interface ConformingResponse {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  /** The body as JSON, typed by the caller: it has already been checked against the contract's schema. */
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- a typed view of a validated body
  json<T = unknown>(): T;
}

export interface TestApi {
  app: FastifyInstance;
  storage: Storage;
  /** The database behind this server (a SQLite file, or a PostgreSQL URL). */
  databaseUrl: string;
  /** A valid API key and its header. */
  key: string;
  auth: { authorization: string };
  /** Injects a request and fails unless the response conforms to openapi.yaml. */
  request(options: InjectOptions & { method: string; url: string }): Promise<ConformingResponse>;
  /** The server's Prometheus metrics, when started with `metrics: true`. */
  metrics: Metrics | undefined;
  /** Creates a pet through the API (asserting the 201). */
  createPet(body: { name: string; categoryId: number; status?: Pet['status'] }): Promise<Pet>;
}

/** A real server on a new database of the backend under test, with one account and key. */
export interface StartOptions {
  /** An existing database to serve instead of a new one. */
  databaseUrl?: string;
  rateLimit?: RateLimitSettings;
  /** Count the rate limits in this Redis (as REDIS_URL does). */
  redisUrl?: string;
  /** The server's logger (default: none). */
  logger?: FastifyServerOptions['logger'];
  connections?: ConnectionLimits;
  /** The clock idempotency keys and API keys expire by. */
  now?: () => number;
  /** What the server sees of the real storage (e.g. a backend returning more than the contract's fields). */
  storageSeenByServer?: (storage: Storage) => Storage;
  /** Count requests and storage calls into Prometheus metrics, as the server does by default. */
  metrics?: boolean;
  /**
   * When to shed load. Off unless a test asks: this process also runs the test's own work, and on a
   * shared machine its event loop may lag for reasons no server would see.
   */
  overload?: OverloadSettings;
  /** fastify's trustProxy, as TRUST_PROXY gives it. */
  trustProxy?: boolean | string;
  /** Webhook delivery settings, as the WEBHOOK_* variables give them (default: the server's defaults). */
  webhooks?: WebhookSettings;
  /**
   * Run the delivery worker beside the app, started when it is ready and stopped when it closes, as
   * server.ts runs it beside the server. Off unless a test needs deliveries (helpers/webhooks.ts).
   */
  deliveries?: boolean;
  /** The newest version's contract, and older versions served beside it (default: openapi.yaml alone). */
  versions?: { contract: Contract; olderContracts: Contract[]; apiVersions?: readonly ApiVersion[] };
}

export async function startApi(t: Teardown, options: StartOptions = {}): Promise<TestApi> {
  const databaseUrl = options.databaseUrl ?? (await newDatabase(t));
  const storage = await openDatabase(databaseUrl, options.now === undefined ? {} : { now: options.now });
  const account = (await storage.accounts.findAccount('tests')) ?? (await storage.accounts.createAccount('tests'));
  const { key } = await issueKey(storage.accounts, account.id);
  const redis = options.redisUrl === undefined ? undefined : await redisClient(options.redisUrl);
  const metrics = options.metrics === true ? new Metrics() : undefined;
  const seen = options.storageSeenByServer?.(storage) ?? storage;
  const served = metrics === undefined ? seen : instrumentStorage(seen, metrics);
  const app = await buildApp({
    ...(options.versions ?? servedVersions),
    storage: served,
    metrics,
    redis,
    overload: options.overload ?? { ...DEFAULT_OVERLOAD, maxEventLoopDelayMs: 0 },
    ...(options.trustProxy === undefined ? {} : { trustProxy: options.trustProxy }),
    ...(options.now === undefined ? {} : { now: options.now }),
    logger: options.logger ?? false,
    ...(options.rateLimit === undefined ? {} : { rateLimit: options.rateLimit }),
    ...(options.connections === undefined ? {} : { connections: options.connections }),
    ...(options.webhooks === undefined ? {} : { webhooks: options.webhooks }),
  });
  if (options.deliveries === true) {
    // Each endpoint's payloads in its own version, through the chain the app serves.
    const { contract, olderContracts, apiVersions } = options.versions ?? servedVersions;
    const worker = new Dispatcher(
      served.deliveries,
      options.webhooks ?? DEFAULT_WEBHOOKS,
      versionsServed(contract, olderContracts, apiVersions).chain,
      metrics?.deliveries,
      (error) => app.log.error({ err: error }, 'webhook delivery failed'),
    );
    app.addHook('onReady', async () => worker.start());
    app.addHook('onClose', async () => worker.stop());
  }
  t.teardown(async () => {
    await app.close();
    redis?.disconnect();
    await storage.close();
  });
  const auth = { authorization: `Bearer ${key}` };

  const request: TestApi['request'] = async (injectOptions) => {
    const response = await app.inject(injectOptions);
    const observed = { statusCode: response.statusCode, headers: response.headers, body: response.body };
    assertConforms(injectOptions.method, injectOptions.url, observed);
    return { ...observed, json: jsonOf(response.body) };
  };

  const createPet: TestApi['createPet'] = async (body) => {
    const response = await request({ method: 'POST', url: '/v1/pets', headers: auth, payload: body });
    if (response.statusCode !== 201) throw new Error(`createPet: ${response.statusCode} ${response.body}`);
    return response.json<Pet>();
  };

  return { app, storage, databaseUrl, key, auth, request, createPet, metrics };
}

/** Writes `bytes` on a connection of its own; resolves with everything answered until the server ends it. */
export function rawExchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('end', () => resolve(received));
    socket.on('error', reject);
  });
}

/** An HTTP/1.1 response read off a raw socket, as the contract checker takes it. */
export function parseRawResponse(raw: string): ConformingResponse {
  const [head = '', body = ''] = raw.split('\r\n\r\n', 2);
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers = Object.fromEntries(
    headerLines.map((line) => [
      line.slice(0, line.indexOf(':')).toLowerCase(),
      line.slice(line.indexOf(':') + 1).trim(),
    ]),
  );
  return { statusCode: Number(statusLine.split(' ')[1]), headers, body, json: jsonOf(body) };
}

/** fetch that fails on any response departing from openapi.yaml. */
export const conformingFetch = async (input: Request): Promise<Response> => {
  const response = await fetch(input);
  const body = await response.clone().text();
  const url = new URL(input.url);
  assertConforms(input.method, url.pathname + url.search, {
    statusCode: response.status,
    headers: Object.fromEntries(response.headers),
    body,
  });
  return response;
};

/** Listens on a random loopback port; returns an openapi-fetch client typed by the contract. */
export async function listen(t: Teardown, api: TestApi) {
  const address = await api.app.listen({ host: '127.0.0.1', port: 0 });
  const baseUrl = `${address}${contract.basePath}`;
  const client = createClient<paths>({ baseUrl, fetch: conformingFetch, headers: api.auth });
  t.teardown(() => api.app.close());
  return { origin: address, baseUrl, client };
}
