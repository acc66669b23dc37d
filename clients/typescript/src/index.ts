export { createClient, type ClientOptions, type PetstoreClient, type Retry } from './client.js';
export { isPetstoreError, PetstoreError, PetstoreNetworkError } from './errors.js';
export { canMove, transitions, type Status, type StatusBeside } from './transitions.js';
export { PetstoreWebhookError, unwrap, type HeadersLike, type ReceivedEvent, type WebhookEvent } from './webhooks.js';
export type {
  CallOptions,
  Data,
  ErrorCode,
  Input,
  Item,
  ListOperationId,
  OperationId,
  Page,
  Result,
  ResultOf,
} from './types.js';
export type { ErrorCodes } from './generated/contract.js';
export type { components, operations, paths, webhooks } from './generated/openapi.js';
