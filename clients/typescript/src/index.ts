export { createClient, type ClientOptions, type HookContext, type PetstoreClient, type Retry } from './client.js';
export { isKnownCode, isPetstoreError, PetstoreError, PetstoreNetworkError } from './errors.js';
export { canMove, transitions, type Status, type StatusBeside } from './transitions.js';
export {
  PetstoreWebhookError,
  unwrap,
  type HeadersLike,
  type ReceivedEvent,
  type UnwrapOptions,
  type WebhookCheck,
  type WebhookEvent,
} from './webhooks.js';
export type {
  CallOptions,
  Data,
  ErrorCode,
  Input,
  Item,
  ListOperationId,
  OperationId,
  Page,
  ReportedCode,
  Result,
  ResultOf,
} from './types.js';
export type { ErrorCodes, OperationDocs, UnknownCode } from './generated/contract.js';
export type { components, operations, paths, webhooks } from './generated/openapi.js';
