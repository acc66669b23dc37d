import type { components } from '../../generated/openapi.js';

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

  #answer: PreparedAnswer | undefined;

  /**
   * The answer's fixed part, built on first use: the body serialized once and the headers that go
   * with it. A refusal built once (a 401, a 429 for a given wait, the overload 503) is answered
   * many times without serializing again (plugins/errors.ts, `reply.refuse`).
   */
  get prepared(): PreparedAnswer {
    this.#answer ??= prepareAnswer(this.toBody(), this.headers);
    return this.#answer;
  }
}

/**
 * A JSON answer's body serialized once and the headers that go with it. A string, not a Buffer:
 * Node writes a string body with the header block in one write.
 */
export function prepareAnswer(body: unknown, headers: Readonly<Record<string, string>>): PreparedAnswer {
  const text = JSON.stringify(body);
  return {
    body: text,
    headers: {
      'content-type': JSON_CONTENT_TYPE,
      'content-length': String(Buffer.byteLength(text)),
      'cache-control': 'no-store',
      ...headers,
    },
  };
}

/** The media type of every Error body, as fastify sends JSON. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

export interface PreparedAnswer {
  body: string;
  headers: Readonly<Record<string, string>>;
}

ApiError.prototype.name = 'ApiError';

/** How many characters of a client's string (a path, a parameter's name) a message shows. */
const SHOWN_LENGTH = 200;

/** A client's string as a message shows it: not at any length. */
export function shown(text: string): string {
  return text.length > SHOWN_LENGTH ? `${text.slice(0, SHOWN_LENGTH)}…` : text;
}

export function errorBody(status: number, code: ErrorCode, message: string): ErrorBody {
  return { code, message, status };
}
