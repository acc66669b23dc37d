import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { AddressGuard } from './address-guard.js';

/** A message to POST, signed with each of `secrets` (two while a rotated one's grace lasts). */
export interface SignedMessage {
  url: string;
  eventId: string;
  body: string;
  secrets: readonly string[];
  /** The delivery attempt's trace context, when traced: sent as `traceparent`. */
  traceParent?: string | undefined;
}

export type SendResult =
  { status: number; retryAfterMs?: number | undefined; durationMs: number } | { error: string; durationMs: number };

/**
 * Standard Webhooks' `v1` signature: HMAC-SHA256 of `id.timestamp.body` keyed by the bytes the
 * `whsec_` secret's base64 spells, in base64. Node's HMAC, not the standardwebhooks package's
 * JavaScript SHA-256 (11.6 µs a signature against 2.5); the tests verify every delivery with that
 * package's verifier. The key is decoded each time (0.3 µs): nothing is kept of a secret once
 * rotated away or removed.
 */
function signature(secret: string, eventId: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.slice(secret.indexOf('_') + 1), 'base64');
  return `v1,${createHmac('sha256', key).update(`${eventId}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * Only the headers Standard Webhooks defines, the body's type, and the attempt's `traceparent` when
 * traced: nothing of the server leaks.
 */
function headersFor(message: SignedMessage, at: Date) {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const signatures = message.secrets.map((secret) => signature(secret, message.eventId, timestamp, message.body));
  const traced = message.traceParent === undefined ? {} : { traceparent: message.traceParent };
  return {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(message.body)),
    'user-agent': 'petstore-webhooks',
    'webhook-id': message.eventId,
    'webhook-timestamp': timestamp,
    'webhook-signature': signatures.join(' '),
    ...traced,
  };
}

/** Retry-After in seconds or as an HTTP date, in milliseconds from now. */
function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  if (/^[0-9]+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * POSTs signed messages: with a timeout, following no redirect, connecting only to addresses the
 * guard allows (a name is resolved through it; an address in the URL is checked as it is).
 */
export class Sender {
  private readonly agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 64 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 64 }),
  };

  constructor(
    private readonly guard: AddressGuard,
    private readonly timeoutMs: number,
  ) {}

  send(message: SignedMessage): Promise<SendResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    return new Promise((resolve) => {
      const fail = (error: string) => resolve({ error, durationMs: elapsed() });
      let url: URL;
      try {
        url = new URL(message.url);
      } catch {
        fail('the URL is not valid');
        return;
      }
      const protocol = url.protocol === 'https:' ? 'https:' : url.protocol === 'http:' ? 'http:' : undefined;
      if (protocol === undefined) {
        fail('only http and https URLs are allowed');
        return;
      }
      const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
      const refusal = isIP(host) === 0 ? undefined : this.guard.refusal(host);
      if (refusal !== undefined) {
        fail(`refused: ${refusal}`);
        return;
      }
      const request = (protocol === 'https:' ? https : http).request(url, {
        method: 'POST',
        agent: this.agents[protocol],
        headers: headersFor(message, new Date()),
        lookup: this.guard.lookup,
        timeout: this.timeoutMs,
      });
      const deadline = setTimeout(
        () => request.destroy(new Error(`no answer within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      request.on('response', (response) => {
        // The body is not read, only drained: the status says everything.
        response.resume();
        response.on('end', () => clearTimeout(deadline));
        response.on('error', () => clearTimeout(deadline));
        const header: string | string[] | undefined = response.headers['retry-after'];
        resolve({
          status: response.statusCode ?? 0,
          retryAfterMs: retryAfterMs(typeof header === 'string' ? header : header?.[0], Date.now()),
          durationMs: elapsed(),
        });
      });
      request.on('timeout', () => request.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      request.on('error', (error) => {
        clearTimeout(deadline);
        fail(error.name === 'RefusedAddress' ? `refused: ${error.message}` : error.message);
      });
      request.end(message.body);
    });
  }

  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}
