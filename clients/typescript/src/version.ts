/**
 * What each version's generated entry point (generated/v<major>/index.ts) binds to its contract:
 * the client, its error class, the webhook check and the status moves, made from the version's
 * generated tables. Nothing here names a version: how a version pages and what its errors are is
 * read from its tables, which say what its contract says.
 */
import { createClient, type ClientOptions, type PetstoreClient } from './client.js';
import { type ErrorCodeTable, PetstoreError } from './errors.js';
import { canMoveWith } from './transitions.js';
import type { Api, ErrorCode, OperationEntry, OperationId, ReportedCode } from './types.js';
import { unknownCode } from './types.js';
import { unwrapWith } from './webhooks.js';

export { PetstoreError, PetstoreNetworkError, type ProblemFields } from './errors.js';
export { PetstoreWebhookError, type HeadersLike, type UnwrapOptions, type WebhookCheck } from './webhooks.js';
export type { ClientOptions, HookContext, PetstoreClient, Retry } from './client.js';
export type * from './types.js';

/** A version's generated tables (its generated/contract.ts). */
export interface VersionTables<A extends Api> {
  operations: A['table'] & Readonly<Record<string, OperationEntry>>;
  errorCodes: ErrorCodeTable;
  eventSchemas: Readonly<Record<string, object>>;
  transitions: A['transitions'];
}

/** An error of version A's operation K. */
type VersionError<A extends Api, K extends OperationId<A>> = PetstoreError<K, ReportedCode<A, K>>;

/** Version A's error class: `new` it with an operation of A, and `instanceof` tells A's errors. */
export interface PetstoreErrorClass<A extends Api> {
  new <K extends OperationId<A>>(...args: ConstructorParameters<typeof PetstoreError<K>>): VersionError<A, K>;
  readonly prototype: VersionError<A, OperationId<A>>;
}

/** Everything of version A's client that is a value, bound to its tables. */
export function bind<A extends Api>(tables: VersionTables<A>) {
  /** The errors of this version, which know its codes. */
  class VersionPetstoreError extends PetstoreError {
    static override readonly codes = tables.errorCodes;
  }
  return {
    /** A client of this version: `baseUrl` is the version's (`.../v2`, `.../v1`). */
    createClient: (options: ClientOptions<A>): PetstoreClient<A> =>
      createClient<A>(
        { operations: tables.operations, PetstoreError: VersionPetstoreError as typeof PetstoreError },
        options,
      ),
    /** The API answered with an error. */
    PetstoreError: VersionPetstoreError as unknown as PetstoreErrorClass<A>,
    /** Whether `error` is an API error of this version, of operation `operationId` when given: its `code` is then typed. */
    isPetstoreError: <K extends OperationId<A>>(error: unknown, operationId?: K): error is VersionError<A, K> =>
      error instanceof VersionPetstoreError && (operationId === undefined || error.operationId === operationId),
    /** Whether `code` is one the contract lists for the operation of `error`: narrows `error.code` to them. */
    isKnownCode: <K extends OperationId<A>>(
      error: VersionError<A, K>,
    ): error is VersionError<A, K> & { readonly code: ErrorCode<A, K> } => error.code !== unknownCode,
    /** Whether the contract's `x-transitions` let a status move from `from` to `to`. */
    canMove: canMoveWith<A>(tables.transitions),
    /**
     * A delivery, verified and typed: its size checked against `maxBodyBytes` first, its timestamp
     * against the tolerance, its signature with Standard Webhooks against each of the endpoint's
     * `secrets` (during a rotation, the new and the previous one; compared in constant time) over the
     * body's exact bytes, then its payload against this version's schema for its `type`. Pass the
     * body exactly as received: the bytes, or the string they decode to. Any failure is a
     * `PetstoreWebhookError` whose `check` says which.
     */
    unwrap: unwrapWith<A>(tables.eventSchemas),
  };
}
