import type { components } from '../generated/openapi.js';

export type ErrorBody = components['schemas']['Error'];
export type ErrorCode = ErrorBody['code'];

/**
 * An error a handler or hook throws to answer with an Error body. It is an answer, not a fault:
 * it carries no stack trace (capturing one costs more than the rest of a refusal; BENCHMARKS.md),
 * and an unexpected failure is logged with its own error, never this one.
 */
export class ApiError extends Error {
  readonly statusCode: number;
  readonly code: ErrorCode;
  readonly headers: Record<string, string>;

  constructor(statusCode: number, code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = stackTraceLimit;
    this.statusCode = statusCode;
    this.code = code;
    this.headers = headers;
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message, status: this.statusCode };
  }
}

ApiError.prototype.name = 'ApiError';

export function errorBody(status: number, code: ErrorCode, message: string): ErrorBody {
  return { code, message, status };
}
