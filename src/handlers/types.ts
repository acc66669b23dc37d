import type { FastifyReply, FastifyRequest } from 'fastify';
import type { operations } from '../../generated/openapi.js';

/** Every operation in the contract, by operationId. */
export type OperationId = keyof operations;

type Operation<K extends OperationId> = operations[K];
type Parameters<K extends OperationId> = Operation<K>['parameters'];

type JsonBody<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;

/** The JSON body the contract gives an operation's 2xx responses. */
export type SuccessBody<K extends OperationId> = {
  [S in keyof Operation<K>['responses']]: S extends 200 | 201 ? JsonBody<Operation<K>['responses'][S]> : never;
}[keyof Operation<K>['responses']];

/** Node lower-cases header names; the contract spells them as documented. */
type LowercaseKeys<T> = { [P in keyof T as Lowercase<P & string>]: T[P] };

/** The request as validated against the contract (defaults applied, integers coerced). */
export type OperationRequest<K extends OperationId> = FastifyRequest<{
  Params: NonNullable<Parameters<K>['path']>;
  Querystring: NonNullable<Parameters<K>['query']>;
  Headers: LowercaseKeys<NonNullable<Parameters<K>['header']>>;
  Body: JsonBody<Operation<K>['requestBody']>;
}>;

/**
 * An operation's implementation: typed input in, typed success body out. Failures are thrown as
 * `ApiError`s, which become the contract's Error responses.
 */
export type OperationHandler<K extends OperationId> = (
  request: OperationRequest<K>,
  reply: FastifyReply,
) => Promise<SuccessBody<K>>;

/** A handler for every operationId of the contract. */
export type OperationHandlers = { [K in OperationId]: OperationHandler<K> };

/**
 * The handlers written so far. A contract operation may be ahead of its handler, so that
 * `npm run dev` can serve it from the contract; `npm run build` and a production start refuse it,
 * naming the operation (scripts/build-contract.ts, src/app.ts).
 */
export type ServiceHandlers = Partial<OperationHandlers>;
