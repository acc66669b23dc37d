import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * What may be an API key in a URL: 43 or more URL-safe characters in a row, any of them
 * percent-encoded (once or twice). A key is `psk_` and 43 such characters, however a client encodes it.
 */
const KEY_LIKE_IN_URL = /(?:[A-Za-z0-9_-]|%(?:25)?[0-9A-Fa-f]{2}){43,}/g;
const SHORTEST_KEY_LIKE = 43;

/** The URL as logged: keys are sent only in `Authorization`, but a client may put one in the URL. */
export function withoutKeys(url: string): string {
  // Every request is logged, and nearly every URL is too short to hold a key.
  return url.length < SHORTEST_KEY_LIKE ? url : url.replace(KEY_LIKE_IN_URL, '[redacted]');
}

/**
 * One line per request, when it completes, instead of fastify's two. Only method, URL, status and
 * time are logged: never headers, so no `Authorization` value can reach a log, and the URL
 * without any key sent in it.
 */
export class RequestLog extends LogController {
  override incomingRequest(): void {
    // Nothing: the request's one line is written when it completes.
  }

  override requestCompleted(error: Error | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = {
      method: request.method,
      url: withoutKeys(request.url),
      // The client's address: from X-Forwarded-For only when the peer is a trusted proxy (TRUST_PROXY).
      client: request.ip,
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    // Client errors are routine; only a 5xx is an error of ours (its cause is logged with it).
    if (reply.statusCode >= 500) reply.log.error({ ...line, err: error }, 'request failed');
    else reply.log.info(line, 'request');
  }
}
