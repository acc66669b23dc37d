/**
 * The types of each operation of a version of the API, derived from that version's generated
 * contract types (`A`, which each version's generated entry point binds): no type here is written
 * per operation, nor per version.
 */

/** What the client must know of an operation to send it and send it again (a generated table's entry). */
export interface OperationEntry {
  readonly method: string;
  readonly path: string;
  readonly requestMediaType?: string;
  readonly arrays?: Readonly<Record<string, { readonly explode: boolean }>>;
  readonly safeToResend: boolean;
  readonly idempotencyKey?: true;
  /** A list that pages: the query parameter holding the next page's position. */
  readonly cursor?: string;
  /** The list answers an envelope: its items' property, and its next cursor's (null on the last page). */
  readonly envelope?: { readonly items: string; readonly next: string };
  /** Its errors are problem details (RFC 9457): their text is `detail`. */
  readonly problem?: true;
  readonly etag?: 'always' | 'sometimes';
}

/** One version's contract, as its generated entry point gives it to these types. */
export interface Api {
  /** openapi-typescript's `operations`. */
  operations: object;
  /** The generated table of operations. */
  table: Readonly<Record<string, OperationEntry>>;
  /** Per operation, per status, the codes of its errors (`x-error-codes`). */
  errorCodes: object;
  /** Each operation, documented as the contract documents it. */
  docs: object;
  /** openapi-typescript's `webhooks`. */
  webhooks: object;
  /** Per status schema, the moves of each status (`x-transitions`). */
  transitions: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>>;
}

/** `T[F]` when T has F; never otherwise. */
type Field<T, F extends PropertyKey> = F extends keyof T ? T[F] : never;

/** The code an error reports when the server answered one its version of the contract does not list. */
export const unknownCode = 'unknown';
export type UnknownCode = typeof unknownCode;

/** An operation of the API, by its `operationId`. */
export type OperationId<A extends Api> = keyof A['table'] & keyof A['operations'] & string;

type Operation<A extends Api, K extends PropertyKey> = Field<A['operations'], K>;
type Entry<A extends Api, K extends PropertyKey> = Field<A['table'], K>;
type RequestBody<A extends Api, K extends PropertyKey> = [Field<Operation<A, K>, 'requestBody'>] extends [
  { content: infer C },
]
  ? C[keyof C]
  : never;

/** Headers the client sends itself when the call does not: a new Idempotency-Key for each create. */
type ClientSuppliedHeader = 'Idempotency-Key';
type HeaderParameters<A extends Api, K extends PropertyKey> = NonNullable<
  Field<Field<Operation<A, K>, 'parameters'>, 'header'>
>;
/** A call's headers: the contract's, those the client supplies made optional. */
type Loosened<H> = Omit<H, ClientSuppliedHeader> & Partial<Pick<H, ClientSuppliedHeader & keyof H>>;
type CallHeaders<A extends Api, K extends PropertyKey> = [HeaderParameters<A, K>] extends [never]
  ? { header?: never }
  : object extends Loosened<HeaderParameters<A, K>>
    ? { header?: Loosened<HeaderParameters<A, K>> }
    : { header: Loosened<HeaderParameters<A, K>> };

/** What a call of operation K takes: its `path`, `query` and `header` parameters, and its `body`. */
export type Input<A extends Api, K extends OperationId<A>> = Omit<
  Field<Operation<A, K>, 'parameters'>,
  'cookie' | 'header'
> &
  CallHeaders<A, K> &
  ([RequestBody<A, K>] extends [never] ? unknown : { body: RequestBody<A, K> });

type Responses<A extends Api, K extends PropertyKey> = Field<Operation<A, K>, 'responses'>;
type Success<A extends Api, K extends PropertyKey> = Responses<A, K>[Extract<
  keyof Responses<A, K>,
  200 | 201 | 202 | 203 | 204
>];

/** What a success of operation K carries: its JSON body, or `undefined` when it has none (a 204). */
export type Data<A extends Api, K extends OperationId<A>> =
  Success<A, K> extends { content: infer C } ? C[keyof C] : undefined;

/** The operations that page (a list taking a cursor): `each` and `page` take them. A list of one page does not. */
export type ListOperationId<A extends Api> = {
  [K in OperationId<A>]: Entry<A, K> extends { cursor: string } ? K : never;
}[OperationId<A>];

type Elements<L> = L extends readonly (infer I)[] ? I : never;

/** An item of list operation K: of the array it answers, or of its envelope's items. */
export type Item<A extends Api, K extends ListOperationId<A>> =
  Entry<A, K> extends { envelope: { items: infer F extends string } }
    ? Elements<Field<Data<A, K>, F>>
    : Elements<Data<A, K>>;

/**
 * A code the errors of operation K may carry: the closed union its `x-error-codes` lists, so that
 * comparing with a code it never answers (or a misspelt one) does not compile.
 */
export type ErrorCode<A extends Api, K extends OperationId<A>> = Extract<
  Field<A['errorCodes'], K>[keyof Field<A['errorCodes'], K>],
  string
>;

/**
 * An error's `code`: one of operation K's codes, or `'unknown'` when the server answered a code this
 * version of the contract does not list (a later minor version's); `rawCode` then holds it.
 */
export type ReportedCode<A extends Api, K extends OperationId<A>> = ErrorCode<A, K> | UnknownCode;

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
export type ResultOf<A extends Api, K extends OperationId<A>> = Result<
  Data<A, K>,
  Entry<A, K> extends { etag: 'always' } ? string : string | undefined
>;

/** One page of list operation K: its items, and the cursor of the next page (undefined on the last). */
export type Page<A extends Api, K extends ListOperationId<A>> = ResultOf<A, K> & {
  items: Item<A, K>[];
  next: string | undefined;
};

/** What may change per call. */
export interface CallOptions {
  signal?: AbortSignal;
  /** Attempts, the first included. */
  attempts?: number;
  /** How long one attempt may take (ms). */
  timeoutMs?: number;
}

/** A call's arguments: the input may be left out when nothing in it is required. */
export type Arguments<A extends Api, K extends OperationId<A>> =
  object extends Input<A, K>
    ? [input?: Input<A, K>, options?: CallOptions]
    : [input: Input<A, K>, options?: CallOptions];

type Machines<A extends Api> = A['transitions'];
/** A status of any schema with `x-transitions` (an animal's, an order's). */
export type Status<A extends Api> = { [M in keyof Machines<A>]: keyof Machines<A>[M] & string }[keyof Machines<A>];
/** The statuses of the schema `from` belongs to. */
export type StatusBeside<A extends Api, F extends Status<A>> = {
  [M in keyof Machines<A>]: F extends keyof Machines<A>[M] ? keyof Machines<A>[M] & string : never;
}[keyof Machines<A>];

/** An event as the contract declares it: narrow it by `type`. */
export type WebhookEvent<A extends Api> = {
  [T in keyof A['webhooks']]: A['webhooks'][T] extends {
    post: { requestBody?: { content: { 'application/json': infer E } } };
  }
    ? E
    : never;
}[keyof A['webhooks']];

/** A delivered event with its `webhook-id`: the same on every attempt to deliver it, so deduplicate by it. */
export type ReceivedEvent<A extends Api> = WebhookEvent<A> & { id: string };
