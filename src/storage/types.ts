import type {
  NewPetRecord,
  Order,
  OrderChange,
  OrderStatus,
  Pet,
  PetFields,
  PetState,
  PetStatus,
  VersionedPet,
} from '../domain/types.js';
import type { ApiVersionName, EventType, WebhookDelivery, WebhookEndpoint } from '../domain/events.js';

export type { NewPetRecord, Order, OrderChange, OrderStatus, Pet, PetFields, PetState, PetStatus, VersionedPet };
export { ORDER_EVENTS } from '../domain/types.js';

export interface PageQuery<Status> {
  limit: number;
  status?: Status | undefined;
  /** Return only rows whose id is greater than this (keyset paging). */
  afterId?: number | undefined;
}

export interface PetPageQuery extends PageQuery<PetStatus> {
  /** Only these ids. */
  ids?: readonly number[] | undefined;
}

export interface Page<T> {
  items: T[];
  /** True when at least one more row follows the last one returned. */
  hasMore: boolean;
}

/** Makes a create safe to retry: see the `Idempotency-Key` parameter in openapi.yaml. */
export interface IdempotencyClaim {
  /** The API key that sent the request: keys are scoped to it. */
  apiKeyId: number;
  key: string;
  /** Identifies the request (operation and body), to tell a retry from a reuse of the key. */
  fingerprint: Buffer;
}

export type CreateOutcome<T> =
  | { outcome: 'created'; created: T }
  /**
   * The key was used before for this request: what it created, as the first answer showed it;
   * undefined only for a claim made before answers were kept whose resource was removed since.
   */
  | { outcome: 'replayed'; created: T | undefined }
  /** The key was used, within its lifetime, with another request. */
  | { outcome: 'conflict' };

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * Decides a change from the current state, inside the transaction that will write it: returns
 * what to write (undefined: nothing changes), or throws the refusal (an ApiError), which rolls
 * the transaction back. Domain rules live in these deciders (src/domain/), not in the backends.
 */
export type Decide<State, Change> = (current: State) => Change | undefined;

/** The pet catalogue. Handlers speak only this; each backend speaks its own SQL. */
export interface PetRepository {
  /** A page of pets, each with its version (a one-pet page answers with its ETag). */
  list(query: PetPageQuery): Promise<Page<VersionedPet>>;
  /** Creates a pet; with a claim, the check, the insert and the claim are one transaction. */
  create(pet: NewPetRecord, claim?: IdempotencyClaim): Promise<CreateOutcome<VersionedPet>>;
  get(id: number): Promise<VersionedPet | undefined>;
  /** Changes a pet as `decide` says, atomically with reading it; undefined when there is no such pet. */
  update(id: number, decide: Decide<PetState, PetFields>): Promise<VersionedPet | undefined>;
  /** Removes a pet unless `decide` throws; false when there is no such pet. */
  remove(id: number, check: (current: PetState) => void): Promise<boolean>;
  /** Adds many pets in one transaction (seeding and benchmarks). */
  createMany(pets: Iterable<NewPetRecord>): Promise<number>;
}

/** The store's orders. Each change moves the order's pet in the same transaction. */
export interface OrderRepository {
  list(query: PageQuery<OrderStatus>): Promise<Page<Order>>;
  get(id: number): Promise<Order | undefined>;
  /**
   * Places an order for a pet, which `check` must accept (it throws otherwise), and moves the pet
   * to `petStatus`; with a claim, as PetRepository.create.
   */
  place(
    petId: number,
    check: (pet: PetState | undefined) => PetStatus,
    claim?: IdempotencyClaim,
  ): Promise<CreateOutcome<Order>>;
  /** Changes an order and its pet as `decide` says; undefined when there is no such order. */
  update(id: number, decide: Decide<Order, OrderChange>): Promise<Order | undefined>;
}

export interface Account {
  id: number;
  name: string;
  createdAt: string;
}

export interface ApiKeyInfo {
  id: number;
  accountId: number;
  prefix: string;
  createdAt: string;
  revokedAt: string | null;
  /** The scopes it holds; null: every scope. */
  scopes: string[] | null;
  /** When it stops being accepted (ISO 8601); null: never. */
  expiresAt: string | null;
}

/** What a new key holds: scopes (none given: every scope) and an expiry (none: never). */
export interface KeyGrant {
  scopes?: readonly string[] | undefined;
  expiresAt?: Date | undefined;
}

/** The account a valid, unrevoked key belongs to, and what the key may do until when. */
export interface Principal {
  accountId: number;
  keyId: number;
  /** The scopes it holds; null: every scope. */
  scopes: readonly string[] | null;
  /** When the key expires (Unix milliseconds); null: never. An expired key is still found: the 401 says so. */
  expiresAt: number | null;
}

/**
 * A key's SHA-256, in base64: how a presented key is looked up, cached and counted. The database
 * keeps its 32 bytes.
 */
export type KeyHash = string;

export interface AccountRepository {
  createAccount(name: string): Promise<Account>;
  findAccount(name: string): Promise<Account | undefined>;
  addKey(accountId: number, hash: KeyHash, prefix: string, grant?: KeyGrant): Promise<ApiKeyInfo>;
  findKey(keyId: number): Promise<ApiKeyInfo | undefined>;
  listKeys(accountId: number): Promise<ApiKeyInfo[]>;
  /** Returns false when no such key exists; revoking twice keeps the first time. */
  revokeKey(keyId: number): Promise<boolean>;
  /** Makes a key expire at `at` unless it expires sooner already; false when no such key exists. */
  expireKey(keyId: number, at: Date): Promise<boolean>;
  countKeys(): Promise<number>;
  findPrincipal(hash: KeyHash): Promise<Principal | undefined>;
}

/** An endpoint's subscription, as created or patched. */
export interface WebhookFields {
  url: string;
  events: EventType[];
  /** The version of the payloads it receives; a create that names none makes a `v1` endpoint (UNNAMED_API_VERSION). */
  apiVersion?: ApiVersionName;
}

export interface WebhookPatch extends Partial<WebhookFields> {
  enabled?: boolean;
}

/** A signing secret issued to an endpoint, and until when the one it replaces still signs. */
export interface SecretRotation {
  secret: string;
  previousExpiresAt: number;
}

/** Webhook endpoints, each owned by an account: another account's is never found. */
export interface WebhookRepository {
  list(accountId: number): Promise<WebhookEndpoint[]>;
  get(accountId: number, id: number): Promise<WebhookEndpoint | undefined>;
  /** Adds an endpoint unless the account has `maxEndpoints` already (race-safe: checked as it is written). */
  create(
    accountId: number,
    fields: WebhookFields,
    secret: string,
    maxEndpoints: number,
  ): Promise<WebhookEndpoint | 'limit_reached'>;
  update(accountId: number, id: number, patch: WebhookPatch): Promise<WebhookEndpoint | undefined>;
  remove(accountId: number, id: number): Promise<boolean>;
  rotateSecret(accountId: number, id: number, rotation: SecretRotation): Promise<WebhookEndpoint | undefined>;
  /** Queues a `webhook.test` for this endpoint alone: its event id, or why not. */
  sendTest(accountId: number, id: number): Promise<{ eventId: number } | 'disabled' | undefined>;
  /** The most recent attempts, newest first; undefined when there is no such endpoint. */
  attempts(accountId: number, id: number, limit: number): Promise<WebhookDelivery[] | undefined>;
}

/** A message claimed for one attempt, under a lease: no other instance sends it until the lease ends. */
export interface ClaimedDelivery {
  id: number;
  /** This attempt's number: 1 for the first. */
  attempt: number;
  eventId: number;
  eventType: EventType;
  /** The payload in the newest API version, as the outbox keeps it. */
  body: string;
  /** When the change was committed (Unix milliseconds). */
  committedAt: number;
  endpointId: number;
  url: string;
  /** The API version the endpoint receives its payloads in: the worker migrates `body` down to it. */
  apiVersion: ApiVersionName;
  /** The endpoint's secret, and the previous one while its grace lasts. */
  secrets: string[];
  /** Since when every attempt to this endpoint failed; undefined after a success. */
  failingSince: number | undefined;
  /** The W3C traceparent of the request that wrote the event, when it was traced. */
  traceParent: string | undefined;
}

/** What became of an attempt, as the worker decided (src/events/dispatcher.ts). */
export interface AttemptOutcome {
  delivery: ClaimedDelivery;
  attemptedAt: number;
  durationMs: number;
  responseStatus?: number | undefined;
  error?: string | undefined;
  /** delivered, dead (no attempt left), or the time of the next attempt. */
  next: 'delivered' | 'dead' | number;
  /** Set when the endpoint must be disabled, with why. */
  disable?: string | undefined;
}

/** The most attempts in flight at once, over every instance, to one endpoint and to one account's. */
export interface InFlightCaps {
  perEndpoint: number;
  perAccount: number;
}

/** The outbox's messages to deliver, claimed by the workers of every instance. */
export interface DeliveryQueue {
  /**
   * Claims up to `limit` due messages of enabled endpoints, leased for `leaseMs`, fairly: no more
   * than leave an endpoint or an account with its cap in flight (leased, by any instance), and
   * accounts in turn (each account's first message, then each one's second, ...; within an account
   * its endpoints in turn), each endpoint's in its order.
   */
  claim(limit: number, leaseMs: number, caps: InFlightCaps): Promise<ClaimedDelivery[]>;
  /**
   * Records attempts, in their order, in one transaction; an attempt whose lease was lost to another
   * instance meanwhile is ignored.
   */
  settle(outcomes: readonly AttemptOutcome[]): Promise<void>;
  /**
   * Whether requests are waiting for the database now (PostgreSQL: for a connection of the pool),
   * when the worker holds back; SQLite answers no, its load shows on the event loop.
   */
  saturated(): Promise<boolean>;
  /** Gives claimed messages back, unattempted (a shutdown). */
  release(ids: readonly number[]): Promise<void>;
  /** When the next pending message is due, if any, as `claim` with these caps would take it. */
  nextDueAt(caps: InFlightCaps): Promise<number | undefined>;
  /** Messages not yet delivered (nor dead), and when the oldest of them was committed. */
  backlog(): Promise<{ pending: number; oldestCommittedAt: number | undefined }>;
  /** Removes delivered and dead messages, and attempts, older than `before`; returns how many messages. */
  prune(before: number): Promise<number>;
  /**
   * Calls `listener` when events may have been committed, by this instance or (PostgreSQL) another.
   * Returns a function that stops listening.
   */
  onCommit(listener: () => void): () => void;
}

export interface Storage {
  pets: PetRepository;
  orders: OrderRepository;
  accounts: AccountRepository;
  webhooks: WebhookRepository;
  deliveries: DeliveryQueue;
  /** How many migrations opening it applied (0: the schema was up to date). */
  migrationsApplied: number;
  /** Throws when the database cannot be used. */
  ping(): Promise<void>;
  close(): Promise<void>;
  /**
   * A backend with a connection pool (PostgreSQL) reports it here: total, idle and waiting clients
   * (`petstore_storage_pool_clients`). Leave it out when there is no pool (SQLite).
   */
  stats?(): PoolStats;
}

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

/** Seconds a client should wait before retrying while the database cannot serve. */
export const DATABASE_RETRY_AFTER_SECONDS = 2;

/**
 * The database cannot serve now (unreachable, restarting, overloaded, timed out): a 503 with
 * Retry-After (DATABASE_RETRY_AFTER_SECONDS), not a 500. Nothing the request sent caused it.
 */
export class StorageUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StorageUnavailableError';
  }
}
