import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/** A key anywhere in a URL (`?access_token=psk_…`, its `_` percent-encoded or not), up to the next delimiter. */
const KEY_IN_URL = /psk(?:_|%5[fF])[^&#/?;]*/g;

/** The URL as logged: keys are sent only in `Authorization`, but a client may put one in the URL. */
export function withoutKeys(url: string): string {
  // Every request is logged: the plain search spares nearly all of them the regular expression.
  return url.includes('psk') ? url.replace(KEY_IN_URL, 'psk_[redacted]') : url;
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
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    // Client errors are routine; only a 5xx is an error of ours (its cause is logged with it).
    if (reply.statusCode >= 500) reply.log.error({ ...line, err: error }, 'request failed');
    else reply.log.info(line, 'request');
  }
}
