import type { components } from '../../generated/openapi.js';

export type Pet = components['schemas']['Pet'];
export type PetStatus = components['schemas']['PetStatus'];
export type NewPetRecord = Required<components['schemas']['NewPet']>;

export interface PetPageQuery {
  limit: number;
  status?: PetStatus | undefined;
  /** Return only pets whose id is greater than this (keyset paging). */
  afterId?: number | undefined;
}

export interface PetPage {
  pets: Pet[];
  /** True when at least one more pet follows the last one returned. */
  hasMore: boolean;
}

/** Makes a create safe to retry: see the `Idempotency-Key` parameter in openapi.yaml. */
export interface IdempotencyClaim {
  /** The API key that sent the request: keys are scoped to it. */
  apiKeyId: number;
  key: string;
  /** Identifies the request body, to tell a retry from a reuse of the key. */
  fingerprint: Buffer;
}

export type CreateOutcome =
  | { outcome: 'created' | 'replayed'; pet: Pet }
  /** The key was used, within its lifetime, with another body. */
  | { outcome: 'conflict' };

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** The pet catalogue. Handlers speak only this; each backend speaks its own SQL. */
export interface PetRepository {
  list(query: PetPageQuery): Promise<PetPage>;
  /** Creates a pet; with a claim, the check, the insert and the claim are one transaction. */
  create(pet: NewPetRecord, claim?: IdempotencyClaim): Promise<CreateOutcome>;
  get(id: number): Promise<Pet | undefined>;
  /** Adds many pets in one transaction (seeding and benchmarks). */
  createMany(pets: Iterable<NewPetRecord>): Promise<number>;
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
}

/** The account a valid, unrevoked key belongs to. */
export interface Principal {
  accountId: number;
  keyId: number;
}

export interface AccountRepository {
  createAccount(name: string): Promise<Account>;
  findAccount(name: string): Promise<Account | undefined>;
  addKey(accountId: number, hash: Buffer, prefix: string): Promise<ApiKeyInfo>;
  listKeys(accountId: number): Promise<ApiKeyInfo[]>;
  /** Returns false when no such key exists; revoking twice keeps the first time. */
  revokeKey(keyId: number): Promise<boolean>;
  countKeys(): Promise<number>;
  findPrincipal(hash: Buffer): Promise<Principal | undefined>;
}

export interface Storage {
  pets: PetRepository;
  accounts: AccountRepository;
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
