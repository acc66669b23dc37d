import type { components } from '../../generated/openapi.js';
import type { components as v1 } from '../../generated/v1.js';
import { JSON_CONTENT_TYPE, PROBLEM_CONTENT_TYPE } from '../contract/media-types.js';

/** Every error of the newest version: a problem detail (RFC 9457). */
export type ProblemBody = components['schemas']['Problem'];
/** v1's error body, which the problemDetails change makes of a problem (src/versions/changes/). */
export type ErrorBody = v1['schemas']['Error'];
export type ErrorCode = components['schemas']['ErrorCode'];

/** A problem's `type` is this followed by its code. */
export const PROBLEM_TYPE_BASE = 'https://petstore.example/problems/';

/**
 * Each code's problem `title`, the same for every problem of its type: the contract lists them in
 * `Problem`'s `x-problem-types` (test/v2-problems.test.ts holds the two equal).
 */
export const PROBLEM_TITLES: Readonly<Record<ErrorCode, string>> = {
  invalid_request: 'Invalid request',
  malformed_json: 'Malformed JSON',
  unauthorized: 'Unauthorized',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  idempotency_key_reused: 'Idempotency key reused',
  request_timeout: 'Request timeout',
  headers_too_large: 'Request headers too large',
  rate_limited: 'Rate limited',
  internal_error: 'Internal error',
  service_unavailable: 'Service unavailable',
  invalid_transition: 'Invalid transition',
  pet_on_order: 'Pet on order',
  pet_not_available: 'Pet not available',
  precondition_failed: 'Precondition failed',
  insufficient_scope: 'Insufficient scope',
  webhook_url_refused: 'Webhook URL refused',
  webhook_disabled: 'Webhook disabled',
  webhook_limit_reached: 'Webhook limit reached',
  not_implemented: 'Not implemented',
};

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

  /** The body as the newest version answers it; an older version's comes down through its changes. */
  toBody(): ProblemBody {
    const { code } = this;
    return {
      type: PROBLEM_TYPE_BASE + code,
      title: PROBLEM_TITLES[code],
      status: this.statusCode,
      detail: this.message,
      code,
    };
  }

  /** The answer's own headers and the problem's media type: what the newest version sends with the body. */
  get answerHeaders(): Record<string, string> {
    return { 'content-type': PROBLEM_CONTENT_TYPE, ...this.headers };
  }

  #answer: PreparedAnswer | undefined;

  /**
   * The answer's fixed part, built on first use: the body serialized once and the headers that go
   * with it. A refusal built once (a 401, a 429 for a given wait, the overload 503) is answered
   * many times without serializing again (plugins/errors.ts, `reply.refuse`).
   */
  get prepared(): PreparedAnswer {
    this.#answer ??= prepareAnswer(this.toBody(), this.answerHeaders);
    return this.#answer;
  }
}

/**
 * A JSON answer's body serialized once and the headers that go with it (`content-type` among them
 * for another media type than JSON's). A string, not a Buffer: Node writes a string body with the
 * header block in one write.
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

export { JSON_CONTENT_TYPE, PROBLEM_CONTENT_TYPE };

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
