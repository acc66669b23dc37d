/** The types of each operation, derived from the generated contract types: no type here is written per operation. */
import type { ErrorCodes, operations as operationTable, UnknownCode } from './generated/contract.js';
import type { operations } from './generated/openapi.js';

/** An operation of the API, by its `operationId`. */
export type OperationId = keyof typeof operationTable & keyof operations;

type Parameters<K extends OperationId> = operations[K]['parameters'];
type RequestBody<K extends OperationId> = [operations[K]['requestBody']] extends [{ content: infer C }]
  ? C[keyof C]
  : never;

/** Headers the client sends itself when the call does not: a new Idempotency-Key for each create. */
type ClientSuppliedHeader = 'Idempotency-Key';
type HeaderParameters<K extends OperationId> = NonNullable<Parameters<K>['header']>;
/** A call's headers: the contract's, those the client supplies made optional. */
type Loosened<H> = Omit<H, ClientSuppliedHeader> & Partial<Pick<H, ClientSuppliedHeader & keyof H>>;
type CallHeaders<K extends OperationId> = [HeaderParameters<K>] extends [never]
  ? { header?: never }
  : object extends Loosened<HeaderParameters<K>>
    ? { header?: Loosened<HeaderParameters<K>> }
    : { header: Loosened<HeaderParameters<K>> };

/** What a call of operation K takes: its `path`, `query` and `header` parameters, and its `body`. */
export type Input<K extends OperationId> = Omit<Parameters<K>, 'cookie' | 'header'> &
  CallHeaders<K> &
  ([RequestBody<K>] extends [never] ? unknown : { body: RequestBody<K> });

type Responses<K extends OperationId> = operations[K]['responses'];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 202 | 203 | 204>;
type Success<K extends OperationId> = Responses<K>[SuccessStatus<K>];

/** What a success of operation K carries: its JSON body, or `undefined` when it has none (a 204). */
export type Data<K extends OperationId> = Success<K> extends { content: infer C } ? C[keyof C] : undefined;

/** The operations that page (a list taking a cursor): `each` and `page` take them. A list of one page does not. */
export type ListOperationId = {
  [K in OperationId]: (typeof operationTable)[K] extends { cursor: string } ? K : never;
}[OperationId];

/** An item of list operation K. */
export type Item<K extends ListOperationId> =
  Data<K> extends { data: readonly (infer I)[] } ? I : Data<K> extends readonly (infer I)[] ? I : never;

/**
 * A code the Error bodies of operation K may carry: the closed union its `x-error-codes` lists, so
 * that comparing with a code it never answers (or a misspelt one) does not compile.
 */
export type ErrorCode<K extends OperationId> = Extract<ErrorCodes[K][keyof ErrorCodes[K]], string>;

/**
 * An error's `code`: one of operation K's codes, or `'unknown'` when the server answered a code this
 * version of the contract does not list (a later minor version's); `rawCode` then holds it.
 */
export type ReportedCode<K extends OperationId> = ErrorCode<K> | UnknownCode;

/** An answer that succeeded. */
export interface Result<T, ETag = string | undefined> {
  data: T;
  status: number;
  /** Its `ETag`, to send back in `If-Match`: a string wherever the contract declares one. */
  etag: ETag;
  /** True when it replays the answer to an earlier request with the same `Idempotency-Key`. */
  replayed: boolean;
  /** Its `X-Request-Id`, to quote when asking about it. */
  requestId: string | undefined;
  headers: Headers;
}

/**
 * A success of operation K: its `etag` a string when the contract says every success carries one,
 * `string | undefined` when only some do (a page of `listPets` holding one animal).
 */
export type ResultOf<K extends OperationId> = Result<
  Data<K>,
  (typeof operationTable)[K] extends { etag: 'always' } ? string : string | undefined
>;

/** One page of list operation K: its items, and the cursor of the next page (undefined on the last). */
export type Page<K extends ListOperationId> = ResultOf<K> & { items: Item<K>[]; next: string | undefined };

/** What may change per call. */
export interface CallOptions {
  signal?: AbortSignal;
  /** Attempts, the first included. */
  attempts?: number;
  /** How long one attempt may take (ms). */
  timeoutMs?: number;
}

/** A call's arguments: the input may be left out when nothing in it is required. */
export type Arguments<K extends OperationId> =
  object extends Input<K> ? [input?: Input<K>, options?: CallOptions] : [input: Input<K>, options?: CallOptions];
