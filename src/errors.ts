import type { components } from '../generated/openapi.js';

export type ErrorBody = components['schemas']['Error'];
export type ErrorCode = ErrorBody['code'];

/** An error a handler or hook throws to answer with an Error body. */
export class ApiError extends Error {
  readonly headers: Record<string, string>;

  constructor(
    readonly statusCode: number,
    readonly code: ErrorCode,
    message: string,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.headers = headers;
  }

  toBody(): ErrorBody {
    return { code: this.code, message: this.message, status: this.statusCode };
  }
}

export function errorBody(status: number, code: ErrorCode, message: string): ErrorBody {
  return { code, message, status };
}
