import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { Webhook } from 'standardwebhooks';
import { eventSchemas } from './generated/contract.js';
import type { webhooks } from './generated/openapi.js';

/** An event as the contract declares it: narrow it by `type`. */
export type WebhookEvent = {
  [T in keyof webhooks]: webhooks[T]['post']['requestBody']['content']['application/json'];
}[keyof webhooks];

/** A delivered event with its `webhook-id`: the same on every attempt to deliver it, so deduplicate by it. */
export type ReceivedEvent = WebhookEvent & { id: string };

/** The delivery is not one to act on: its signature matches none of the secrets, or its payload is not the contract's. */
export class PetstoreWebhookError extends Error {
  override readonly name = 'PetstoreWebhookError';
}

/** Headers as Node's `IncomingHttpHeaders` or fetch's `Headers` give them. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;

const ajv = addFormats.default(new Ajv2020({ strict: false, allErrors: false }));
const validators = new Map<string, ValidateFunction>();

function validatorOf(type: string): ValidateFunction | undefined {
  const schema = eventSchemas[type];
  if (schema === undefined) return undefined;
  let validate = validators.get(type);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    validators.set(type, validate);
  }
  return validate;
}

function lowerCased(headers: HeadersLike): Record<string, string> {
  const entries = headers instanceof Headers ? [...headers.entries()] : Object.entries(headers);
  return Object.fromEntries(
    entries.flatMap(([name, value]) =>
      value === undefined ? [] : [[name.toLowerCase(), Array.isArray(value) ? value.join(', ') : value]],
    ),
  );
}

/**
 * A delivery, verified and typed: its signature checked with Standard Webhooks against each of the
 * endpoint's `secrets` (during a rotation, the new and the previous one), its payload against the
 * contract's schema for its `type`. Pass the body exactly as received, before any JSON parsing.
 */
export function unwrap(rawBody: string, headers: HeadersLike, secrets: readonly string[]): ReceivedEvent {
  const flat = lowerCased(headers);
  let payload: unknown;
  const verified = secrets.some((secret) => {
    try {
      payload = new Webhook(secret).verify(rawBody, flat);
      return true;
    } catch {
      return false;
    }
  });
  if (!verified) throw new PetstoreWebhookError('the webhook signature matches none of the secrets');
  const type = (payload as { type?: unknown }).type;
  const validate = typeof type === 'string' ? validatorOf(type) : undefined;
  if (validate === undefined) throw new PetstoreWebhookError(`unknown event type ${String(type)}`);
  if (!validate(payload)) {
    throw new PetstoreWebhookError(`${String(type)} payload is not the contract's: ${ajv.errorsText(validate.errors)}`);
  }
  return { ...(payload as WebhookEvent), id: flat['webhook-id'] ?? '' };
}
