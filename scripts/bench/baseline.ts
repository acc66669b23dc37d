/**
 * The benchmark's baseline: the measured operations written by hand in plain fastify with inline
 * JSON schemas, no contract tooling, sharing the rest with the project (store and SQL, key look-up,
 * cursors, Error body, log line). Configured like the server, by the same environment variables.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyRequest } from 'fastify';
import { hashKey } from '../../src/auth/api-keys.js';
import { ApiError } from '../../src/errors.js';
import { RequestLog } from '../../src/logging.js';
import { decodeCursor, encodeCursor } from '../../src/paging.js';
import { loadConfig } from '../../src/config.js';
import { openStorage } from '../../src/storage/index.js';
import type { NewPetRecord, PetStatus } from '../../src/storage/types.js';

const MAX_ID = 9007199254740991;
const STATUSES = ['available', 'pending', 'sold'];
const REALM = 'Bearer realm="petstore"';
const BEARER = /^bearer +([A-Za-z0-9._~+/-]+=*) *$/i;
const DEPRECATION = {
  deprecation: '@1795305600',
  sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  link: '</v1/pets>; rel="successor-version"',
};

const id = { type: 'integer', minimum: 1, maximum: MAX_ID };
const pet = {
  type: 'object',
  required: ['id', 'name', 'categoryId', 'status'],
  additionalProperties: false,
  properties: { id, name: { type: 'string' }, categoryId: id, status: { type: 'string', enum: STATUSES } },
};
const newPet = {
  type: 'object',
  required: ['name', 'categoryId'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 100, pattern: '\\S' },
    categoryId: id,
    status: { type: 'string', enum: STATUSES, default: 'available' },
  },
};
const error = {
  type: 'object',
  required: ['code', 'message', 'status'],
  properties: { code: { type: 'string' }, message: { type: 'string' }, status: { type: 'integer' } },
};
const listQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    status: { type: 'string', enum: STATUSES },
    cursor: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' },
  },
};

const env = process.env;
const storage = await openStorage(loadConfig(env).database);
const app = Fastify({
  logger: { level: env.LOG_LEVEL ?? 'info', redact: ['req.headers.authorization', 'headers.authorization'] },
  logController: new RequestLog(),
  genReqId: () => randomUUID(),
  bodyLimit: 16 * 1024,
  ajv: { customOptions: { removeAdditional: false } },
});

async function authenticate(request: FastifyRequest): Promise<void> {
  const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
  const principal = token === undefined ? undefined : await storage.accounts.findPrincipal(hashKey(token));
  if (principal === undefined) {
    const challenge = token === undefined ? REALM : `${REALM}, error="invalid_token"`;
    throw new ApiError(401, 'unauthorized', 'Missing or invalid API key', { 'www-authenticate': challenge });
  }
}

app.addHook('onRequest', async (request, reply) => {
  reply.headers({ 'x-request-id': request.id, 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
});

app.setErrorHandler((failure: FastifyError, _request, reply) => {
  const apiError =
    failure instanceof ApiError
      ? failure
      : failure.validation !== undefined || (failure.statusCode ?? 500) < 500
        ? new ApiError(400, 'invalid_request', failure.message)
        : new ApiError(500, 'internal_error', 'Internal server error');
  return reply.code(apiError.statusCode).headers(apiError.headers).send(apiError.toBody());
});

app.get<{ Querystring: { limit: number; status?: PetStatus; cursor?: string } }>(
  '/v1/pets',
  {
    onRequest: authenticate,
    schema: { querystring: listQuery, response: { 200: { type: 'array', items: pet }, '4xx': error } },
  },
  async (request, reply) => {
    const { limit, status, cursor } = request.query;
    const page = await storage.pets.list({
      limit,
      status,
      afterId: cursor === undefined ? undefined : decodeCursor(cursor),
    });
    const last = page.items.at(-1);
    if (page.hasMore && last !== undefined) {
      const next = new URLSearchParams({ limit: String(limit) });
      if (status !== undefined) next.set('status', status);
      next.set('cursor', encodeCursor(last.id));
      reply.header('link', `</v1/pets?${next.toString()}>; rel="next"`);
    }
    return page.items;
  },
);

app.post<{ Body: NewPetRecord }>(
  '/v1/pets',
  { onRequest: authenticate, schema: { body: newPet, response: { 201: pet, '4xx': error } } },
  async (request, reply) => {
    const created = await storage.pets.create(request.body);
    if (created.outcome !== 'created') throw new Error('no idempotency key was sent');
    const { pet, version } = created.created;
    return reply.code(201).header('location', `/v1/pets/${pet.id}`).header('etag', `"${version}"`).send(pet);
  },
);

app.get<{ Params: { petId: number } }>(
  '/v1/pets/:petId',
  {
    onRequest: [async (_request, reply) => void reply.headers(DEPRECATION), authenticate],
    schema: { params: { type: 'object', properties: { petId: id } }, response: { 200: pet, '4xx': error } },
  },
  async (request, reply) => {
    const found = await storage.pets.get(request.params.petId);
    if (found === undefined) throw new ApiError(404, 'not_found', `No pet with id ${request.params.petId}`);
    return reply.header('etag', `"${found.version}"`).send(found.pet);
  },
);

await app.listen({ host: env.HOST ?? '127.0.0.1', port: Number(env.PORT ?? '3000') });
