import type { ErrorCode, OperationId } from './types.js';

/** The API answered with an error: its `Error` body, and what its headers said. */
export class PetstoreError<K extends OperationId = OperationId> extends Error {
  override readonly name = 'PetstoreError';

  constructor(
    readonly operationId: K,
    readonly status: number,
    /** What went wrong, one of the codes the contract lists for this operation (or a newer one). */
    readonly code: ErrorCode<K>,
    message: string,
    /** The answer's `X-Request-Id`. */
    readonly requestId: string | undefined,
    /** Seconds to wait before retrying (`Retry-After`), when the answer said. */
    readonly retryAfter: number | undefined,
    /** On a `412`, the resource's current `ETag`, when the answer carries it. */
    readonly etag: string | undefined,
  ) {
    super(`${operationId}: ${status} ${code}: ${message}`);
  }
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
