import { createHmac } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { type AddressGuard, webhookUrl } from './address-guard.js';
import { isHttpStatus, notAStatus } from '../domain/events.js';
import type { ReceiverAnswer } from '../domain/retry-policy.js';

/** A message to POST, signed with each of `secrets` (two while a rotated one's grace lasts). */
export interface SignedMessage {
  url: string;
  eventId: string;
  body: string;
  secrets: readonly string[];
  /** The delivery attempt's trace context, when traced: sent as `traceparent`. */
  traceParent?: string | undefined;
}

export type SendResult = ReceiverAnswer & { durationMs: number };

/**
 * Standard Webhooks' `v1` signature: HMAC-SHA256 of `id.timestamp.body` keyed by the bytes the
 * `whsec_` secret's base64 spells, in base64. Node's HMAC, not the standardwebhooks package's
 * JavaScript SHA-256, several times slower (BENCHMARKS.md); the tests verify every delivery with
 * that package's verifier. The key is decoded each time, which costs next to nothing: nothing is
 * kept of a secret once rotated away or removed.
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

/**
 * How much of a response's body is read, at most; past it the connection is dropped. Only the status
 * (and Retry-After) says anything, and a receiver's body must cost the server next to nothing.
 */
export const RESPONSE_BODY_LIMIT = 4 * 1024;

/** How much of an error's message is kept: a receiver chooses some of what it says. */
const ERROR_LENGTH_LIMIT = 200;

/** The start of an HTTP date in any of its three forms (RFC 9110): a day's name. Date.parse alone takes "1.5". */
const HTTP_DATE = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /;

/**
 * Retry-After as delta-seconds or an HTTP date, in milliseconds from now (0 for a date past); undefined
 * when it is neither, or not a finite number. How long it may be is the retry schedule's to cap.
 */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  const delay = /^[0-9]+$/.test(trimmed)
    ? Number(trimmed) * 1000
    : HTTP_DATE.test(trimmed)
      ? Date.parse(trimmed) - now
      : Number.NaN;
  return Number.isFinite(delay) ? Math.max(0, delay) : undefined;
}

/** What a status line says: a status of HTTP's 100-599, or an error (`HTTP/1.1 999` is no status). */
function answerOf(status: number | undefined, retryAfter: number | undefined): ReceiverAnswer {
  return isHttpStatus(status) ? { status, retryAfterMs: retryAfter } : { error: notAStatus(status) };
}

/**
 * POSTs signed messages: with a timeout, following no redirect, connecting only to addresses the
 * guard allows (a name is resolved through it; an address in the URL is checked as it is).
 *
 * An attempt is done when the response has ended, or RESPONSE_BODY_LIMIT of its body was read (then
 * the connection is dropped), or it failed; it fails unless that is within the timeout, headers and
 * body: until then it holds its place in the concurrency limits.
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
    const durationMs = () => Math.round(performance.now() - started);
    const target = this.target(message.url);
    if ('error' in target) return Promise.resolve({ ...target, durationMs: durationMs() });
    const { url, protocol } = target;
    return new Promise((resolve) => {
      const request = (protocol === 'https:' ? https : http).request(url, {
        method: 'POST',
        agent: this.agents[protocol],
        headers: headersFor(message, new Date()),
        lookup: this.guard.lookup,
      });
      let done = false;
      const finish = (answer: ReceiverAnswer) => {
        if (done) return;
        done = true;
        clearTimeout(deadline);
        resolve(
          'error' in answer
            ? { error: answer.error.slice(0, ERROR_LENGTH_LIMIT), durationMs: durationMs() }
            : { ...answer, durationMs: durationMs() },
        );
      };
      const giveUp = (answer: ReceiverAnswer) => {
        finish(answer);
        request.destroy();
      };
      const deadline = setTimeout(
        () => giveUp({ error: `no complete answer within ${this.timeoutMs} ms` }),
        this.timeoutMs,
      );
      request.on('response', (response) => {
        const header: string | string[] | undefined = response.headers['retry-after'];
        const answer = answerOf(
          response.statusCode,
          retryAfterMs(typeof header === 'string' ? header : header?.[0], Date.now()),
        );
        if ('error' in answer) {
          giveUp(answer);
          return;
        }
        // The body is read only to its end or the limit, and discarded: the status says everything.
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > RESPONSE_BODY_LIMIT) giveUp(answer);
        });
        response.on('end', () => finish(answer));
        response.on('close', () => {
          if (!response.complete) giveUp({ error: 'the connection closed before the response ended' });
        });
      });
      request.on('error', (error) => {
        giveUp({ error: error.name === 'RefusedAddress' ? `refused: ${error.message}` : error.message });
      });
      request.end(message.body);
    });
  }

  /** Where a message goes, or why it may not: the URL, and an address in it, checked. */
  private target(text: string): { url: URL; protocol: 'http:' | 'https:' } | { error: string } {
    let url: URL;
    try {
      url = webhookUrl(text);
    } catch (error) {
      return { error: (error as Error).message };
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const refusal = isIP(host) === 0 ? undefined : this.guard.refusal(host);
    if (refusal !== undefined) return { error: `refused: ${refusal}` };
    return { url, protocol: url.protocol as 'http:' | 'https:' };
  }

  close(): void {
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }
}
