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

/** The pet catalogue. Handlers speak only this; each backend speaks its own SQL. */
export interface PetRepository {
  list(query: PetPageQuery): Promise<PetPage>;
  create(pet: NewPetRecord): Promise<Pet>;
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
  /** Throws when the database cannot be used. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
