import type { FastifyReply, preHandlerHookHandler, preSerializationHookHandler } from 'fastify';
import { type ApiError, prepareAnswer, type PreparedAnswer } from '../domain/errors.js';
import type { VersionChain } from '../versions/chain.js';
import type { Headers } from '../versions/change.js';

/** An answer written as it is, its status included: a refusal as an older version gives it. */
export interface MigratedAnswer extends PreparedAnswer {
  status: number;
}

/** Header values as `prepareAnswer` takes them: a change may leave one undefined (removed) or a list. */
function headerValues(headers: Headers): Record<string, string> {
  const values: Record<string, string> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) values[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return values;
}

/** Makes the reply's headers those a change left: set what it set or changed, remove what it removed. */
function applyHeaders(reply: FastifyReply, before: Headers, after: Headers): void {
  for (const name in after) {
    const value = after[name];
    if (value === undefined) reply.removeHeader(name);
    else if (value !== before[name]) reply.header(name, value);
  }
  for (const name in before) if (!(name in after)) reply.removeHeader(name);
}

/** Whether a request target is under a version's base path (`/v1`, `/v1/pets`, `/v1?x`, not `/v10`). */
export function servesUrl(basePath: string, url: string): boolean {
  return url.startsWith(basePath) && ['', '/', '?'].includes(url.charAt(basePath.length));
}

/**
 * An older version served beside the newest: its requests are migrated up to the newest version
 * once validated against its own contract, its answers (errors included) down before its own
 * contract's serializer writes them (docs/versions.md). Only an older version's routes carry these
 * hooks, and only when a change since does something: the newest version's routes pay nothing.
 */
export class OlderVersion {
  /** Whether any change since migrates a request, or a response. */
  readonly migratesRequests: boolean;
  readonly migratesResponses: boolean;

  constructor(
    readonly major: number,
    readonly basePath: string,
    private readonly chain: VersionChain,
  ) {
    const changes = chain.changesSince(major);
    this.migratesRequests = changes.some((change) => change.requestUp !== undefined);
    this.migratesResponses = changes.some((change) => change.responseDown !== undefined);
  }

  /** Whether a request target is under this version's base path. */
  serves(url: string): boolean {
    return servesUrl(this.basePath, url);
  }

  /** The newest version's operation that answers `operationId` of this version. */
  answeringOperation(operationId: string): string {
    return this.chain.answeringOperation(this.major, operationId);
  }

  /** A preHandler: the request, validated against this version's contract, made the newest version's. */
  requestUp(operationId: string): preHandlerHookHandler {
    return (request, _reply, done) => {
      const migrated = this.chain.requestUp(this.major, {
        operationId,
        headers: request.headers,
        params: request.params as Record<string, unknown>,
        query: request.query as Record<string, unknown>,
        body: request.body,
      });
      request.params = migrated.params;
      request.query = migrated.query;
      request.body = migrated.body;
      done();
    };
  }

  /**
   * A preSerialization hook: the newest version's answer (a success, or an error sent through
   * fastify's error handler) made this version's, for this version's serializer to write.
   */
  responseDown(operationId: string): preSerializationHookHandler {
    return (request, reply, payload, done) => {
      const before = reply.getHeaders() as Headers;
      const params = request.params as Record<string, unknown>;
      const query = request.query as Record<string, unknown>;
      const { url } = request;
      const response = {
        operationId,
        params,
        url,
        query,
        status: reply.statusCode,
        headers: { ...before },
        body: payload,
      };
      this.chain.responseDown(this.major, response);
      applyHeaders(reply, before, response.headers);
      if (response.status !== reply.statusCode) reply.code(response.status);
      done(null, response.body);
    };
  }

  /**
   * Migrates errors written raw (refusals, the overload 503, 404 and 405), each once per operation
   * (`''` for a path this version does not serve): a refusal built once is answered many times.
   */
  errorAnswers(operationId: string): (error: ApiError) => MigratedAnswer {
    const answers = new WeakMap<ApiError, MigratedAnswer>();
    return (error) => {
      let answer = answers.get(error);
      if (answer === undefined) {
        const response = {
          operationId,
          params: {},
          status: error.statusCode,
          headers: error.answerHeaders,
          body: error.toBody(),
        };
        this.chain.responseDown(this.major, response);
        answer = { status: response.status, ...prepareAnswer(response.body, headerValues(response.headers)) };
        answers.set(error, answer);
      }
      return answer;
    };
  }
}
