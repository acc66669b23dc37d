import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import sha256 from 'fast-sha256';
import type { Api, ReceivedEvent } from './types.js';

/**
 * Which check a delivery failed, in the order they are made:
 * - `size`: the body is larger than `maxBodyBytes` (checked before any signature is computed);
 * - `secret`: a secret given is not a Standard Webhooks key (`whsec_` and base64);
 * - `timestamp`: `webhook-timestamp` is missing, not a number, or further from now than the tolerance;
 * - `signature`: a header is missing, or no `v1` signature matches any of the secrets;
 * - `payload`: signed rightly, but not UTF-8 JSON of an event the contract declares, as it declares it.
 */
export type WebhookCheck = 'size' | 'secret' | 'timestamp' | 'signature' | 'payload';

/** The delivery is not one to act on; `check` says why. The only error `unwrap` throws. */
export class PetstoreWebhookError extends Error {
  override readonly name = 'PetstoreWebhookError';

  constructor(
    readonly check: WebhookCheck,
    message: string,
  ) {
    super(message);
  }
}

/** Headers as Node's `IncomingHttpHeaders` or fetch's `Headers` give them. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

export interface UnwrapOptions {
  /** The largest body accepted, in bytes (default 1 MiB, 1 048 576). */
  maxBodyBytes?: number;
  /** How far `webhook-timestamp` may be from now, in seconds, either way (default 300). */
  toleranceSeconds?: number;
  /** The clock, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
}

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_TOLERANCE_SECONDS = 300;
const SECRET_PREFIX = 'whsec_';

const ajv = addFormats.default(new Ajv2020({ strict: false, allErrors: false }));

/** Per event type, its payload's validator, compiled when first needed, from one version's schemas. */
function validatorsOf(eventSchemas: Readonly<Record<string, object>>): (type: string) => ValidateFunction | undefined {
  const validators = new Map<string, ValidateFunction>();
  return (type) => {
    const schema = Object.hasOwn(eventSchemas, type) ? eventSchemas[type] : undefined;
    if (schema === undefined) return undefined;
    let validate = validators.get(type);
    if (validate === undefined) {
      validate = ajv.compile(schema);
      validators.set(type, validate);
    }
    return validate;
  };
}

function lowerCased(headers: HeadersLike | null | undefined): Record<string, string> {
  if (headers === null || typeof headers !== 'object') return {};
  const entries = headers instanceof Headers ? [...headers.entries()] : Object.entries(headers);
  return Object.fromEntries(
    entries.flatMap(([name, value]) =>
      typeof value === 'string' || Array.isArray(value)
        ? [[name.toLowerCase(), Array.isArray(value) ? value.join(' ') : value]]
        : [],
    ),
  );
}

function base64Bytes(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}

/** Whether two byte strings are equal, in a time that depends on their length alone. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return difference === 0;
}

function keyOf(secret: unknown, index: number): Uint8Array {
  const fail = () => new PetstoreWebhookError('secret', `secret ${index + 1} is not a whsec_ base64 key`);
  if (typeof secret !== 'string') throw fail();
  let key: Uint8Array;
  try {
    key = base64Bytes(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret);
  } catch {
    throw fail();
  }
  if (key.length === 0) throw fail();
  return key;
}

/** The signed content, `{id}.{timestamp}.{body}`, over the body's exact bytes. */
function signedContent(id: string, timestamp: string, body: Uint8Array): Uint8Array {
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const content = new Uint8Array(prefix.length + body.length);
  content.set(prefix);
  content.set(body, prefix.length);
  return content;
}

function verifySignature(bytes: Uint8Array, flat: Record<string, string>, secrets: readonly string[]): void {
  const id = flat['webhook-id'];
  const timestamp = flat['webhook-timestamp'] ?? '';
  const signatures = flat['webhook-signature'];
  if (id === undefined || signatures === undefined) {
    throw new PetstoreWebhookError('signature', 'webhook-id or webhook-signature is missing');
  }
  const passed = signatures.split(' ').flatMap((entry) => {
    const [version, signature] = entry.split(',');
    if (version !== 'v1' || signature === undefined) return [];
    try {
      return [base64Bytes(signature)];
    } catch {
      return [];
    }
  });
  const content = signedContent(id, timestamp, bytes);
  const expected = secrets.map((secret, index) => sha256.hmac(keyOf(secret, index), content));
  if (!expected.some((mac) => passed.some((signature) => constantTimeEqual(mac, signature)))) {
    throw new PetstoreWebhookError('signature', 'the webhook signature matches none of the secrets');
  }
}

function verifyTimestamp(flat: Record<string, string>, toleranceSeconds: number, now: number): void {
  const header = flat['webhook-timestamp'];
  if (header === undefined || !/^\d+$/.test(header)) {
    throw new PetstoreWebhookError('timestamp', 'webhook-timestamp is missing or not a number of seconds');
  }
  if (Math.abs(now / 1000 - Number(header)) > toleranceSeconds) {
    throw new PetstoreWebhookError('timestamp', `webhook-timestamp is more than ${toleranceSeconds} s from now`);
  }
}

function eventOf(bytes: Uint8Array, validatorOf: (type: string) => ValidateFunction | undefined): unknown {
  let payload: unknown;
  try {
    // A leading byte order mark is signed with the body, and then skipped (TextDecoder's default).
    payload = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw new PetstoreWebhookError('payload', 'the body is not UTF-8 JSON');
  }
  const type = typeof payload === 'object' && payload !== null ? (payload as { type?: unknown }).type : undefined;
  const validate = typeof type === 'string' ? validatorOf(type) : undefined;
  if (validate === undefined) throw new PetstoreWebhookError('payload', `unknown event type ${String(type)}`);
  if (!validate(payload)) {
    throw new PetstoreWebhookError(
      'payload',
      `${String(type)} payload is not the contract's: ${ajv.errorsText(validate.errors)}`,
    );
  }
  return payload;
}

/** `unwrap` of one version: its payloads checked against that version's event schemas. */
export function unwrapWith<A extends Api>(eventSchemas: Readonly<Record<string, object>>) {
  const validatorOf = validatorsOf(eventSchemas);
  return (
    body: string | Uint8Array,
    headers: HeadersLike,
    secrets: readonly string[],
    options: UnwrapOptions = {},
  ): ReceivedEvent<A> => verified(body, headers, secrets, options, validatorOf) as ReceivedEvent<A>;
}

/**
 * A delivery, verified and typed: its size checked against `maxBodyBytes` first, its timestamp
 * against the tolerance, its signature with Standard Webhooks against each of the endpoint's
 * `secrets` (during a rotation, the new and the previous one; compared in constant time) over the
 * body's exact bytes, then its payload against the contract's schema for its `type`. Pass the body
 * exactly as received: the bytes (a `Buffer` or `Uint8Array`), or the string they decode to. Any
 * failure is a `PetstoreWebhookError` whose `check` says which.
 */
function verified(
  body: string | Uint8Array,
  headers: HeadersLike,
  secrets: readonly string[],
  options: UnwrapOptions,
  validatorOf: (type: string) => ValidateFunction | undefined,
): unknown {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
    throw new PetstoreWebhookError('payload', 'the body is neither a string nor bytes');
  }
  // A string of more UTF-16 units than the limit encodes to more bytes still: refused unencoded.
  if (body.length > maxBodyBytes) throw new PetstoreWebhookError('size', `the body is over ${maxBodyBytes} bytes`);
  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
  if (bytes.length > maxBodyBytes) throw new PetstoreWebhookError('size', `the body is over ${maxBodyBytes} bytes`);
  const flat = lowerCased(headers);
  verifyTimestamp(flat, options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS, (options.now ?? Date.now)());
  verifySignature(bytes, flat, Array.isArray(secrets) ? secrets : []);
  return { ...(eventOf(bytes, validatorOf) as object), id: flat['webhook-id'] ?? '' };
}
