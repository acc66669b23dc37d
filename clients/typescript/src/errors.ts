import { unknownCode } from './types.js';

/** Per operation, per status, the codes its contract lists: what tells a code it knows from a later one. */
export type ErrorCodeTable = Readonly<Record<string, Readonly<Record<string, readonly string[]>>>>;

/** What a problem details answer (RFC 9457, `application/problem+json`) adds to an error. */
export interface ProblemFields {
  /** The problem's type URI, which documents it. */
  type?: string | undefined;
  /** The problem's title: the same for every answer of its type. */
  title?: string | undefined;
}

/**
 * The API answered with an error: its body (an `Error`, or a problem's details), and what its
 * headers said. Each version's entry point has a subclass of its own, knowing its contract's codes.
 */
export class PetstoreError<K extends string = string, Code extends string = string> extends Error {
  override readonly name = 'PetstoreError';
  /** The codes of the version whose client made the error; each version's subclass sets its own. */
  static readonly codes: ErrorCodeTable = {};

  /**
   * What went wrong: one of the codes the contract lists for this operation (a closed union, so a
   * misspelt code does not compile), or `'unknown'` for a code a later version added (see `rawCode`).
   */
  readonly code: Code;
  /** A problem's type URI (the versions whose errors are problem details); undefined otherwise. */
  readonly type: string | undefined;
  /** A problem's title (the versions whose errors are problem details); undefined otherwise. */
  readonly title: string | undefined;

  constructor(
    readonly operationId: K,
    readonly status: number,
    /** The code the answer carried, as sent (`''` when it carried none). */
    readonly rawCode: string,
    /** The answer's own words: an `Error`'s `message`, a problem's `detail`. */
    message: string,
    /** The answer's `X-Request-Id`. */
    readonly requestId: string | undefined,
    /** Seconds to wait before retrying (`Retry-After`), when the answer said. */
    readonly retryAfter: number | undefined,
    /** On a `412`, the resource's current `ETag`, when the answer carries it. */
    readonly etag: string | undefined,
    problem: ProblemFields = {},
  ) {
    super(`${operationId}: ${status} ${rawCode || '(no code)'}: ${message}`);
    const listed = Object.values(new.target.codes[operationId] ?? {}).some((codes) => codes.includes(rawCode));
    this.code = (listed ? rawCode : unknownCode) as Code;
    this.type = problem.type;
    this.title = problem.title;
  }
}

/** No answer came: the connection failed, was cut, or an attempt outlasted its timeout. */
export class PetstoreNetworkError extends Error {
  override readonly name = 'PetstoreNetworkError';

  constructor(
    readonly operationId: string,
    cause: unknown,
  ) {
    super(
      `${operationId}: no answer: ${cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause)}`,
      { cause },
    );
  }
}
