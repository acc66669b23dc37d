/**
 * The benchmark's baseline: the measured operations written by hand in plain fastify with inline
 * JSON schemas, no contract tooling, sharing the rest with the project (store and SQL, key look-up,
 * cursors, Error body, log line). Configured like the server, by the same environment variables.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyRequest } from 'fastify';
import { hashKey } from '../../src/auth/api-keys.js';
import { ApiError } from '../../src/domain/errors.js';
import { RequestLog } from '../../src/plugins/request-log.js';
import { decodeCursor, encodeCursor } from '../../src/handlers/cursors.js';
import { loadConfig } from '../../src/config/environment.js';
import { openStorage } from '../../src/storage/index.js';
import type { NewPetRecord, OrderStatus, PetFields, PetState, PetStatus } from '../../src/storage/types.js';

const MAX_ID = 9007199254740991;
const STATUSES = ['available', 'pending', 'sold'];
/** PetStatus's moves (the contract's x-transitions), written out. */
const PET_MOVES: Record<PetStatus, PetStatus[]> = {
  available: ['pending', 'sold'],
  pending: ['available', 'sold'],
  sold: [],
};
/** What completing or cancelling an order makes of its pet; a placed order is the only one that moves. */
const PET_AFTER_ORDER = { completed: 'sold', cancelled: 'available' } as const;
const REALM = 'Bearer realm="petstore"';
const BEARER = /^bearer +([A-Za-z0-9._~+/-]+=*) *$/i;
const DEPRECATION = {
  deprecation: '@1795305600',
  sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  link: '</v1/pets>; rel="successor-version"',
};

const id = { type: 'integer', minimum: 1, maximum: MAX_ID };
const status = { type: 'string', enum: STATUSES };
const pet = {
  type: 'object',
  required: ['id', 'name', 'categoryId', 'status'],
  additionalProperties: false,
  properties: { id, name: { type: 'string' }, categoryId: id, status },
};
const petFields = { name: { type: 'string', minLength: 1, maxLength: 100, pattern: '\\S' }, categoryId: id, status };
const newPet = {
  type: 'object',
  required: ['name', 'categoryId'],
  additionalProperties: false,
  properties: { ...petFields, status: { ...status, default: 'available' } },
};
const petPatch = { type: 'object', minProperties: 1, additionalProperties: false, properties: petFields };
const petParams = { type: 'object', properties: { petId: id } };
const order = {
  type: 'object',
  required: ['id', 'petId', 'status', 'placedAt', 'updatedAt'],
  additionalProperties: false,
  properties: {
    id,
    petId: id,
    status: { type: 'string', enum: ['placed', 'completed', 'cancelled'] },
    placedAt: { type: 'string' },
    updatedAt: { type: 'string' },
  },
};
const newOrder = { type: 'object', required: ['petId'], additionalProperties: false, properties: { petId: id } };
const orderPatch = {
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: { status: { type: 'string', enum: Object.keys(PET_AFTER_ORDER) } },
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

// A merge patch (RFC 7396) is JSON, read as the other bodies are.
app.addContentTypeParser(
  'application/merge-patch+json',
  { parseAs: 'string' },
  app.getDefaultJsonParser('error', 'error'),
);

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
      next.set('cursor', encodeCursor(last.pet.id));
      reply.header('link', `</v1/pets?${next.toString()}>; rel="next"`);
    }
    return page.items.map(({ pet }) => pet);
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
    schema: { params: petParams, response: { 200: pet, '4xx': error } },
  },
  async (request, reply) => {
    const found = await storage.pets.get(request.params.petId);
    if (found === undefined) throw new ApiError(404, 'not_found', `No pet with id ${request.params.petId}`);
    return reply.header('etag', `"${found.version}"`).send(found.pet);
  },
);

/** The fields of `patch` that change the pet; a 409 for a status move it may not make. No If-Match. */
function changes({ pet, placedOrderId }: PetState, patch: PetFields): PetFields | undefined {
  const changed = Object.fromEntries(
    Object.entries(patch).filter(([field, value]) => pet[field as keyof PetFields] !== value),
  );
  const to = (changed as PetFields).status;
  if (to !== undefined && placedOrderId !== undefined)
    throw new ApiError(409, 'pet_on_order', `Pet ${pet.id} has a placed order (${placedOrderId})`);
  if (to !== undefined && !PET_MOVES[pet.status].includes(to))
    throw new ApiError(409, 'invalid_transition', `Pet ${pet.id} cannot move from ${pet.status} to ${to}`);
  return Object.keys(changed).length === 0 ? undefined : changed;
}

app.patch<{ Params: { petId: number }; Body: PetFields }>(
  '/v1/pets/:petId',
  { onRequest: authenticate, schema: { params: petParams, body: petPatch, response: { 200: pet, '4xx': error } } },
  async (request, reply) => {
    const { petId } = request.params;
    const updated = await storage.pets.update(petId, (current) => changes(current, request.body));
    if (updated === undefined) throw new ApiError(404, 'not_found', `No pet with id ${petId}`);
    return reply.header('etag', `"${updated.version}"`).send(updated.pet);
  },
);

app.post<{ Body: { petId: number } }>(
  '/v1/store/orders',
  { onRequest: authenticate, schema: { body: newOrder, response: { 201: order, '4xx': error } } },
  async (request, reply) => {
    const { petId } = request.body;
    const placed = await storage.orders.place(petId, (current) => {
      if (current?.pet.status !== 'available' || current.placedOrderId !== undefined)
        throw new ApiError(409, 'pet_not_available', `Pet ${petId} is not available`);
      return 'pending';
    });
    if (placed.outcome !== 'created') throw new Error('no idempotency key was sent');
    return reply.code(201).header('location', `/v1/store/orders/${placed.created.id}`).send(placed.created);
  },
);

app.patch<{ Params: { orderId: number }; Body: { status: keyof typeof PET_AFTER_ORDER } }>(
  '/v1/store/orders/:orderId',
  {
    onRequest: authenticate,
    schema: {
      params: { type: 'object', properties: { orderId: id } },
      body: orderPatch,
      response: { 200: order, '4xx': error },
    },
  },
  async (request) => {
    const { orderId } = request.params;
    const to = request.body.status;
    const updated = await storage.orders.update(orderId, (current) => {
      if (current.status === to) return undefined;
      if (current.status !== 'placed')
        throw new ApiError(409, 'invalid_transition', `Order ${orderId} cannot move from ${current.status} to ${to}`);
      return { status: to as OrderStatus, petStatus: PET_AFTER_ORDER[to] };
    });
    if (updated === undefined) throw new ApiError(404, 'not_found', `No order with id ${orderId}`);
    return updated;
  },
);

await app.listen({ host: env.HOST ?? '127.0.0.1', port: Number(env.PORT ?? '3000') });
