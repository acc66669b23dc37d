import type { Contract } from '../contract/document.js';
import { StoreRules } from '../domain/rules.js';
import { DEFAULT_WEBHOOKS, type WebhookSettings } from '../events/settings.js';
import type { Storage } from '../storage/types.js';
import { orderHandlers } from './orders.js';
import { petHandlers } from './pets.js';
import type { HandlerModule, ServiceHandlers } from './types.js';
import { webhookHandlers } from './webhooks.js';

/**
 * The handler modules, one per contract tag. Each is given the whole context and takes what it
 * needs, so an operation that reads another repository changes only its own module.
 */
const MODULES: HandlerModule[] = [petHandlers, orderHandlers, webhookHandlers];

/**
 * The service object the glue resolves operationIds against: one entry per operation of the newest
 * version's `contract`, answering under `basePath` (an older version's, whose requests and answers
 * the version changes migrate: docs/versions.md).
 */
export function serviceHandlers(
  storage: Storage,
  contract: Contract,
  webhookSettings: WebhookSettings = DEFAULT_WEBHOOKS,
  basePath: string = contract.basePath,
): ServiceHandlers {
  const context = { storage, rules: new StoreRules(contract.dereferenced), contract, basePath, webhookSettings };
  const handlers: ServiceHandlers = {};
  for (const module of MODULES) {
    for (const [operationId, handler] of Object.entries(module(context))) {
      if (Object.hasOwn(handlers, operationId)) throw new Error(`two handler modules answer ${operationId}`);
      Object.assign(handlers, { [operationId]: handler });
    }
  }
  return handlers;
}
