import type { FastifyReply, FastifyRequest } from 'fastify';
import type { operations } from '../../generated/openapi.js';
import type { Contract } from '../contract/document.js';
import type { StoreRules } from '../domain/rules.js';
import type { WebhookSettings } from '../events/settings.js';
import type { Storage } from '../storage/types.js';

/** Every operation in the contract, by operationId. */
export type OperationId = keyof operations;

type Operation<K extends OperationId> = operations[K];
type Parameters<K extends OperationId> = Operation<K>['parameters'];

/** A request or response body, of whichever media type the contract gives it; undefined for none. */
type BodyOf<T> = T extends { content: infer Content } ? Content[keyof Content] : undefined;

type SuccessStatus = 200 | 201 | 202 | 203 | 204 | 205 | 206;

/** The body of any 2xx response the contract gives an operation (undefined for a 204). */
export type SuccessBody<K extends OperationId> = {
  [S in keyof Operation<K>['responses']]: S extends SuccessStatus ? BodyOf<Operation<K>['responses'][S]> : never;
}[keyof Operation<K>['responses']];

/** Node lower-cases header names; the contract spells them as documented. */
type LowercaseKeys<T> = { [P in keyof T as Lowercase<P & string>]: T[P] };

/** The request as validated against the contract (defaults applied, integers coerced). */
export type OperationRequest<K extends OperationId> = FastifyRequest<{
  Params: NonNullable<Parameters<K>['path']>;
  Querystring: NonNullable<Parameters<K>['query']>;
  Headers: LowercaseKeys<NonNullable<Parameters<K>['header']>>;
  Body: BodyOf<Operation<K>['requestBody']>;
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

/** Everything a handler module may need: each takes what its operations use, from any repository. */
export interface HandlerContext {
  storage: Storage;
  /** The store's rules, read from the contract. */
  rules: StoreRules;
  /** The newest version's contract as loaded: its event scopes, ... */
  contract: Contract;
  /** The base path (`/v1`) of the version answered, for Location and Link URLs. */
  basePath: string;
  webhookSettings: WebhookSettings;
}

/** One module per contract tag: its handlers, built from the context (src/handlers/index.ts lists the modules). */
export type HandlerModule = (context: HandlerContext) => ServiceHandlers;
