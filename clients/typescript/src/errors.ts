import { errorCodes, unknownCode } from './generated/contract.js';
import type { ErrorCode, OperationId, ReportedCode } from './types.js';

/** The API answered with an error: its `Error` body, and what its headers said. */
export class PetstoreError<K extends OperationId = OperationId> extends Error {
  override readonly name = 'PetstoreError';

  constructor(
    readonly operationId: K,
    readonly status: number,
    /** The code the answer carried, as sent (`''` when it carried none). */
    readonly rawCode: string,
    message: string,
    /** The answer's `X-Request-Id`. */
    readonly requestId: string | undefined,
    /** Seconds to wait before retrying (`Retry-After`), when the answer said. */
    readonly retryAfter: number | undefined,
    /** On a `412`, the resource's current `ETag`, when the answer carries it. */
    readonly etag: string | undefined,
  ) {
    super(`${operationId}: ${status} ${rawCode || '(no code)'}: ${message}`);
    this.code = knownCode(operationId, rawCode);
  }

  /**
   * What went wrong: one of the codes the contract lists for this operation (a closed union, so a
   * misspelt code does not compile), or `'unknown'` for a code a later version added (see `rawCode`).
   */
  readonly code: ReportedCode<K>;
}

/** `code` when operation `operationId` may answer it; `'unknown'` otherwise. */
function knownCode<K extends OperationId>(operationId: K, code: string): ReportedCode<K> {
  const listed = Object.values(errorCodes[operationId] ?? {}).some((codes) => codes.includes(code));
  return (listed ? code : unknownCode) as ReportedCode<K>;
}

/** Whether `code` is one the contract lists for the operation of `error`: narrows `error.code` to them. */
export function isKnownCode<K extends OperationId>(
  error: PetstoreError<K>,
): error is PetstoreError<K> & { readonly code: ErrorCode<K> } {
  return error.code !== unknownCode;
}

/** No answer came: the connection failed, was cut, or an attempt outlasted its timeout. */
export class PetstoreNetworkError extends Error {
  override readonly name = 'PetstoreNetworkError';

  constructor(
    readonly operationId: OperationId,
    cause: unknown,
  ) {
    super(
      `${operationId}: no answer: ${cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause)}`,
      { cause },
    );
  }
}

/** Whether `error` is an API error, of operation `operationId` when given: its `code` is then typed. */
export function isPetstoreError<K extends OperationId>(error: unknown, operationId?: K): error is PetstoreError<K> {
  return error instanceof PetstoreError && (operationId === undefined || error.operationId === operationId);
}
